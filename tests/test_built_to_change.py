"""Built to be changed: the first edits a researcher makes to a copy keep working, and every stop
and fault says what is on disk. One test per failure of the trial that found them (issue 67),
numbered as the issue numbers them, each reproducing its command."""

import fcntl
import glob
import hashlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, SCRIPTS, _module, one_error_line, read_saved, trained

import tooling

PYTHON = sys.executable


def start(script, *flags, cwd=ROOT, pythonpath=None):
    """`python <script> <flags>` started in a subprocess, as a user would, its output captured."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(pythonpath or ""))
    return subprocess.Popen([PYTHON, str(script), *map(str, flags)], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run(script, *flags, **kwargs) -> subprocess.CompletedProcess:
    proc = start(script, *flags, **kwargs)
    out, err = proc.communicate(timeout=180)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def last_line(out: subprocess.CompletedProcess, code: int) -> str:
    """The one line a stop ends with, and no traceback."""
    assert out.returncode == code and "Traceback" not in out.stderr, (out.returncode, out.stderr)
    return out.stderr.strip().splitlines()[-1]


def refusal(module, **args) -> str:
    """The one-line error with which `main` refuses these args, in this process."""
    with pytest.raises(SystemExit) as stop:
        tooling.main(module, tooling.run_args(module)(**args))
    assert isinstance(stop.value.code, str) and "\n" not in stop.value.code, stop.value.code
    return stop.value.code


def rewrite(path, change):
    """Write the file at `path` again, its content changed by `change` (as a changed script's
    file would be written)."""
    content = read_saved(path, weights_only=False)
    change(content)
    tooling.write(content, str(path))


def snapshot(folder) -> dict:
    """Every file of a folder with its bytes."""
    return {f: open(f, "rb").read() for f in sorted(glob.glob(f"{folder}/*") + glob.glob(f"{folder}/.*"))}


# 1. A flag added to Args: an old file on the new script, a new file on the old script.
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_file_without_a_new_flag_takes_its_default_and_one_with_an_unknown_flag_is_named(name, tmp_path,
                                                                                         capsys):
    module = _module(name)
    run_dir = trained(module, tmp_path)
    model, checkpoint = f"{run_dir}/model.pt", f"{run_dir}/checkpoint.pt"
    for path in (model, checkpoint):  # written before --eval-seed existed
        rewrite(path, lambda content: content["args"].pop("eval_seed"))
    capsys.readouterr()
    assert len(tooling.main(module, tooling.run_args(module)(eval_checkpoint=model, eval_episodes=1))["eval_returns"]) == 1
    assert f"note: {model} has no --eval-seed: it takes its default, None" in capsys.readouterr().err
    steps = read_saved(checkpoint, weights_only=False)["state"]["global_step"]
    resumed = tooling.main(module, tooling.run_args(module)(resume=checkpoint, total_timesteps=2 * steps))
    assert resumed["global_step"] > steps
    assert f"note: {checkpoint} has no --eval-seed: it takes its default, None" in capsys.readouterr().err
    # Written by a copy with a flag this script lacks: ignored for an evaluation, refused for a resume.
    for path in (model, checkpoint):
        rewrite(path, lambda content: content["args"].update(kl_target=0.01))
    assert len(tooling.load_agent(module, model).state_dict())
    assert f"note: {model} has --kl-target, which {name}.py lacks: ignored" in capsys.readouterr().err
    line = refusal(module, resume=checkpoint, total_timesteps=4 * steps)
    assert line == (f"{name}.py: error: --resume: {checkpoint} was trained with --kl-target, which "
                    f"{name}.py lacks: resume with the script that wrote it")


def test_a_copy_with_a_new_flag_reads_the_files_of_the_original_and_the_original_reads_its(tmp_path):
    """The trial's command: ppo_recurrent.py copied, --kl-target added to its Args (may be 0, as its
    help says), against files of the original, and the original against the copy's files."""
    copy = tmp_path / "copy" / "ppo_recurrent.py"
    copy.parent.mkdir()
    shutil.copy(ROOT / "tooling.py", copy.parent)
    source = (ROOT / "ppo_recurrent.py").read_text()
    field = "    seed: int = 1\n"
    assert source.count(field) == 1
    copy.write_text(source.replace(field, '    kl_target: float = 0.0\n    """KL target ≥ 0 of a '
                                          'penalty (0: none)"""\n' + field))
    flags = ["--total-timesteps", 2048, "--eval-episodes", 1, "--save-model"]
    original = run(ROOT / "ppo_recurrent.py", *flags, "--log-dir", tmp_path / "a", "--checkpoint-every", 1)
    assert original.returncode == 0, original.stderr
    (folder,) = glob.glob(f"{tmp_path}/a/*")
    out = run(copy, "--eval-checkpoint", f"{folder}/model.pt", cwd=copy.parent)
    assert out.returncode == 0 and "mean return" in out.stdout, out.stderr
    assert f"{folder}/model.pt has no --kl-target: it takes its default, 0.0" in out.stderr
    out = run(copy, "--resume", f"{folder}/checkpoint.pt", "--total-timesteps", 3072, cwd=copy.parent)
    assert out.returncode == 0, out.stderr
    new = run(copy, *flags, "--log-dir", tmp_path / "b", cwd=copy.parent)  # --kl-target 0 is allowed
    assert new.returncode == 0, new.stderr
    (folder,) = glob.glob(f"{tmp_path}/b/*")
    out = run(ROOT / "ppo_recurrent.py", "--eval-checkpoint", f"{folder}/model.pt")
    assert out.returncode == 0 and "which ppo_recurrent.py lacks: ignored" in out.stderr, out.stderr


# 2. load gives the true cause.
def test_a_checkpoint_whose_env_module_cannot_be_imported_is_named_so(tmp_path):
    own = ROOT / "tests"
    out = run(ROOT / "ppo_discrete.py", "--env-id", "own_env:PointGrid-v0", "--total-timesteps", 1024,
              "--checkpoint-every", 1, "--eval-episodes", 0, "--log-dir", tmp_path, pythonpath=own)
    assert out.returncode == 0, out.stderr
    (checkpoint,) = glob.glob(f"{tmp_path}/*/checkpoint.pt")
    line = one_error_line(run(ROOT / "ppo_discrete.py", "--resume", checkpoint), "ppo_discrete")
    assert line.endswith(f"{checkpoint} needs the module own_env, which Python cannot import from here: "
                         "run in its folder, or add that folder to PYTHONPATH"), line
    assert run(ROOT / "ppo_discrete.py", "--resume", checkpoint, "--total-timesteps", 2048,
               pythonpath=own).returncode == 0


@pytest.mark.parametrize("name", SCRIPTS)
def test_load_names_a_folder_a_foreign_file_damage_and_an_older_release(name, tmp_path):
    module = _module(name)
    run_dir = trained(module, tmp_path)
    for resume in (False, True):
        kind = "checkpoint" if resume else "model"
        path = f"{run_dir}/{kind}.pt"
        data = open(path, "rb").read()
        assert data.endswith(f"\npgref {tooling.FORMAT} {tooling.RELEASE}\n".encode() + data[-32:])

        def cause(content: bytes, resume=resume) -> str:
            (tmp_path / "file.pt").write_bytes(content)
            with pytest.raises(SystemExit) as stop:
                tooling.load(module, str(tmp_path / "file.pt"), resume)
            return str(stop.value.code).removeprefix(f"{tmp_path}/file.pt ")  # tooling.load's own line

        with pytest.raises(SystemExit, match=f"{tmp_path} is a folder: give the file, <run>/{kind}.pt$"):
            tooling.load(module, str(tmp_path), resume)
        buffer = io.BytesIO()
        torch.save(read_saved(f"{run_dir}/model.pt")["model"], buffer)  # a plain state_dict
        for foreign in (os.urandom(5000), buffer.getvalue(), b""):
            assert cause(foreign) == "is no model.pt or checkpoint.pt that pgref wrote"
        damaged = "is damaged (cut short, or changed since it was written): its SHA-256 is not the one saved with it"
        assert cause(data[:len(data) // 2]) == damaged
        # One flipped byte anywhere: the first bytes, every 97th, the trailer and the digest.
        for at in [*range(8), *range(0, len(data), 97), *range(len(data) - 64, len(data))]:
            flipped = bytearray(data)
            flipped[at] ^= 0xFF
            assert cause(bytes(flipped)) == damaged, at
        # pgref 0.2.0's envelope, and a file of a release with another format.
        content = data[6:data.rindex(b"\npgref ")]
        buffer = io.BytesIO()
        torch.save({"format": 2, "sha256": hashlib.sha256(content).hexdigest(), "content": content}, buffer)
        assert cause(buffer.getvalue()) == (f"was written by pgref 0.2.0 (file format 2), and {name}.py of pgref "
                                            f"{tooling.RELEASE} reads format {tooling.FORMAT}: git checkout a031320 "
                                            "reads it")
        framed = b"pgref\n" + content + b"\npgref 4 0.9.1\n"
        assert cause(framed + hashlib.sha256(framed).digest()).startswith("was written by pgref 0.9.1 (file format 4)")


# 3. Every stop says what is on disk.
def test_sigterm_stops_as_ctrl_c_does_with_its_own_exit_code(tmp_path):
    proc = start(ROOT / "ppo_discrete.py", "--total-timesteps", 200_000, "--checkpoint-every", 1,
                 "--log-dir", tmp_path)
    deadline = time.time() + 120
    while not glob.glob(f"{tmp_path}/*/checkpoint.pt"):
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    (folder,) = glob.glob(f"{tmp_path}/*")
    line = last_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), 143)
    assert line == (f"ppo_discrete.py: stopped by SIGTERM in training; --resume {folder}/checkpoint.pt goes on "
                    "from its last checkpoint")


def test_an_env_that_raises_mid_run_ends_in_one_line_with_the_resume_command(tmp_path):
    out = run(ROOT / "ppo_discrete.py", "--env-id", "own_env:PointGridFaulty-v0", "--num-envs", 1,
              "--num-steps", 64, "--num-minibatches", 1, "--checkpoint-every", 1, "--log-dir", tmp_path,
              pythonpath=ROOT / "tests")
    (folder,) = glob.glob(f"{tmp_path}/*")
    assert last_line(out, 1) == (
        "ppo_discrete.py: error: own_env:PointGridFaulty-v0: its step raised ConnectionError: the simulator "
        f"stopped answering, in training; --resume {folder}/checkpoint.pt goes on from its last checkpoint")
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("log_dir, cause", [("/etc/hostname", "Not a directory"),
                                            ("/proc/pgref", "No such file or directory"),
                                            ("/sys/pgref", "Operation not permitted")])
def test_a_log_folder_that_cannot_be_written_is_refused_before_training(log_dir, cause):
    out = run(ROOT / "reinforce.py", "--log-dir", log_dir)
    assert one_error_line(out, "reinforce").startswith(f"reinforce.py: error: cannot write the run folder {log_dir}/")
    assert f": {cause}; give a --log-dir you can write" in out.stderr and not out.stdout


def test_a_run_folder_deleted_mid_run_ends_in_one_line(tmp_path):
    proc = start(ROOT / "ppo_discrete.py", "--total-timesteps", 200_000, "--checkpoint-every", 1,
                 "--log-dir", tmp_path)
    deadline = time.time() + 120
    while not glob.glob(f"{tmp_path}/*/checkpoint.pt"):
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    (folder,) = glob.glob(f"{tmp_path}/*")
    subprocess.run(["rm", "-rf", folder], check=True)
    out, err = proc.communicate(timeout=120)
    line = last_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), 1)
    assert re.fullmatch(f"ppo_discrete.py: error: cannot write {folder}: No such file or directory, in "
                        "training; saved: nothing", line), line
    assert len(err.strip().splitlines()) == 1, err


# 4. One run, one writer; a refused resume writes nothing.
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_folder_in_use_is_refused_and_a_refused_resume_writes_nothing(name, tmp_path):
    module = _module(name)
    run_dir = trained(module, tmp_path)
    checkpoint = f"{run_dir}/checkpoint.pt"
    before = snapshot(run_dir)
    with open(f"{run_dir}/.lock", "a") as lock:  # another run writes the folder
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert refusal(module, resume=checkpoint, total_timesteps=10 ** 6) == (
            f"{name}.py: error: {run_dir} is in use by another run; wait for it to end, or resume a copy of it")
    finished = refusal(module, resume=checkpoint)  # the run has trained all its steps
    assert finished.startswith(f"{name}.py: error: --resume: the run has trained its ")
    assert snapshot(run_dir) == before


# 5. Refuse early, show progress.
def test_capture_video_on_an_env_that_cannot_render_is_refused_before_training(tmp_path):
    out = run(ROOT / "ppo_discrete.py", "--env-id", "own_env:PointGrid-v0", "--capture-video", "--log-dir",
              tmp_path, pythonpath=ROOT / "tests")
    assert "render_mode" in one_error_line(out, "ppo_discrete") and not os.listdir(tmp_path)


def test_a_long_evaluation_prints_its_progress(tmp_path, monkeypatch, capsys):
    module = _module("ppo_discrete")
    model = f"{trained(module, tmp_path)}/model.pt"
    clock = iter(range(0, 10 ** 6, 3))  # three seconds a reading of the clock
    monkeypatch.setattr(module.time, "time", lambda: next(clock))
    capsys.readouterr()
    tooling.main(module, tooling.run_args(module)(eval_checkpoint=model, eval_episodes=4))
    assert re.search(r"^evaluating: episode [1234]/4, [\d,]+ steps played$", capsys.readouterr().out, re.M)


# 6. Extension points that tell.
def test_the_logged_statistics_carry_no_gradient_and_the_loss_says_so():
    for name in ("ppo_discrete", "ppo_continuous", "ppo_recurrent"):
        module = _module(name)
        assert "carry no gradient" in " ".join(module.ppo_loss.__doc__.split())
        x = torch.randn(8, requires_grad=True)
        _, stats = module.ppo_loss(x, torch.zeros(8), torch.randn(8), x, torch.zeros(8), torch.randn(8),
                                   x, 0.2, True, 0.01, 0.5)
        assert not [key for key, value in stats.items() if value.requires_grad]  # the losses too


# 7. Releases: each is a commit of main (test_every_line_true.py, issue 73).
