"""A researcher's own environment, from the command line to a re-evaluated checkpoint: the
`module:EnvId` form, the one factory `make_env`, checkpoints that carry what evaluation needs,
no hangs on an env without a time limit, and one-line errors for what the scripts cannot do.
The envs are those of tests/own_env.py."""

import glob
import os
import re
import shutil
import signal
import subprocess
import sys

import gymnasium as gym
import numpy as np
import own_env  # noqa: F401  (registers Point-v0 and its kin in this process too)
import pytest
import torch
from conftest import ROOT, VECTOR_SCRIPTS, evaluate_checkpoint, read_saved, run_script, short_args

import tooling

TESTS = os.path.dirname(os.path.abspath(__file__))
# Each script on the env of its action space: the discrete-only PPO on the grid, the others on
# the Box point (reinforce and vpg handle both; the grid is tried with them further down).
ENV = {"ppo_discrete": "PointGrid-v0", "ppo_continuous": "Point-v0", "vpg": "Point-v0", "trpo": "Point-v0",
       "reinforce": "Point-v0", "ppo_recurrent": "Point-v0"}
FLAGS = {"ppo_discrete": ["--num-steps", "256", "--total-timesteps", "1024"],
         "ppo_continuous": ["--num-steps", "256", "--num-minibatches", "4", "--total-timesteps", "1024"],
         "vpg": ["--num-steps", "256", "--total-timesteps", "1024"],
         "trpo": ["--num-steps", "256", "--total-timesteps", "1024"],
         "reinforce": ["--batch-size", "500", "--total-timesteps", "1000"],
         "ppo_recurrent": ["--num-steps", "32", "--total-timesteps", "1024"]}


def eval_line(stdout: str) -> str:
    """The line the evaluation prints: '<env>: mean return M ± S over N ... (seed S)'."""
    (line,) = [line for line in stdout.splitlines() if ": mean return " in line]
    return line


@pytest.mark.parametrize("name", VECTOR_SCRIPTS)
def test_module_env_id_trains_and_its_checkpoint_evaluates_in_a_fresh_process(name, tmp_path):
    """The script copied alone beside the env's module, as a researcher would: `--env-id
    own_env:<Id>` trains a wider network (--hidden-size 32), and `--eval-checkpoint`, in a new
    process that only has the checkpoint, prints the very numbers printed after training."""
    shutil.copy(ROOT / f"{name}.py", tmp_path)
    shutil.copy(ROOT / "tooling.py", tmp_path)
    shutil.copy(os.path.join(TESTS, "own_env.py"), tmp_path)
    script = str(tmp_path / f"{name}.py")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    trained = subprocess.run([sys.executable, script, "--env-id", f"own_env:{ENV[name]}", *FLAGS[name],
                              "--hidden-size", "32", "--save-model", "--eval-episodes", "3"],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert trained.returncode == 0, trained.stderr
    (path,) = glob.glob(str(tmp_path / "runs" / "*" / "model.pt"))
    assert os.path.basename(os.path.dirname(path)).startswith(ENV[name] + "__")  # no ':' in the folder name
    evaluated = subprocess.run([sys.executable, script, "--eval-checkpoint", path, "--eval-episodes", "3"],
                               capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert evaluated.returncode == 0, evaluated.stderr
    assert eval_line(evaluated.stdout) == eval_line(trained.stdout)
    assert "(seed 10001)" in eval_line(trained.stdout)


def test_the_checkpoint_of_an_env_no_process_can_make_is_refused_in_one_line(tmp_path):
    """An env registered by Python code, not given as module:EnvId, cannot be made by a fresh
    process: one line says so, and says how to give it."""
    code = ("import sys, gymnasium as gym; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import own_env, reinforce, tooling\n"
            "class Mine(own_env.PointEnv): pass\n"
            "gym.register('Mine-v0', entry_point=Mine, max_episode_steps=20)\n"
            "tooling.main(reinforce, tooling.run_args(reinforce)(env_id='Mine-v0', batch_size=200, total_timesteps=200,"
            " eval_episodes=0, save_model=True, log_dir=sys.argv[3]))\n")
    made = subprocess.run([sys.executable, "-c", code, str(ROOT), TESTS, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert made.returncode == 0, made.stderr
    (path,) = glob.glob(str(tmp_path / "*" / "model.pt"))
    result = run_script("reinforce.py", "--eval-checkpoint", path)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "--env-id Mine-v0: Environment `Mine` doesn't exist" in line and "module:EnvId" in line


@pytest.mark.parametrize("env_id,message", [
    ("own_env:Pont-v0", "Did you mean: `Point`?"),  # Gymnasium's own words
    ("no_such_module:Point-v0", "No module named 'no_such_module'"),
    ("Piont-v0", "Did you mean: `Point`?"),
    ("own_env:PointOnOldLib-v0", "only supported on `somelib<3`"),  # as Pusher-v4 on mujoco 3+
])
def test_env_ids_that_cannot_be_made_get_one_line(env_id, message, script):
    with pytest.raises(SystemExit, match=re.escape(message)):
        tooling.check_args(script, tooling.run_args(script)(env_id=env_id))


@pytest.mark.parametrize("script", VECTOR_SCRIPTS, indirect=True)
def test_a_wrapper_in_make_env_reaches_the_checks_training_and_evaluation(script, log_dir, monkeypatch):
    """The one factory: every env the script makes comes from `make_env`, so a time limit of 7
    steps added there ends every episode of training and of the evaluation."""
    made, lengths = [], []

    class CutAt7(gym.wrappers.TimeLimit):
        def __init__(self, env):
            super().__init__(env, 7)
            self.steps = 0

        def step(self, action):
            self.steps += 1
            obs, reward, terminated, truncated, info = super().step(action)
            if terminated or truncated:
                lengths.append(self._elapsed_steps)
            return obs, reward, terminated, truncated, info

    def make_env(env_id, **kwargs):
        made.append(CutAt7(gym.make(env_id, **kwargs)))
        return made[-1]

    monkeypatch.setattr(script, "make_env", make_env)
    args = short_args(script, log_dir, eval_episodes=2)
    result = tooling.main(script, args)
    assert len(made) == 1 + args.num_envs + 1  # the input checks, each training env, the evaluation
    assert all(env.steps > 0 for env in made[1:])  # every training env, and the evaluation's
    assert len(result["eval_returns"]) == 2 and lengths and max(lengths) <= 7


@pytest.mark.parametrize("script", VECTOR_SCRIPTS, indirect=True)
def test_a_checkpoint_that_no_longer_fits_the_networks_is_refused_in_one_line(script, log_dir, tmp_path):
    result = tooling.main(script, short_args(script, log_dir, hidden_size=16, save_model=True, eval_episodes=1))
    path = os.path.join(result["run_dir"], "model.pt")
    assert evaluate_checkpoint(script, path) == result["eval_returns"]  # the saved --hidden-size 16
    checkpoint = read_saved(path, weights_only=True)
    checkpoint["args"]["hidden_size"] = 64  # as if `Agent` had been edited since
    tooling.write(checkpoint, str(tmp_path / "edited.pt"))  # sealed again, as the script writes
    with pytest.raises(SystemExit, match="--eval-checkpoint .*edited.pt: .*size mismatch for ") as refused:
        evaluate_checkpoint(script, tmp_path / "edited.pt")
    # one short line that names the first layer that does not fit (torch's message names them all)
    assert "\n" not in refused.value.code and "\t" not in refused.value.code
    assert len(refused.value.code.replace(str(tmp_path), "")) < 300  # the layer's name, two shapes
    assert refused.value.code.count("size mismatch") == 1


def test_eval_seed_given_at_training_is_saved_and_reused(script, log_dir, capsys):
    result = tooling.main(script, short_args(script, log_dir, save_model=True, eval_episodes=2, eval_seed=7))
    path = os.path.join(result["run_dir"], "model.pt")
    assert evaluate_checkpoint(script, path) == result["eval_returns"]
    assert capsys.readouterr().out.count("(seed 7)") == 2
    evaluate_checkpoint(script, path, "--eval-seed", "8")  # a seed given now wins
    assert "(seed 8)" in capsys.readouterr().out


# An env of the same spaces (a variant), and one whose spaces do not fit, for each script's own env.
VARIANTS = {"ppo_discrete": ("Acrobot-v1", "MountainCar-v0"), "ppo_continuous": ("Pendulum-v1", "MountainCarContinuous-v0"),
            "vpg": ("Acrobot-v1", "MountainCar-v0"), "trpo": ("Acrobot-v1", "MountainCar-v0"),
            "reinforce": ("Acrobot-v1", "MountainCar-v0"), "ppo_recurrent": ("Acrobot-v1", "MountainCar-v0")}


@pytest.mark.parametrize("script", VECTOR_SCRIPTS, indirect=True)
def test_env_id_given_with_eval_checkpoint_is_evaluated_on_or_refused(script, log_dir, capsys):
    """--env-id with --eval-checkpoint: a variant of the env (here CartPole's spaces in a
    re-registered CartPole with a shorter limit) is evaluated on; an env whose spaces do not fit
    the saved networks is refused in one line."""
    result = tooling.main(script, short_args(script, log_dir, save_model=True))
    path = os.path.join(result["run_dir"], "model.pt")
    env_id = short_args(script, log_dir).env_id
    variant = f"Short{env_id}"
    if variant not in gym.registry:
        gym.register(variant, entry_point=gym.spec(env_id).entry_point, max_episode_steps=7,
                     kwargs=gym.spec(env_id).kwargs)
    capsys.readouterr()
    returns = evaluate_checkpoint(script, path, "--env-id", variant, "--eval-episodes", "2")
    assert f"{variant}: mean return" in capsys.readouterr().out and len(returns) == 2
    if env_id == "CartPole-v1":
        assert max(returns) <= 7  # the variant's limit, one reward per step
    with pytest.raises(SystemExit, match="--eval-checkpoint .*size mismatch") as refused:
        evaluate_checkpoint(script, path, "--env-id", VARIANTS[script.__name__][1])
    assert "\n" not in refused.value.code


@pytest.mark.parametrize("name", ["ppo_discrete", "ppo_continuous", "vpg", "trpo"])
def test_an_env_without_time_limit_trains_and_its_evaluation_ends(name, log_dir):
    module = __import__(name)
    env_id = "PointGridEndless-v0" if name == "ppo_discrete" else "PointEndless-v0"
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the run did not end: an endless episode?"))
    signal.alarm(120)  # a failure rather than a hang, should the evaluation's step cap go missing
    try:
        result = tooling.main(module, short_args(module, log_dir, env_id=env_id, total_timesteps=2048, eval_episodes=1))
    finally:
        signal.alarm(0)
    assert result["episodic_returns"] == [] and len(result["eval_returns"]) == 1  # cut at 10,000 steps


def test_reinforce_on_an_env_without_time_limit_stops_at_total_timesteps(log_dir, monkeypatch):
    """A REINFORCE batch waits for its episodes to end: with none ending, the run stops when the
    step budget is spent, with one line that says why."""
    import reinforce

    steps = []

    class Counting(gym.Wrapper):
        def step(self, action):
            steps.append(1)
            return super().step(action)

    monkeypatch.setattr(reinforce, "make_env", lambda env_id, **kwargs: Counting(gym.make(env_id, **kwargs)))
    args = short_args(reinforce, log_dir, env_id="PointEndless-v0", batch_size=500, total_timesteps=1000)
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the run did not stop at --total-timesteps"))
    signal.alarm(60)
    try:
        with pytest.raises(SystemExit, match="REINFORCE learns from complete episodes") as stopped:
            tooling.main(reinforce, args)
    finally:
        signal.alarm(0)
    assert "\n" not in stopped.value.code and len(steps) == 1000


@pytest.mark.parametrize("name", ["ppo_discrete", "ppo_continuous"])
def test_ctrl_c_during_the_evaluation_exits_cleanly(name, tmp_path):
    """Ctrl-C while the evaluation after training plays (long episodes of an endless env): exit
    130, no traceback, the model saved and the logs flushed, as after a Ctrl-C in training."""
    shutil.copy(os.path.join(TESTS, "own_env.py"), tmp_path)
    env_id = "own_env:PointGridEndless-v0" if name == "ppo_discrete" else "own_env:PointEndless-v0"
    proc = subprocess.Popen([sys.executable, str(ROOT / f"{name}.py"), "--env-id", env_id, *FLAGS[name],
                             "--eval-episodes", "1000", "--save-model", "--log-dir", str(tmp_path / "runs")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    next(line for line in proc.stdout if line.startswith("model saved"))  # training is over
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert (run_dir / "model.pt").exists()
    assert any(f.name.startswith("events.out.tfevents") and f.stat().st_size > 0 for f in run_dir.iterdir())


@pytest.mark.parametrize("name", ["ppo_discrete", "vpg", "trpo", "reinforce"])
def test_discrete_actions_from_a_start_other_than_0_are_refused_then_work_wrapped(name, log_dir, monkeypatch):
    """Discrete(4, start=1): refused in one line that gives the wrapper; with that wrapper in
    `make_env`, as the line says, the run trains and evaluates."""
    module = __import__(name)
    args = short_args(module, log_dir, env_id="PointGridFrom1-v0", eval_episodes=1)
    with pytest.raises(SystemExit, match=re.escape("Discrete(4, start=1)")) as refused:
        tooling.check_args(module, args)
    assert "gym.wrappers.TransformAction(env, lambda a: a + 1, gym.spaces.Discrete(4))" in refused.value.code

    def make_env(env_id, **kwargs):
        env = gym.make(env_id, **kwargs)
        return gym.wrappers.TransformAction(env, lambda a: a + 1, gym.spaces.Discrete(4))

    monkeypatch.setattr(module, "make_env", make_env)
    result = tooling.main(module, args)
    assert result["episodic_returns"] and len(result["eval_returns"]) == 1


def test_cuda_without_a_gpu_is_an_error(script, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="--cuda: torch finds no usable GPU"):
        tooling.check_args(script, tooling.run_args(script)(cuda=True))


@pytest.mark.parametrize("version", ["1.4.0", "1.10.0", "2.0.0rc1"])
@pytest.mark.parametrize("script", VECTOR_SCRIPTS, indirect=True)
def test_gymnasium_1_4_and_newer_are_accepted(script, monkeypatch, version):
    monkeypatch.setattr(gym, "__version__", version)
    env_id = "CartPole-v1" if script.__name__ != "ppo_continuous" else "Pendulum-v1"
    tooling.check_args(script, tooling.run_args(script)(env_id=env_id))


@pytest.mark.parametrize("version", ["1.3.0", "1.0.0", "0.29.1"])
def test_gymnasium_before_1_4_is_refused_in_one_line_that_names_both_versions(script, monkeypatch, version):
    """Gymnasium 1.1-1.3 log every episode after an env's first one step short (1.3.0 logs 4 on the
    5-step envs of test_truncation.py): refused before anything is built."""
    monkeypatch.setattr(gym, "__version__", version)
    with pytest.raises(SystemExit) as refusal:
        tooling.check_args(script, tooling.run_args(script)())
    message = str(refusal.value)
    assert "\n" not in message and f"found {version}" in message and "gymnasium 1.4 or newer" in message, message


def test_the_evaluation_seed_can_be_chosen(script, log_dir, capsys):
    tooling.main(script, short_args(script, log_dir, eval_episodes=1, eval_seed=7))
    assert "(seed 7)" in capsys.readouterr().out


class DictPointEnv(gym.Env):
    """A Dict of observations (FlattenObservation makes it one vector) or an image (pixels)."""

    def __init__(self, image: bool = False, continuous: bool = True):
        self.observation_space = (gym.spaces.Box(0, 255, (8, 8, 3), np.uint8) if image else
                                  gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (2,)), "v": gym.spaces.Box(-1, 1, (2,))}))
        self.action_space = gym.spaces.Box(-1, 1, (2,)) if continuous else gym.spaces.Discrete(2)


for _kind in ("Continuous", "Discrete"):
    gym.register(f"DictPoint{_kind}-v0", entry_point=DictPointEnv, max_episode_steps=50,
                 kwargs={"continuous": _kind == "Continuous"})
    gym.register(f"ImagePoint{_kind}-v0", entry_point=DictPointEnv, max_episode_steps=50,
                 kwargs={"image": True, "continuous": _kind == "Continuous"})


def kind(script) -> str:
    return "Discrete" if script.__name__ == "ppo_discrete" else "Continuous"


@pytest.mark.parametrize("script", VECTOR_SCRIPTS, indirect=True)
def test_a_dict_observation_is_refused_with_flatten_observation_and_an_image_as_out_of_scope(script):
    with pytest.raises(SystemExit, match=r"wrap the env in gym\.wrappers\.FlattenObservation\(env\)$") as refused:
        tooling.check_args(script, tooling.run_args(script)(env_id=f"DictPoint{kind(script)}-v0"))
    assert "image" not in refused.value.code
    with pytest.raises(SystemExit, match="images are out of its scope") as refused:
        tooling.check_args(script, tooling.run_args(script)(env_id=f"ImagePoint{kind(script)}-v0"))
    assert "Flatten" not in refused.value.code


def test_actions_of_the_wrong_kind_get_no_hint_that_does_not_apply():
    """ppo_discrete.py given Box actions points to ppo_continuous.py, and says nothing of
    Discrete(n, start=k); ppo_continuous.py given Discrete ones points back."""
    import ppo_continuous
    import ppo_discrete

    with pytest.raises(SystemExit, match=r"needs Discrete\(n\): for Box actions use ppo_continuous\.py$"):
        tooling.check_args(ppo_discrete, tooling.run_args(ppo_discrete)(env_id="Pendulum-v1"))
    with pytest.raises(SystemExit, match=r"needs a flat Box: for Discrete actions use ppo_discrete\.py$"):
        tooling.check_args(ppo_continuous, tooling.run_args(ppo_continuous)(env_id="CartPole-v1"))


@pytest.mark.parametrize("script", VECTOR_SCRIPTS, indirect=True)
def test_an_env_with_no_time_limit_gets_a_warning_before_training(script, capsys):
    """Every script, reinforce.py included, warns in one line before training; with a limit, no warning."""
    endless = "PointGridEndless-v0" if script.__name__ == "ppo_discrete" else "PointEndless-v0"
    tooling.check_args(script, tooling.run_args(script)(env_id=endless))
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert line.startswith(f"warning: {endless} has no time limit") and "max_episode_steps" in line
    tooling.check_args(script, tooling.run_args(script)(env_id=endless.replace("Endless", "")))
    assert "time limit" not in capsys.readouterr().err


def test_a_deprecated_env_warns_once_a_run(tmp_path):
    """MuJoCo's -v4 envs: Gymnasium's deprecation line once, not once for every env made."""
    out = subprocess.run([sys.executable, str(ROOT / "ppo_continuous.py"), "--env-id=Hopper-v4", "--num-envs=2",
                          "--num-steps=64", "--num-minibatches=2", "--total-timesteps=128", "--eval-episodes=1",
                          f"--log-dir={tmp_path}"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"})
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("is out of date") == 1, out.stderr


class UnboundedPointEnv(gym.Env):
    """Point-like env whose Box actions have no bounds (a force of any size)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = self.np_random.normal(size=2).astype(np.float32)
        return self.x, {}

    def step(self, action):
        self.x = np.clip(self.x + 0.1 * np.tanh(action), -5, 5).astype(np.float32)
        return self.x, -float(np.linalg.norm(self.x)), False, False, {}


gym.register("UnboundedPoint-v0", entry_point=UnboundedPointEnv, max_episode_steps=20)


@pytest.mark.parametrize("name", ["ppo_continuous", "vpg", "trpo", "reinforce"])
def test_unbounded_box_actions_train_and_evaluate_as_readme_says(name, log_dir):
    """README says the Box scripts take a Box, bounded or not: the sample and the evaluation's
    mean reach the env as they are where the bounds are infinite."""
    module = __import__(name)
    sizes = dict(num_steps=64, num_minibatches=2) if name == "ppo_continuous" else {}
    result = tooling.main(module, short_args(module, log_dir, env_id="UnboundedPoint-v0", total_timesteps=1024,
                                    eval_episodes=1, **sizes))
    assert result["episodic_returns"] and len(result["eval_returns"]) == 1
