"""Nothing lost: a run killed with SIGKILL and resumed from its checkpoint is the run that was
never stopped; runs never share a folder; --track, the loading function and the short refusals."""

import glob
import hashlib
import itertools
import os
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROOT, SCRIPTS, SHORT_RUNS, kill_after_first_checkpoint, read_saved, run_folder, run_script
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import tooling


def cli(flags: dict) -> list[str]:
    """Args' fields as the command line gives them (tyro: --flag / --no-flag for a bool)."""
    names = {key: key.replace("_", "-") for key in flags}
    return [(f"--{'' if value else 'no-'}{names[key]}" if isinstance(value, bool)
             else f"--{names[key]}={value}") for key, value in flags.items()]


def outcome(folder: str) -> tuple:
    """What a run leaves: the sha1 of its final weights (model.pt), the episodic returns that
    TensorBoard shows (after it drops the events logged past a checkpoint) and the evaluation."""
    model = read_saved(f"{folder}/model.pt", weights_only=True)["model"]
    weights = hashlib.sha1(b"".join(t.numpy().tobytes() for t in model.values())).hexdigest()
    events = EventAccumulator(folder, size_guidance={"scalars": 0})
    events.Reload()
    returns = [(e.step, e.value) for e in events.Scalars("charts/episodic_return")]
    return weights, returns, [e.value for e in events.Scalars("eval/episodic_return")]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_killed_run_resumes_to_the_run_never_stopped(name, tmp_path):
    flags = dict(SHORT_RUNS[name], eval_episodes=2, checkpoint_every=1, save_model=True)
    module = __import__(name)  # the run never stopped, here (CPU runs reproduce in any process)
    tooling.main(module, tooling.run_args(module)(**flags, log_dir=str(tmp_path / "whole")))
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


def test_resume_refuses_a_flag_that_would_change_the_run_and_prints_nothing_before(log_dir, capsys):
    import ppo_discrete as ppo

    flags = dict(total_timesteps=600, log_dir=log_dir)  # not whole batches: trains 512 steps
    checkpoint = f"{tooling.main(ppo, tooling.run_args(ppo)(**flags, eval_episodes=0))['run_dir']}/checkpoint.pt"
    capsys.readouterr()
    message = "error: --resume takes the flags the file was trained with: leave out --learning-rate$"
    with pytest.raises(SystemExit, match=message):
        tooling.main(ppo, tooling.run_args(ppo)(**flags, eval_episodes=0, resume=checkpoint, learning_rate=1e-3))
    assert capsys.readouterr().err == ""  # nothing printed before the refusal
    # flags that change nothing the run computes are taken, and a larger --total-timesteps
    resumed = tooling.main(ppo, tooling.run_args(ppo)(log_dir=log_dir, resume=checkpoint, total_timesteps=1024, eval_episodes=1))
    assert resumed["global_step"] == 1024 and len(resumed["eval_returns"]) == 1


def test_a_larger_total_extends_a_finished_run_whose_evaluations_are_logged_once(log_dir):
    """A finished run resumed as it was is refused (it has nothing to train); with a larger
    --total-timesteps it trains on. Each evaluation is logged at the step of the policy it
    evaluated, so the two never share points in TensorBoard."""
    import ppo_discrete as ppo

    first = tooling.main(ppo, tooling.run_args(ppo)(total_timesteps=1024, eval_episodes=2, log_dir=log_dir))
    checkpoint = f"{first['run_dir']}/checkpoint.pt"
    with pytest.raises(SystemExit, match="has trained its 1,024 steps; give a larger --total-timesteps$"):
        tooling.main(ppo, tooling.run_args(ppo)(resume=checkpoint))
    second = tooling.main(ppo, tooling.run_args(ppo)(resume=checkpoint, total_timesteps=2048))
    assert second["global_step"] == 2048 and len(second["episodic_returns"]) > len(first["episodic_returns"])
    events = EventAccumulator(first["run_dir"], size_guidance={"scalars": 0})
    events.Reload()
    assert [e.step for e in events.Scalars("eval/episodic_return")] == [1024, 1024, 2048, 2048]
    assert [e.step for e in events.Scalars("losses/approx_kl")] == [512, 1024, 1536, 2048]


def test_a_mujoco_run_resumes_normalising_with_its_restored_statistics(tmp_path, monkeypatch):
    """Hopper's envs are not saved (EzPickle): the resumed run begins new episodes, and their
    first observation is normalised with the statistics of the checkpoint, not new ones."""
    import ppo_continuous as ppo

    flags = dict(env_id="Hopper-v4", num_steps=256, num_minibatches=4, update_epochs=1, eval_episodes=0,
                 log_dir=str(tmp_path))
    first = tooling.main(ppo, tooling.run_args(ppo)(**flags, total_timesteps=512))
    counts, real_normalize = [], ppo.Agent.normalize_obs

    def recording_normalize(self, obs, update=True):
        counts.append(self.obs_rms.count)
        return real_normalize(self, obs, update)

    monkeypatch.setattr(ppo.Agent, "normalize_obs", recording_normalize)
    tooling.main(ppo, tooling.run_args(ppo)(resume=f"{first['run_dir']}/checkpoint.pt", total_timesteps=768))
    assert counts[0] == first["agent"].obs_rms.count > 500  # the first observation: saved statistics


gym.register("Unpicklable-v0", entry_point=lambda: gym.wrappers.TransformAction(
    gym.make("CartPole-v1"), lambda a: a, gym.spaces.Discrete(2)), max_episode_steps=500)


def test_an_env_that_does_not_pickle_still_gets_checkpoints_and_resumes_with_new_episodes(log_dir, capsys):
    """An env with a lambda in a wrapper (as our own Discrete(start=k) hint makes): the checkpoint
    holds everything else, no checkpoint.tmp is left, and the resumed run begins new episodes
    with a one-line note."""
    import ppo_discrete as ppo

    first = tooling.main(ppo, tooling.run_args(ppo)(env_id="Unpicklable-v0", total_timesteps=1024, eval_episodes=0,
                                                    checkpoint_every=1,
                                 log_dir=log_dir))
    files = os.listdir(first["run_dir"])
    assert sorted(files)[:2] == [".lock", "checkpoint.pt"] and "checkpoint.tmp" not in files
    saved = read_saved(f"{first['run_dir']}/checkpoint.pt", weights_only=False)["state"]
    assert "envs" not in saved and "next_obs" not in saved and saved["global_step"] == 1024
    capsys.readouterr()
    resumed = tooling.main(ppo, tooling.run_args(ppo)(resume=f"{first['run_dir']}/checkpoint.pt", total_timesteps=2048))
    assert resumed["global_step"] == 2048
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("note", "warning"))]
    assert notes == ["note: Unpicklable-v0 cannot be saved mid-episode, so the run goes on with new episodes, "
                     "not exactly as if never stopped"]


def test_wrong_files_are_refused_in_one_line_that_says_what_to_give(tmp_path):
    import ppo_continuous

    run = tooling.main(ppo_continuous, tooling.run_args(ppo_continuous)(**SHORT_RUNS["ppo_continuous"], save_model=True,
                                                     log_dir=str(tmp_path)))["run_dir"]
    cases = {("ppo_continuous.py", "--resume", f"{run}/model.pt"): "takes",  # a KeyError at 73d22e8
             ("ppo_discrete.py", "--resume", f"{run}/checkpoint.pt"): "takes",  # another script's classes
             ("ppo_discrete.py", "--eval-checkpoint", f"{run}/model.pt"): "another",
             ("ppo_discrete.py", "--eval-checkpoint", f"{run}/checkpoint.pt"): "another",
             ("ppo_discrete.py", "--resume", f"{tmp_path}/no_such.pt"): "No such file"}
    for (script, flag, path), kind in cases.items():
        out = run_script(script, flag, path)
        (line,) = out.stderr.strip().splitlines()
        assert out.returncode == 1 and line.startswith(f"{script}: error: {path}"), (script, flag, out.stderr)
        assert {"No such file": "No such file" in line,
                "takes": "--resume takes <run>/checkpoint.pt of a run of the script given it" in line,
                "another": line.endswith("whose policy ppo_discrete.py cannot read: evaluate it with "
                                         "ppo_continuous.py")}[kind], line


def test_a_command_line_run_resumes_from_code_of_ones_own(tmp_path):
    """The checkpoint of a run started from the command line, resumed by a file of one's own that
    imports the script (its classes were pickled under __main__ at 73d22e8: AttributeError)."""
    out = run_script("ppo_discrete.py", "--total-timesteps=1024", "--eval-episodes=0", f"--log-dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    path = f"{run_folder(tmp_path)}checkpoint.pt"
    (tmp_path / "mine.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport ppo_discrete, tooling\n"
                                      f"run = tooling.main(ppo_discrete, tooling.run_args(ppo_discrete)(resume={path!r},"
                                      " total_timesteps=2048))\n"
                                      "print(run['global_step'])\n")
    mine = subprocess.run([sys.executable, "mine.py"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.split()[-1] == "2048"


def test_two_runs_with_the_same_name_keep_their_own_folders(script, log_dir, monkeypatch):
    clock = itertools.count(1_800_000_000, 1e-6)  # both runs start, and end, in the same second
    monkeypatch.setattr(time, "time", lambda: next(clock))
    flags = dict(SHORT_RUNS[script.__name__], save_model=True, log_dir=log_dir)
    first, second = (tooling.main(script, tooling.run_args(script)(**flags, seed=1)) for _ in range(2))
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
    assert run_script("ppo_discrete.py", f"--resume={folder}checkpoint.pt", "--total-timesteps=1024").returncode == 0
    ids = {r.run.run_id for path in glob.glob(f"{folder}/wandb/offline-run-*/run-*.wandb")
           for r in wandb_records(path) if r.HasField("run")}
    assert len(glob.glob(f"{folder}/wandb/offline-run-*")) == 2 and ids == {name}


def test_track_without_wandb_is_refused_in_one_line(monkeypatch, capsys):
    import ppo_discrete

    real_find_spec = tooling.importlib.util.find_spec
    monkeypatch.setattr(tooling.importlib.util, "find_spec",
                        lambda name: None if name == "wandb" else real_find_spec(name))
    with pytest.raises(SystemExit, match=r"--track needs wandb: pip install wandb$"):
        tooling.check_args(ppo_discrete, tooling.run_args(ppo_discrete)(track=True))


def test_load_agent_gives_the_saved_policy_to_code_of_your_own(tmp_path):
    """load_agent in a fresh process gives the agent that training ended with: the same greedy
    actions through greedy_action, its memory carried from one step to the next."""
    lines, expected = [f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport numpy as np"], []
    act = ("def act(agent, obs):\n    first, memory = agent.greedy_action(obs, None)\n"
           "    return [np.asarray(first).tolist(), np.asarray(agent.greedy_action(obs, memory)[0]).tolist()]")
    exec(act, namespace := {"np": np})
    for name in SCRIPTS:
        module = __import__(name)
        result = tooling.main(module, tooling.run_args(module)(**SHORT_RUNS[name], save_model=True, log_dir=str(tmp_path)))
        shape = module.make_env(SHORT_RUNS[name]["env_id"]).observation_space.shape  # ppo_atari's: an image
        obs = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
        expected.append(namespace["act"](result["agent"], obs))
        lines += [act, f"import tooling, {name}",
                  f"agent = tooling.load_agent({name}, {result['run_dir'] + '/model.pt'!r})",
                  f"print(act(agent, np.array({obs.tolist()}, dtype=np.float32)))"]
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


def test_a_flag_given_with_its_default_value_counts_as_given_and_resume_is_not_inherited(log_dir):
    """On the command line, --eval-episodes 10 (its default) over a run saved with 0 plays 10
    episodes; the model.pt of a resumed run evaluates under another --env-id instead of being
    taken for a resume (its saved --resume is not inherited)."""
    from conftest import evaluate_checkpoint

    import ppo_discrete as ppo

    first = tooling.main(ppo, tooling.run_args(ppo)(total_timesteps=512, eval_episodes=0, save_model=True, log_dir=log_dir))
    resumed = tooling.main(ppo, tooling.run_args(ppo)(resume=f"{first['run_dir']}/checkpoint.pt", total_timesteps=1024))
    assert resumed["eval_returns"] == []  # the run's own --eval-episodes 0
    model = f"{first['run_dir']}/model.pt"
    assert read_saved(model, weights_only=True)["args"]["resume"]  # saved by the resumed run
    assert len(evaluate_checkpoint(ppo, model, "--eval-episodes", "10")) == 10
    if "CartPoleOf7-v0" not in gym.registry:  # CartPole-v1's spaces, another id
        gym.register("CartPoleOf7-v0", entry_point=gym.spec("CartPole-v1").entry_point, max_episode_steps=7)
    assert len(evaluate_checkpoint(ppo, model, "--eval-episodes", "2", "--env-id", "CartPoleOf7-v0")) == 2
