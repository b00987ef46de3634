"""Nothing lost: a run killed with SIGKILL and resumed from its checkpoint is the run that was
never stopped; runs never share a folder; --track, the loading function and the short refusals."""

import glob
import hashlib
import itertools
import os
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, SCRIPTS, SHORT_RUNS, kill_after_first_checkpoint, run_folder, run_script
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def cli(flags: dict) -> list[str]:
    """Args' fields as the command line gives them (tyro: --flag / --no-flag for a bool)."""
    names = {key: key.replace("_", "-") for key in flags}
    return [(f"--{'' if value else 'no-'}{names[key]}" if isinstance(value, bool)
             else f"--{names[key]}={value}") for key, value in flags.items()]


def outcome(folder: str) -> tuple:
    """What a run leaves: the sha1 of its final weights (model.pt), the episodic returns that
    TensorBoard shows (after it drops the events logged past a checkpoint) and the evaluation."""
    model = torch.load(f"{folder}/model.pt", weights_only=True)["model"]
    weights = hashlib.sha1(b"".join(t.numpy().tobytes() for t in model.values())).hexdigest()
    events = EventAccumulator(folder, size_guidance={"scalars": 0})
    events.Reload()
    returns = [(e.step, e.value) for e in events.Scalars("charts/episodic_return")]
    return weights, returns, [e.value for e in events.Scalars("eval/episodic_return")]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_killed_run_resumes_to_the_run_never_stopped(name, tmp_path):
    flags = dict(SHORT_RUNS[name], eval_episodes=2, checkpoint_every=1, save_model=True)
    module = __import__(name)  # the run never stopped, here (CPU runs reproduce in any process)
    module.train(module.Args(**flags, log_dir=str(tmp_path / "whole")))
    kill_after_first_checkpoint(f"{name}.py", cli(flags), tmp_path / "killed")
    folder = run_folder(tmp_path / "killed")
    resumed = run_script(f"{name}.py", f"--resume={folder}/checkpoint.pt")
    assert resumed.returncode == 0, resumed.stderr
    assert "note:" not in resumed.stderr  # classic control pickles whole: the resume is exact
    assert outcome(folder) == outcome(run_folder(tmp_path / "whole"))


def test_an_env_that_cannot_be_saved_resumes_with_new_episodes_and_says_so(tmp_path):
    flags = ["--env-id=Hopper-v4", "--total-timesteps=2048", "--num-steps=128", "--update-epochs=1",
             "--num-minibatches=4", "--eval-episodes=0", "--checkpoint-every=1"]
    kill_after_first_checkpoint("ppo_continuous.py", flags, tmp_path)
    resumed = run_script("ppo_continuous.py", f"--resume={run_folder(tmp_path)}checkpoint.pt")
    assert resumed.returncode == 0, resumed.stderr
    notes = [line for line in resumed.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: Hopper-v4 cannot be saved mid-episode, so the run goes on with new "
                     "episodes, not exactly as if never stopped"]


def test_resume_refuses_a_flag_that_would_change_the_run(log_dir):
    import ppo_discrete as ppo

    flags = dict(total_timesteps=512, log_dir=log_dir)
    checkpoint = f"{ppo.train(ppo.Args(**flags, eval_episodes=0))['run_dir']}/checkpoint.pt"
    message = "error: --resume goes on with the run's own flags; leave out --learning-rate$"
    with pytest.raises(SystemExit, match=message):
        ppo.train(ppo.Args(**flags, eval_episodes=0, resume=checkpoint, learning_rate=1e-3))
    # flags that change nothing the run computes are taken
    assert len(ppo.train(ppo.Args(**flags, resume=checkpoint, eval_episodes=1))["eval_returns"]) == 1


def test_two_runs_with_the_same_name_keep_their_own_folders(script, log_dir, monkeypatch):
    clock = itertools.count(1_800_000_000, 1e-6)  # both runs start, and end, in the same second
    monkeypatch.setattr(time, "time", lambda: next(clock))
    flags = dict(SHORT_RUNS[script.__name__], save_model=True, log_dir=log_dir)
    first, second = (script.train(script.Args(**flags, seed=1)) for _ in range(2))
    assert first["run_dir"] != second["run_dir"]
    for run in (first, second):
        assert len(glob.glob(f"{run['run_dir']}/events.out.tfevents.*")) == 1
        assert os.path.exists(f"{run['run_dir']}/model.pt")


def wandb_records(path: str) -> list:
    """The records of a W&B run file (.wandb): LevelDB's log format, 32 KiB blocks of chunks, each
    with a 7-byte header (crc, length, kind: 1 whole, 2 first, 3 middle, 4 last), after the
    file's own 7-byte header."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, pos, chunk, records = open(path, "rb").read(), 7, b"", []
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header: padding
            pos += 32768 - pos % 32768
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk, pos = chunk + data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            records.append(Record.FromString(chunk))
            chunk = b""
    return records


def test_track_writes_an_offline_wandb_run_without_waiting_on_the_network(log_dir, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # this machine has no network: nothing to wait on
    flags = ["--total-timesteps=512", "--eval-episodes=1", f"--log-dir={log_dir}"]
    start = time.time()
    plain = run_script("ppo_discrete.py", *flags)
    plain_seconds, start = time.time() - start, time.time()
    tracked = run_script("ppo_discrete.py", *flags, "--track", "--wandb-project-name=tests")
    tracked_seconds = time.time() - start
    assert plain.returncode == 0 and tracked.returncode == 0, tracked.stderr
    # wandb's own start and end take seconds; a retry of a network call would take longer
    assert tracked_seconds < plain_seconds + 30, (plain_seconds, tracked_seconds)
    (folder,) = [f for f in glob.glob(f"{log_dir}/*/") if os.path.isdir(f"{f}/wandb")]
    (path,) = glob.glob(f"{folder}/wandb/offline-run-*/run-*.wandb")
    records = wandb_records(path)
    (run,) = [r.run for r in records if r.HasField("run")]
    name = os.path.basename(folder.rstrip("/"))
    assert run.run_id == run.display_name == name and run.project == "tests"
    config = {item.key: item.value_json for item in run.config.update}
    assert config["env_id"] == '"CartPole-v1"' and config["total_timesteps"] == "512"
    logged = {item.key or "/".join(item.nested_key)
              for r in records if r.HasField("history") for item in r.history.item}
    assert {"charts/episodic_return", "losses/approx_kl", "eval/episodic_return"} <= logged
    # resumed (from the end of the run, here), it goes on in the same W&B run
    assert run_script("ppo_discrete.py", f"--resume={folder}checkpoint.pt").returncode == 0
    ids = {r.run.run_id for path in glob.glob(f"{folder}/wandb/offline-run-*/run-*.wandb")
           for r in wandb_records(path) if r.HasField("run")}
    assert len(glob.glob(f"{folder}/wandb/offline-run-*")) == 2 and ids == {name}


def test_track_without_wandb_is_refused_in_one_line(monkeypatch, capsys):
    import ppo_discrete

    real_find_spec = ppo_discrete.importlib.util.find_spec
    monkeypatch.setattr(ppo_discrete.importlib.util, "find_spec",
                        lambda name: None if name == "wandb" else real_find_spec(name))
    with pytest.raises(SystemExit, match=r"--track needs wandb: pip install wandb$"):
        ppo_discrete.check_args(ppo_discrete.Args(track=True))


def test_load_agent_gives_the_saved_policy_to_code_of_your_own(tmp_path):
    lines, expected = [f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport torch"], []
    for name in SCRIPTS:
        module = __import__(name)
        result = module.train(module.Args(**SHORT_RUNS[name], save_model=True, log_dir=str(tmp_path)))
        obs = torch.linspace(-1, 1, result["agent"].actor[0].in_features)[None]  # (1, obs_dim)
        expected.append(result["agent"].actor(obs).tolist())
        lines += [f"from {name} import load_agent",
                  f"agent = load_agent({result['run_dir'] + '/model.pt'!r})",
                  f"print(agent.actor(torch.tensor({obs.tolist()})).tolist())"]
    (tmp_path / "mine.py").write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "mine.py"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [eval(line) for line in out.stdout.splitlines()] == expected


def test_a_mujoco_video_is_recorded_without_a_display(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    out = run_script("ppo_continuous.py", "--env-id=Hopper-v4", "--total-timesteps=64",
                     "--num-steps=64", "--num-minibatches=2", "--update-epochs=1",
                     "--eval-episodes=1", "--capture-video", f"--log-dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    assert glob.glob(f"{tmp_path}/*/videos/*.mp4")
