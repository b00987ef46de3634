"""Nothing silent: every bad flag, file and stop is answered in one true line, and the saved files
say what they are. One test per failure of the trial that found them (issue 56), each reproducing
its command."""

import dataclasses
import hashlib
import io
import os
import re
import subprocess
import sys
import tomllib

import pytest
import torch
from conftest import (
    ROOT,
    SCRIPTS,
    SHORT_RUNS,
    VECTOR_SCRIPTS,
    _module,
    evaluate_checkpoint,
    one_error_line,
    read_saved,
    run_script,
    short_args,
    trained,
)

sys.path.insert(0, str(ROOT / "tools"))
from resume_check import stopping_at  # noqa: E402

import tooling

SCRIPT_FILES = [f"{name}.py" for name in SCRIPTS]


def run_own_env(script: str, *flags: str) -> subprocess.CompletedProcess:
    """`python <script> <flags>` with tests/ on PYTHONPATH, so that own_env:<Id> envs are found."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(ROOT / "tests"))
    return subprocess.run([sys.executable, str(ROOT / script), *flags], capture_output=True, text=True,
                          timeout=120, env=env)


def interrupt_at_update(monkeypatch, module, update: int | None = None, evaluation: bool = False):
    """Make `main` meet a Ctrl-C after `update` updates of `train` (tools/resume_check.py's
    stopping_at), or in the evaluation."""
    if update is not None:
        monkeypatch.setattr(module, "train", stopping_at(module, update))
    if evaluation:
        def evaluate(*_):
            raise KeyboardInterrupt
        monkeypatch.setattr(tooling, "evaluate", evaluate)


# 1. A stop tells the truth: the --resume command only where a checkpoint exists.
@pytest.mark.parametrize("name", SCRIPTS)
@pytest.mark.parametrize("checkpoint_every", [0, 2])
def test_ctrl_c_in_training_names_resume_only_where_a_checkpoint_exists(name, checkpoint_every, tmp_path,
                                                                       monkeypatch, capsys):
    module = _module(name)
    interrupt_at_update(monkeypatch, module, update=1)  # before any checkpoint
    with pytest.raises(SystemExit) as stop:
        tooling.main(module, short_args(module, str(tmp_path), checkpoint_every=checkpoint_every, save_model=True))
    assert stop.value.code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{name}.py: interrupted in training; saved: nothing"], err

    monkeypatch.undo()
    interrupt_at_update(monkeypatch, module, update=3)
    if checkpoint_every:  # the checkpoint of update 2 exists: its --resume goes on
        with pytest.raises(SystemExit):
            tooling.main(module, short_args(module, str(tmp_path), checkpoint_every=checkpoint_every))
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert re.search(r"--resume (\S+) goes on", line), line
        path = re.search(r"--resume (\S+) goes on", line).group(1)
        assert os.path.isfile(path) and read_saved(path, weights_only=False)["state"]["global_step"]


# 2. Ctrl-C during the evaluation after training says what is on disk.
@pytest.mark.parametrize("name", SCRIPTS)
def test_ctrl_c_in_the_evaluation_says_what_is_on_disk(name, tmp_path, monkeypatch, capsys):
    module = _module(name)
    interrupt_at_update(monkeypatch, module, evaluation=True)
    with pytest.raises(SystemExit) as stop:
        tooling.main(module, short_args(module, str(tmp_path), save_model=True, eval_episodes=1))
    assert stop.value.code == 130
    (line,) = capsys.readouterr().err.strip().splitlines()
    (run_dir,) = tmp_path.iterdir()
    assert line == (f"{name}.py: interrupted after training (saving or evaluating); saved: "
                    f"{run_dir}/checkpoint.pt and {run_dir}/model.pt"), line


# 3 and 4. NaN and inf are refused for every float flag, before a run folder exists.
@pytest.mark.parametrize("script", SCRIPT_FILES)
@pytest.mark.parametrize("flag", ["learning-rate", "gamma", "gae-lambda"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_nan_and_inf_flags_are_refused_before_anything_is_written(script, flag, value, tmp_path):
    if not hasattr(_module(script[:-3]).Args, flag.replace("-", "_")):
        pytest.skip(f"{script} has no --{flag}")
    out = run_script(script, f"--{flag}", value, "--log-dir", str(tmp_path / "runs"), timeout=60)
    line = one_error_line(out, script)
    assert f"--{flag} must be finite" in line and value in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_float_flag_refuses_nan(name):
    """The rule covers every float flag of Args and RunArgs, not a list of names."""
    module = _module(name)
    floats = [f.name for f in dataclasses.fields(tooling.run_args(module)) if f.type in (float, float | None)]
    assert len(floats) >= 2
    for field in floats:
        args = short_args(module, "unused")
        setattr(args, field, float("nan"))
        with pytest.raises(SystemExit, match=f"--{field.replace('_', '-')} must be finite"):
            tooling.check_args(module, args)


# 5. A collapse is named, at that update; a healthy run never warns.
def test_a_collapsed_policy_is_named_at_its_update(tmp_path):
    out = run_script("ppo_discrete.py", "--total-timesteps", "8192", "--learning-rate", "50",
                     "--log-dir", str(tmp_path), "--eval-episodes", "1")
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning: the policy collapsed")]
    assert warnings and "at step 512:" in warnings[0] and "step size too large" in warnings[0], out.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_healthy_run_never_warns_of_a_collapse(name, tmp_path, capsys):
    module = _module(name)
    steps = {"reinforce": 20_000, "vpg": 20_000, "trpo": 20_000, "ppo_discrete": 20_480, "ppo_continuous": 8192,
             "ppo_recurrent": 20_480, "ppo_atari": 20_480}
    env_id = {"ppo_continuous": "HalfCheetah-v4", "ppo_atari": "MinAtar/Breakout-v1"}.get(name, "CartPole-v1")
    tooling.main(module, tooling.run_args(module)(env_id=env_id, total_timesteps=steps[name], eval_episodes=0,
                                                  log_dir=str(tmp_path)))
    assert "collapsed" not in capsys.readouterr().err


# 6. --eval-checkpoint refuses a flag that changes what the model means.
@pytest.mark.parametrize("flags", [["--no-norm-obs"], ["--hidden-size", "32"], ["--learning-rate", "1e-3"]])
def test_eval_checkpoint_refuses_flags_that_change_the_model(flags, tmp_path):
    ppo = _module("ppo_continuous")
    model = f"{trained(ppo, tmp_path)}/model.pt"
    line = one_error_line(run_script("ppo_continuous.py", "--eval-checkpoint", model, *flags), "ppo_continuous.py")
    assert line.endswith(f"leave out --{flags[0].removeprefix('--no-').removeprefix('--')}"), line
    assert len(evaluate_checkpoint(ppo, model, "--eval-episodes", "2", "--eval-seed", "5", "--seed", "3")) == 2


# 7, 8. A file cut short or changed is refused in one line that says so.
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_truncated_or_altered_file_is_refused(name, tmp_path):
    run_dir = trained(_module(name), tmp_path)
    for file, flag in (("model.pt", "--eval-checkpoint"), ("checkpoint.pt", "--resume")):
        data = open(f"{run_dir}/{file}", "rb").read()
        cut = tmp_path / f"cut-{file}"
        cut.write_bytes(data[:len(data) // 2])
        assert "is damaged (cut short, or changed" in one_error_line(run_script(f"{name}.py", flag, str(cut)), name)
        # One flipped bit in every tensor of the content, framed again with the file's digest.
        content = read_saved(f"{run_dir}/{file}", weights_only=False)
        weights = content["model"] if file == "model.pt" else content["state"]["agent"].state_dict()
        for tensor in weights.values():
            if tensor.dtype == torch.float32 and tensor.numel():
                tensor.view(torch.int32).view(-1)[0] ^= 1
        if file == "checkpoint.pt":
            content["state"]["agent"].load_state_dict(weights)
        buffer = io.BytesIO()
        torch.save(content, buffer)
        altered = tmp_path / f"altered-{file}"
        altered.write_bytes(b"pgref\n" + buffer.getvalue() + data[data.rindex(b"\npgref "):])
        line = one_error_line(run_script(f"{name}.py", flag, str(altered)), name)
        assert "changed since it was written" in line, line


# 9. Saved files carry a format version; another version is refused, naming the release to use.
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_file_of_another_format_is_refused_naming_the_release_to_use(name, tmp_path):
    module = _module(name)
    run_dir = trained(module, tmp_path)
    reads = f"and {name}.py of pgref {tooling.RELEASE} reads format {tooling.FORMAT}: git checkout"
    old = tmp_path / "old-model.pt"  # as the files of pgref 0.1.0: the content alone
    torch.save(read_saved(f"{run_dir}/model.pt"), old)
    line = one_error_line(run_script(f"{name}.py", "--eval-checkpoint", str(old)), name)
    assert f"was written by pgref 0.1.0 (file format 1), {reads} 8df3641 reads it" in line, line
    old_checkpoint = tmp_path / "old-checkpoint.pt"  # its pickled objects, which weights_only refuses
    torch.save(read_saved(f"{run_dir}/checkpoint.pt", weights_only=False), old_checkpoint)
    for flag, path in (("--resume", old_checkpoint), ("--eval-checkpoint", old_checkpoint)):
        line = one_error_line(run_script(f"{name}.py", flag, str(path)), name)
        assert f"(file format 1), {reads} 8df3641 reads it" in line, line
    tensor = tmp_path / "tensor.pt"  # a file of torch.save that no pgref release wrote
    torch.save(torch.zeros(3), tensor)
    assert one_error_line(run_script(f"{name}.py", "--eval-checkpoint", str(tensor)), name).endswith(
        "tensor.pt is no model.pt or checkpoint.pt that pgref wrote")
    data = open(f"{run_dir}/checkpoint.pt", "rb").read()
    assert data.startswith(b"pgref\n") and data[-32:] == hashlib.sha256(data[:-32]).digest()
    assert data[:-32].endswith(f"\npgref {tooling.FORMAT} {tooling.RELEASE}\n".encode())


@pytest.mark.parametrize("name", SCRIPTS)
def test_ctrl_c_names_resume_only_for_a_checkpoint_not_a_model_alone(name, tmp_path, capsys):
    """model.pt is written just before checkpoint.pt: a stop between the two, or a checkpoint that
    could not be written, leaves model.pt alone, which --resume does not take."""
    module = _module(name)
    (tmp_path / "model.pt").write_bytes(b"")
    with pytest.raises(SystemExit):
        tooling.stopped(module, str(tmp_path), "interrupted in training", 130)
    assert capsys.readouterr().err.strip() == f"{name}.py: interrupted in training; saved: {tmp_path}/model.pt"


def test_the_project_version_is_the_changelogs_latest():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(r"^## (\S+)", changelog, re.M).group(1) == version
    assert f"format {tooling.FORMAT}" in changelog


# 10. Action spaces no script handles are named as unsupported, without a circular hint.
@pytest.mark.parametrize("script", [f"{name}.py" for name in VECTOR_SCRIPTS])  # own_env's are vectors
def test_multidiscrete_actions_are_named_unsupported(script):
    out = run_own_env(script, "--env-id", "own_env:PointMultiDiscrete-v0")
    line = one_error_line(out, script)
    assert "MultiDiscrete" in line and "no pgref script takes" in line, line


# 11. --capture-video prints no error of SDL's.
def test_capture_video_prints_no_sdl_error(tmp_path):
    model = f"{trained(_module('ppo_discrete'), tmp_path)}/model.pt"
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")}
    out = subprocess.run([sys.executable, str(ROOT / "ppo_discrete.py"), "--eval-checkpoint", model,
                          "--capture-video", "--eval-episodes", "1"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "error" not in out.stderr.lower(), out.stderr
    assert list((tmp_path).glob("*/videos/*.mp4"))


# 12. A default run prints no note: its --total-timesteps is a whole number of batches.
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_default_run_prints_no_note(name, capsys):
    module = _module(name)
    args = tooling.run_args(module)()
    batch = args.batch_size if name == "reinforce" else args.num_envs * args.num_steps
    assert args.total_timesteps % batch == 0
    tooling.check_args(module, args)
    assert capsys.readouterr().err == ""


# 13. Every error has the same shape, reinforce.py's "no episode ended" too.
def test_reinforce_no_episode_error_has_the_shape_of_every_error():
    out = run_own_env("reinforce.py", "--env-id", "own_env:PointEndless-v0", "--total-timesteps", "2000",
                      "--batch-size", "1000")
    lines = [line for line in out.stderr.splitlines() if "error" in line]
    assert out.returncode == 1 and lines and lines[-1].startswith("reinforce.py: error: no episode"), out.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_env_errors_have_the_shape_of_every_error(name):
    one_error_line(run_script(f"{name}.py", "--env-id", "CartPol-v1"), name)


def test_every_short_run_is_known():  # the parametrisations above cover each script
    assert set(SHORT_RUNS) == set(SCRIPTS)
