"""Helpers shared by the tests of every script: running a script as a user would, naive
reference implementations of the math, and small test environments."""

import glob
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import tooling

ROOT = Path(__file__).resolve().parent.parent


def run_script(script: str, *flags: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python <script> <flags>` in a subprocess, as a user would type it; capture its output."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, str(ROOT / script), *flags], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env)


def read_saved(path, weights_only: bool = True):
    """The content of a model.pt or checkpoint.pt, out of its frame: b"pgref\\n", torch.save's
    bytes, b"\\npgref <format> <release>\\n" and the SHA-256 of all before it."""
    data = open(path, "rb").read()
    return torch.load(io.BytesIO(data[6:data.rindex(b"\npgref ")]), weights_only=weights_only)


def one_error_line(out: subprocess.CompletedProcess, script: str) -> str:
    """The run failed with exit code 1 and one line of the shape every error has."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert lines[0].startswith(f"{script.removesuffix('.py')}.py: error: "), lines[0]
    return lines[0]


def trained(module, tmp_path, **overrides) -> str:
    """The folder of a short run of `module` that saved its model and a checkpoint."""
    args = short_args(module, str(tmp_path), save_model=True, checkpoint_every=1, **overrides)
    return tooling.main(module, args)["run_dir"]


def run_folder(log_dir) -> str:
    (folder,) = glob.glob(f"{log_dir}/*/")  # the run's one folder
    return folder


def kill_after_first_checkpoint(script: str, flags: list[str], log_dir) -> None:
    """Start the run and SIGKILL it as soon as its first checkpoint exists, mid-run."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, str(ROOT / script), *flags, f"--log-dir={log_dir}"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not glob.glob(f"{log_dir}/*/checkpoint.pt") and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run ended before it could be killed mid-run"


def naive_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """GAE written as the explicit sum A_t = Σ_l (γλ)^l δ_{t+l}, stopped at the episode's end or
    the rollout's end, independently of the scripts' reverse recursion. Inputs are (T, N) arrays."""
    rewards, values, next_values = (np.asarray(x, dtype=np.float64) for x in (rewards, values, next_values))
    terminations, truncations = np.asarray(terminations, bool), np.asarray(truncations, bool)
    T, N = rewards.shape
    deltas = rewards + gamma * np.where(terminations, 0.0, next_values) - values
    advantages = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                total += weight * deltas[k, n]
                if terminations[k, n] or truncations[k, n]:
                    break
                weight *= gamma * gae_lambda
            advantages[t, n] = total
    return advantages


def random_rollout(T: int = 40, N: int = 3, seed: int = 0, consistent: bool = False):
    """Random (T, N) rollout data with a mix of terminations and truncations (never both). With
    `consistent`, next_values[t] = values[t+1] inside an episode, as in a real rollout."""
    rng = np.random.default_rng(seed)
    ends = rng.random((T, N))
    terminations = (ends < 0.1).astype(np.float32)
    truncations = ((ends >= 0.1) & (ends < 0.2)).astype(np.float32)
    data = dict(rewards=rng.normal(size=(T, N)), values=rng.normal(size=(T, N)),
                next_values=rng.normal(size=(T, N)), terminations=terminations, truncations=truncations)
    if consistent:
        inside = (terminations[:-1] + truncations[:-1]) == 0
        data["next_values"][:-1][inside] = data["values"][1:][inside]
    return {k: torch.tensor(v, dtype=torch.float32) for k, v in data.items()}


class TickEnv(gym.Env):
    """A clock: the observation is (t, 1) at step t, every action earns reward 1, the episode
    never terminates and is only ever cut by the TimeLimit wrapper. With a time limit of L, the
    real final observation is (L, 1), which is never an observation the agent acts on, so a test
    can tell V(final observation) from V(reset observation)."""

    def __init__(self, continuous: bool = False):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (1,), np.float32) if continuous else gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0, 1.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([float(self.t), 1.0], np.float32), 1.0, False, False, {}


class TickEndsEnv(TickEnv):
    """TickEnv whose episode terminates (no time limit) at step TICK_LIMIT."""

    def step(self, action):
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, self.t == TICK_LIMIT, truncated, info


class TickImageEnv(TickEnv):
    """TickEnv seen as an image, for ppo_atari.py: (t, 1) in each pixel of a 3×3 frame."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Box(0, 255, (3, 3, 2), np.uint8)

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        return np.broadcast_to(obs.astype(np.uint8), (3, 3, 2)).copy(), info

    def step(self, action):
        obs, *rest = super().step(action)
        return (np.broadcast_to(obs.astype(np.uint8), (3, 3, 2)).copy(), *rest)


TICK_LIMIT = 5
gym.register("TickImage-v0", entry_point=TickImageEnv, max_episode_steps=TICK_LIMIT)
gym.register("TickDiscrete-v0", entry_point=TickEnv, max_episode_steps=TICK_LIMIT)
gym.register("TickContinuous-v0", entry_point=TickEnv, max_episode_steps=TICK_LIMIT, kwargs={"continuous": True})
gym.register("TickEndsDiscrete-v0", entry_point=TickEndsEnv)
gym.register("TickEndsContinuous-v0", entry_point=TickEndsEnv, kwargs={"continuous": True})


def assert_policy_equals_library(policy, library_dist, obs, params, continuous: bool) -> None:
    """The scripts write their policies out for speed. `policy(obs, action)` -> (action, log π, H)
    of a script; `library_dist()` -> torch.distributions' Normal or Categorical on the same
    network outputs. Samples (same seed), log-probs, entropies and their gradients must be equal
    bit for bit, so that the written-out code changes no result. Sampling runs without gradient
    and the update re-evaluates the stored action, as in the scripts."""
    torch.manual_seed(1)
    with torch.no_grad():
        action = policy(obs, None)[0]
        torch.manual_seed(1)
        assert torch.equal(action, library_dist().sample())
    _, logprob, entropy = policy(obs, action)
    dist = library_dist()  # a fresh one, as in the update: no sample drawn from it
    expected_logprob, expected_entropy = dist.log_prob(action), dist.entropy()
    if continuous:  # independent dimensions: the sums over the last axis
        expected_logprob, expected_entropy = expected_logprob.sum(-1), expected_entropy.sum(-1)
    assert torch.equal(logprob, expected_logprob) and torch.equal(entropy, expected_entropy)
    weights = torch.randn(len(obs))
    grads = torch.autograd.grad((logprob * weights).mean() + entropy.mean(), params)
    expected = torch.autograd.grad((expected_logprob * weights).mean() + expected_entropy.mean(), params)
    assert all(torch.equal(g, e) for g, e in zip(grads, expected, strict=True))


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "runs")


# Each script with a short, fast setup on an env with many episodes, for tests that every
# script must pass the same way (the scripts are kept line-aligned, so are their tests).
SHORT_RUNS = {
    "ppo_discrete": dict(env_id="CartPole-v1", total_timesteps=4096, eval_episodes=0),
    "ppo_continuous": dict(env_id="Pendulum-v1", num_steps=512, num_minibatches=8, update_epochs=2,
                           total_timesteps=2048, eval_episodes=0),
    "vpg": dict(env_id="CartPole-v1", num_steps=256, vf_iters=5, total_timesteps=4096, eval_episodes=0),
    "trpo": dict(env_id="CartPole-v1", num_steps=256, vf_iters=5, total_timesteps=4096, eval_episodes=0),
    "reinforce": dict(env_id="CartPole-v1", batch_size=1000, total_timesteps=4096, eval_episodes=0),
    "ppo_recurrent": dict(env_id="CartPoleNoVel-v1", total_timesteps=2048, eval_episodes=0),
    "ppo_atari": dict(env_id="MinAtar/Breakout-v1", num_envs=2, num_steps=64, total_timesteps=1024,
                      eval_episodes=0),
}
SCRIPTS = sorted(SHORT_RUNS)  # module names
# The scripts that take vector observations: every script but ppo_atari.py, which takes images.
# The tests on small vector envs of one's own (own_env.py) run on these.
VECTOR_SCRIPTS = [name for name in SCRIPTS if name != "ppo_atari"]
PPO_SCRIPTS = ["ppo_continuous", "ppo_discrete", "ppo_atari"]
GAE_SCRIPTS = ["ppo_continuous", "ppo_discrete", "trpo", "vpg", "ppo_atari"]  # a critic and GAE


def _module(name: str):
    import importlib

    return importlib.import_module(name)


@pytest.fixture(params=SCRIPTS)
def script(request):
    """The module of each script, imported from the top level."""
    return _module(request.param)


@pytest.fixture(params=PPO_SCRIPTS)
def ppo_script(request):
    return _module(request.param)


@pytest.fixture(params=GAE_SCRIPTS)
def gae_script(request):
    return _module(request.param)


def evaluate_checkpoint(module, path, *flags: str) -> list[float]:
    """`python <script> --eval-checkpoint path <flags>` in this process (as `main` parses the
    command line); returns the evaluation's returns. A test that calls it patches sys.argv back."""
    argv = sys.argv
    sys.argv = [f"{module.__name__}.py", "--eval-checkpoint", str(path), *flags]
    try:
        return tooling.main(module)["eval_returns"]
    finally:
        sys.argv = argv


def short_args(module, log_dir: str, **overrides):
    """Args of a short run of `module` (see SHORT_RUNS), with overrides."""
    return tooling.run_args(module)(**{**SHORT_RUNS[module.__name__], "log_dir": log_dir, **overrides})


class BrokenEnv(TickEnv):
    """TickEnv (never ends on its own) whose observation or reward turns NaN from step `after`
    of its life on, as a custom environment with a bug would."""

    def __init__(self, continuous: bool = False, broken: str = "observation", after: int = 300):
        super().__init__(continuous)
        self.broken, self.after, self.steps = broken, after, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.steps >= self.after:
            obs, reward = (obs * np.nan, reward) if self.broken == "observation" else (obs, np.nan)
        return obs, reward, terminated, truncated, info


class HugeRewardEnv(TickEnv):
    """TickEnv whose reward is 1e37 at every step: finite, but its discounted sum overflows the
    float32 of the rollout storage, as a reward of extreme scale would."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, 1e37, terminated, truncated, info


for _kind in ("Discrete", "Continuous"):
    for _broken in ("observation", "reward"):
        gym.register(f"NaN{_broken.title()}{_kind}-v0", entry_point=BrokenEnv, max_episode_steps=50,
                     kwargs={"continuous": _kind == "Continuous", "broken": _broken})
gym.register("HugeRewardDiscrete-v0", entry_point=HugeRewardEnv, max_episode_steps=50)


def nearly_equal_like(x):
    """Values of x's shape that increase and spread by less than 1e-8 (std about 2e-9): a batch
    that a normaliser must scale with its + 1e-8, not blow up."""
    return torch.linspace(-1.0, 1.0, x.numel()).reshape(x.shape) * 3e-9
