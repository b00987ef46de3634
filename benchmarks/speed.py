"""Steps per second of our PPO scripts against Stable-Baselines3's PPO, side by side on this machine.

    python benchmarks/speed.py                      # writes benchmarks/SPEED.md and benchmarks/speed.json
    python benchmarks/speed.py --runs 5 --tasks halfcheetah
    python benchmarks/speed.py --runs 5 --line-profile   # adds line-by-line timings of our scripts
    python benchmarks/speed.py --compare ../before . --tasks halfcheetah --runs 5   # a change, timed

Two tasks, each with the same hyperparameters on both sides (CleanRL's settings):
  cartpole     ppo_discrete.py on CartPole-v1: 4 envs × 128 steps, 4 epochs × 4 minibatches
  halfcheetah  ppo_continuous.py on HalfCheetah-v4: 1 env × 2048 steps, 10 epochs × 32 minibatches,
               observation normalisation and reward scaling (SB3: VecNormalize)

Stable-Baselines3 (stable-baselines3==2.9.2) is installed on first use into its own virtual
environment, benchmarks/.sb3-venv, never into ours. Every measurement is a fresh process started
the same way. For each thread setting, our run (A) and SB3's (B) alternate, A B A B ..., `--runs`
times each. SPS is counted between the end of the warm-up updates and the end of the last update
(ours: the wall times of the `charts/SPS` TensorBoard events written after every update; SB3: a
callback at the start of every rollout, i.e. after the previous update). The env-only floor is
the same vector env and normalisation stepped with random actions and no learning: no PPO can
beat it, so it shows how much of each run's time is spent outside the env.

`--line-profile` adds, per task, where each microsecond of our step goes, line by line
of `train` (benchmarks/profile_lines.py, every line timed). The hand-written reading of the
figures, benchmarks/speed_notes.md, is appended to the report.

`--recurrent` times ppo_recurrent.py against sb3-contrib's RecurrentPPO instead, on
CartPoleNoVel-v1 with RL Zoo's settings for it on both sides (8 envs × 32 steps, 20 epochs of one
batch of 256, LSTM of 64 units for the actor and another for the critic, observation
normalisation and reward scaling), alternated, and adds the figures to SPEED.json and SPEED.md,
whose other tables it leaves as they are. sb3-contrib goes into benchmarks/.sb3-venv beside SB3.

`--atari` times ppo_atari.py against CleanRL's `ppo_atari.py` (at a pinned commit, with the two
edits of benchmarks/reference_runs/cleanrl_ppo_atari.patch, in its own virtual environment on
Gymnasium 0.29: benchmarks/.cleanrl/) and SB3's PPO with its `CnnPolicy`, on Breakout with CleanRL's
settings on all three sides (8 envs × 128 steps, 4 epochs of 4 minibatches, ε 0.1 constant, c₁
0.5, the Nature CNN shared by actor and critic, DQN's preprocessing). Each program runs at one
torch thread and at its default, ours at two threads too, alternated; each run's load, CPU time
and the other processes' use of the cores are recorded. Then ppo_atari.py runs whole on three
vector envs, alternated: today's SyncVectorEnv, ale-py's AtariVectorEnv and EnvPool (installed on
first use into benchmarks/.envpool-venv). It adds the figures, and where ppo_atari.py's time goes,
to SPEED.json and SPEED.md; `--threads` is not used.

`--compare A B ...` times a change instead of writing the report: our command of each task from
checkout A (the code before the change, e.g. a `git worktree`), then B, and so on, alternated
`--runs` times, default threads; the medians are printed against A's. `--script` swaps in another
of our scripts on the task's env (vpg.py and reinforce.py were timed on CartPole-v1 that way).

Thread settings: "default" runs each program as it starts (our scripts set one torch thread; SB3
keeps torch's default, one per core); "1" sets one torch thread in both. Nothing else may run on
the machine meanwhile: two timed processes on two cores distort each other.
"""

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SB3_VENV = HERE / ".sb3-venv"
SB3_PACKAGES = ["torch==2.13.0", "gymnasium[mujoco]==1.4.0", "numpy==2.4.6", "stable-baselines3==2.9.2",
                "sb3-contrib==2.9.2"]

# Each task: our command, SB3's PPO settings (the same hyperparameters), budget and warm-up.
TASKS = {
    "cartpole": {
        "env_id": "CartPole-v1", "script": "ppo_discrete.py", "steps": 102_400, "warmup_updates": 10,
        "ours": [],  # ppo_discrete.py's defaults are CleanRL's CartPole settings
        "sb3": {"n_envs": 4, "n_steps": 128, "batch_size": 128, "n_epochs": 4, "learning_rate": 2.5e-4, "ent_coef": 0.01,
                "normalize": False},
        "floor_steps": 200_000,
    },
    "halfcheetah": {
        "env_id": "HalfCheetah-v4", "script": "ppo_continuous.py", "steps": 40_960, "warmup_updates": 3,
        "ours": [],  # ppo_continuous.py's defaults are CleanRL's HalfCheetah settings
        "sb3": {"n_envs": 1, "n_steps": 2048, "batch_size": 64, "n_epochs": 10, "learning_rate": 3e-4, "ent_coef": 0.0,
                "normalize": True},
        "floor_steps": 30_000,
    },
}

# The recurrent task: RL Zoo's CartPoleNoVel-v1 settings (rl-baselines3-zoo hyperparams/ppo_lstm.yml),
# which are ppo_recurrent.py's defaults. Both sides normalise observations and scale rewards
# (RL Zoo's VecNormalize, ppo_recurrent.py's normalize_obs and RewardScaler).
RECURRENT = {"env_id": "CartPoleNoVel-v1", "script": "ppo_recurrent.py", "steps": 25_600, "warmup_updates": 10,
             "ours": [], "masked": [1, 3]}  # CartPole-v1's velocities, set to 0


def sps_points(run_dir: str) -> list[tuple[float, int]]:
    """(wall time, env steps) of each `charts/SPS` point of a run's TensorBoard events, in order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    return [(e.wall_time, e.step) for e in events.Scalars("charts/SPS")]


def sps_after_warmup(points: list[tuple[float, int]], warmup_updates: int) -> float:
    """points: (wall time, env steps so far) at the end of each update, in order. The SPS over the
    updates after the first `warmup_updates` (imports, first allocations and caches are not counted)."""
    (t0, s0), (t1, s1) = points[warmup_updates - 1], points[-1]
    return (s1 - s0) / (t1 - t0)


# Breakout with CleanRL's ppo_atari.py settings on every side (`--atari`). ppo_atari.py's own
# defaults are the PPO paper's: 3 epochs, c₁ 1, ε decayed; the flags below make them CleanRL's.
ATARI = {"env_id": "ALE/Breakout-v5", "cleanrl_env_id": "BreakoutNoFrameskip-v4", "script": "ppo_atari.py",
         "steps": 20_480, "warmup_updates": 4,
         "ours": ["--update-epochs", "4", "--vf-coef", "0.5", "--no-anneal-clip"],
         "floor_steps": 8192}
CLEANRL_ATARI_COMMIT = "fe8d8a03"  # vwxyzjn/cleanrl; cleanrl/ppo_atari.py last changed at 004f8a0
CLEANRL_ATARI_SHA256 = "5fa8e1a1b609a6a5cc69ec7a4cddb957101f175e056a20471c7ac403182155b9"
CLEANRL_ATARI_PACKAGES = ["torch==2.13.0", "gymnasium==0.29.1", "ale-py==0.9.0", "stable-baselines3==2.3.2",
                          "numpy<2", "tyro", "tensorboard", "opencv-python-headless"]


# --- workers: each runs in its own process and prints one JSON line -------------------------

def worker_sb3(task: dict, threads: str) -> dict:
    """Runs in benchmarks/.sb3-venv: SB3 PPO with the task's settings."""
    import torch
    from stable_baselines3 import PPO

    if threads != "default":
        torch.set_num_threads(int(threads))
    hp = task["sb3"]
    envs = sb3_envs(task, seed=1)
    model = PPO("MlpPolicy", envs, n_steps=hp["n_steps"], batch_size=hp["batch_size"], n_epochs=hp["n_epochs"],
                learning_rate=lambda progress: hp["learning_rate"] * progress,  # linear annealing to 0, as ours
                gamma=0.99, gae_lambda=0.95, clip_range=0.2, normalize_advantage=True,
                clip_range_vf=0.2,  # SB3's value clipping: the same work as our clipped value loss
                ent_coef=hp["ent_coef"], vf_coef=0.5, max_grad_norm=0.5, seed=1, device="cpu",
                policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]}, "activation_fn": torch.nn.Tanh})
    clock = rollout_clock()
    model.learn(task["steps"], callback=clock)
    points = clock.points[1:] + [(time.time(), model.num_timesteps)]  # ends of updates 1, 2, ...
    return {"sps": sps_after_warmup(points, task["warmup_updates"]), "torch_threads": torch.get_num_threads()}


def worker_sb3_recurrent(threads: str) -> dict:
    """Runs in benchmarks/.sb3-venv: sb3-contrib's RecurrentPPO with RL Zoo's CartPoleNoVel-v1
    settings. The env is CartPole-v1 with its velocities multiplied by 0, as RL Zoo's wrapper does."""
    import gymnasium as gym
    import numpy as np
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    if threads != "default":
        torch.set_num_threads(int(threads))
    mask = np.ones(4, dtype=np.float32)
    mask[RECURRENT["masked"]] = 0.0

    def no_velocity():
        env = gym.make("CartPole-v1")
        return gym.wrappers.TransformObservation(env, lambda obs: obs * mask, env.observation_space)

    envs = VecNormalize(make_vec_env(no_velocity, n_envs=8, seed=1), gamma=0.98)
    clock = rollout_clock()
    model = RecurrentPPO("MlpLstmPolicy", envs, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8,
                         ent_coef=0.0, learning_rate=lambda progress: 1e-3 * progress,
                         clip_range=lambda progress: 0.2 * progress, seed=1, device="cpu",
                         policy_kwargs={"ortho_init": False, "activation_fn": torch.nn.ReLU, "lstm_hidden_size": 64,
                                        "enable_critic_lstm": True, "net_arch": {"pi": [64], "vf": [64]}})
    model.learn(RECURRENT["steps"], callback=clock)
    points = clock.points[1:] + [(time.time(), model.num_timesteps)]
    return {"sps": sps_after_warmup(points, RECURRENT["warmup_updates"]), "torch_threads": torch.get_num_threads()}


def worker_sb3_atari(threads: str) -> dict:
    """Runs in benchmarks/.sb3-venv: SB3's PPO with its CnnPolicy on Breakout, CleanRL's
    settings. make_atari_env's AtariWrapper is DQN's preprocessing, VecFrameStack stacks 4."""
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    if threads != "default":
        torch.set_num_threads(int(threads))
    envs = VecFrameStack(make_atari_env(ATARI["cleanrl_env_id"], n_envs=8, seed=1), n_stack=4)
    model = PPO("CnnPolicy", envs, n_steps=128, batch_size=256, n_epochs=4, learning_rate=lambda p: 2.5e-4 * p,
                gamma=0.99, gae_lambda=0.95, clip_range=0.1, clip_range_vf=0.1, ent_coef=0.01, vf_coef=0.5,
                max_grad_norm=0.5, seed=1, device="cpu")
    clock = rollout_clock()
    model.learn(ATARI["steps"], callback=clock)
    points = clock.points[1:] + [(time.time(), model.num_timesteps)]
    return {"sps": sps_after_warmup(points, ATARI["warmup_updates"]), "torch_threads": torch.get_num_threads()}


def worker_profile_atari() -> dict:
    """Where one iteration of ppo_atari.py goes on Breakout (CleanRL's settings): the env and its
    preprocessing stepped with random actions, the CNN acting, and the update's parts, each timed
    alone with the script's own functions (one torch thread), in milliseconds per iteration."""
    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT))
    import ppo_atari as script

    torch.set_num_threads(1)
    num_envs, num_steps, epochs, minibatch = 8, 128, 4, 256
    envs = script.make_vec_env(ATARI["env_id"], num_envs)
    obs, _ = envs.reset(seed=1)
    envs.action_space.seed(0)
    actions = [envs.action_space.sample() for _ in range(64)]

    def per_call(fn, calls: int, warmup: int = 5) -> float:  # seconds per call, after a warm-up
        for i in range(warmup):
            fn(i)
        start = time.perf_counter()
        for i in range(calls):
            fn(i)
        return (time.perf_counter() - start) / calls

    env = per_call(lambda i: envs.step(actions[i % 64]), 256)
    raw = script.gym.make(ATARI["env_id"], frameskip=1, repeat_action_probability=0.0)  # the emulator alone
    raw.reset(seed=1)

    def frame(i):  # one frame of the emulator, a new game where one ends
        if raw.step(i % 4)[2]:
            raw.reset()

    emulator = per_call(frame, 4096)
    agent = script.Agent(envs.single_observation_space, int(envs.single_action_space.n))
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5, fused=True)
    next_obs = torch.from_numpy(obs)
    with torch.inference_mode():
        act = per_call(lambda i: agent.get_action_and_value(next_obs), 200)
    b_obs = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (minibatch, 4, 84, 84), np.uint8))
    with torch.no_grad():
        b_actions = agent.get_action_and_value(b_obs)[0]
    b_adv, b_logprob, b_value, b_return = (torch.randn(minibatch) for _ in range(4))

    def loss(_=None):
        _, new_logprob, entropy, new_value = agent.get_action_and_value(b_obs, b_actions)
        return script.ppo_loss(new_logprob, b_logprob, b_adv, new_value, b_value, b_return, entropy,
                               0.1, True, 0.01, 0.5)[0]

    def backward(_=None):
        optimizer.zero_grad()
        loss().backward()

    minibatches = epochs * num_envs * num_steps // minibatch
    forward = per_call(loss, 20)
    forward_backward = per_call(backward, 20)
    adam = per_call(lambda i: optimizer.step(), 50)
    ms = 1000.0 * num_steps
    return {"env: the emulator, 4 frames a step": emulator * 4 * num_envs * ms,
            "env: the preprocessing and the vector env": (env - emulator * 4 * num_envs) * ms,
            "act: the CNN and the two heads, 8 observations a call": act * ms,
            "update: forward and loss": forward * minibatches * 1000.0,
            "update: backward": (forward_backward - forward) * minibatches * 1000.0,
            "update: Adam step": adam * minibatches * 1000.0}


def rollout_clock():
    """An SB3 callback that records (wall time, env steps) at the start of every rollout, that is
    after the previous update."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Clock(BaseCallback):
        def __init__(self):
            super().__init__()
            self.points = []

        def _on_rollout_start(self) -> None:
            self.points.append((time.time(), self.num_timesteps))

        def _on_step(self) -> bool:
            return True

    return Clock()


def sb3_envs(task: dict, seed: int):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    envs = make_vec_env(task["env_id"], n_envs=task["sb3"]["n_envs"], seed=seed)
    if task["sb3"]["normalize"]:
        envs = VecNormalize(envs, gamma=0.99, clip_obs=10.0, clip_reward=10.0)
    return envs


def worker_floor_sb3(task: dict) -> dict:
    """SB3's vector env (and VecNormalize) stepped with random actions."""
    import numpy as np

    envs = sb3_envs(task, seed=1)
    envs.reset()
    envs.action_space.seed(0)
    actions = [np.stack([envs.action_space.sample() for _ in range(envs.num_envs)]) for _ in range(256)]
    calls = task["floor_steps"] // envs.num_envs
    start = time.perf_counter()
    for i in range(calls):
        envs.step(actions[i % 256])
    return {"sps": calls * envs.num_envs / (time.perf_counter() - start)}


def worker_floor_ours(task: dict) -> dict:
    """Our script's own vector env (and, for the continuous script, its normaliser) stepped with
    random actions: the rollout without the policy and without learning."""
    sys.path.insert(0, str(ROOT))
    script = __import__(task["script"].removesuffix(".py"))
    num_envs = task["sb3"]["n_envs"]  # the same envs as the timed runs
    envs = script.make_vec_env(task["env_id"], num_envs)
    obs, _ = envs.reset(seed=1)
    space = envs.action_space
    space.seed(0)
    actions = [space.sample() for _ in range(256)]
    scaler = getattr(script, "RewardScaler", None)
    if scaler is not None:  # the script's observation statistics and reward scale
        agent = script.Agent(obs.shape[1], envs.single_action_space.shape[0])
        scaler = scaler(num_envs, 0.99)
        agent.normalize_obs(obs)
    calls = task["floor_steps"] // num_envs
    start = time.perf_counter()
    for i in range(calls):
        obs, reward, terminated, truncated, _ = envs.step(actions[i % 256])
        if scaler is not None:
            agent.normalize_obs(obs)
            scaler.scale(reward, terminated | truncated)
    return {"sps": calls * num_envs / (time.perf_counter() - start)}


def worker_profile_ours(task: dict) -> dict:
    """Where one iteration of our script spends its time: each part timed alone with the script's
    own functions (one torch thread, the script's default), in milliseconds per iteration."""
    import torch

    sys.path.insert(0, str(ROOT))
    script = __import__(task["script"].removesuffix(".py"))
    torch.set_num_threads(1)
    hp = task["sb3"]
    num_envs, num_steps, epochs, minibatch = hp["n_envs"], hp["n_steps"], hp["n_epochs"], hp["batch_size"]
    minibatches = epochs * num_envs * num_steps // minibatch
    envs = script.make_vec_env(task["env_id"], num_envs)
    obs_dim, space = envs.single_observation_space.shape[0], envs.single_action_space
    agent = script.Agent(obs_dim, int(space.n) if hasattr(space, "n") else space.shape[0])
    optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4, eps=1e-5, fused=True)

    def per_call(fn, calls: int) -> float:  # seconds per call, after a warm-up
        for _ in range(20):
            fn()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls

    obs = torch.randn(num_envs, obs_dim)
    with torch.inference_mode():  # as the scripts act
        act = per_call(lambda: agent.get_action_and_value(obs), 2000)
    b_obs = torch.randn(minibatch, obs_dim)
    with torch.no_grad():
        b_actions = agent.get_action_and_value(b_obs)[0]
    b_adv, b_logprob, b_value, b_return = (torch.randn(minibatch) for _ in range(4))

    def loss():
        _, new_logprob, entropy, new_value = agent.get_action_and_value(b_obs, b_actions)
        adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)
        return script.ppo_loss(new_logprob, b_logprob, adv, new_value, b_value, b_return, entropy,
                               0.2, True, hp["ent_coef"], 0.5)[0]

    def backward():
        optimizer.zero_grad()
        loss().backward()

    forward = per_call(loss, 500)
    forward_backward = per_call(backward, 500)
    clip = per_call(lambda: torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5), 500)
    adam = per_call(optimizer.step, 500)
    shape = (num_steps, num_envs)
    rollout = {"rewards": torch.randn(shape), "values": torch.randn(shape), "next_values": torch.randn(shape),
               "terminations": (torch.rand(shape) < 0.01).float(), "truncations": torch.zeros(shape)}
    gae = per_call(lambda: script.compute_gae(**rollout, gamma=0.99, gae_lambda=0.95), 20)
    ms = 1000.0
    return {"act (policy + value, per env step)": act * num_steps * ms,
            "update: forward and loss": forward * minibatches * ms,
            "update: backward": (forward_backward - forward) * minibatches * ms,
            "update: gradient clipping": clip * minibatches * ms,
            "update: Adam step": adam * minibatches * ms,
            "GAE": gae * ms}


def ours(task: dict, threads: str, extra: list[str], root: Path = ROOT) -> dict:
    """Our script (in checkout `root`) from the command line, as a user runs it; SPS from its
    TensorBoard events."""
    cmd = [task["script"], "--env-id", task["env_id"], "--total-timesteps", str(task["steps"]), "--eval-episodes", "0",
           *task["ours"], *extra] + ([] if threads == "default" else ["--num-threads", threads])
    with tempfile.TemporaryDirectory() as log_dir:
        subprocess.run([sys.executable, *cmd, "--log-dir", log_dir], cwd=root, check=True, capture_output=True,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
        (run_dir,) = [e.path for e in os.scandir(log_dir)]
        points = sps_points(run_dir)
    return {"sps": sps_after_warmup(points, task["warmup_updates"]), "command": " ".join(["python", *cmd])}


def cleanrl_atari(threads: str) -> dict:
    """CleanRL's ppo_atari.py, patched (benchmarks/reference_runs/cleanrl_ppo_atari.patch), in its own
    virtual environment; SPS from its TensorBoard events, as ours. Made on first use."""
    import hashlib

    folder = HERE / ".cleanrl"
    source, python = folder / "ppo_atari.py", folder / "atari-venv" / "bin" / "python"
    if not source.is_file() or hashlib.sha256(source.read_bytes()).hexdigest() != CLEANRL_ATARI_SHA256:
        sys.exit(f"speed.py: error: {source} is not CleanRL's cleanrl/ppo_atari.py at {CLEANRL_ATARI_COMMIT}: copy "
                 "that file there (git show <commit>:cleanrl/ppo_atari.py)")
    patched = folder / "atari" / "ppo_atari.py"
    if not patched.exists():
        patched.parent.mkdir(parents=True, exist_ok=True)
        patched.write_bytes(source.read_bytes())
        subprocess.run(["patch", "-s", "-p1", "-i", str(HERE / "reference_runs" / "cleanrl_ppo_atari.patch")],
                       cwd=patched.parent, check=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *CLEANRL_ATARI_PACKAGES], check=True)
    env = dict(os.environ, PYTHONWARNINGS="ignore", **({} if threads == "default" else {"OMP_NUM_THREADS": threads}))
    cmd = ["ppo_atari.py", "--env-id", ATARI["cleanrl_env_id"], "--total-timesteps", str(ATARI["steps"])]
    with tempfile.TemporaryDirectory() as cwd:
        subprocess.run([str(python), str(patched), *cmd[1:]], cwd=cwd, check=True, capture_output=True, env=env)
        (run_dir,) = [e.path for e in os.scandir(f"{cwd}/runs")]
        points = sps_points(run_dir)
    prefix = "" if threads == "default" else f"OMP_NUM_THREADS={threads} "
    return {"sps": sps_after_warmup(points, ATARI["warmup_updates"]), "command": prefix + " ".join(["python", *cmd])}


# --atari: each program at one torch thread and at its default (ours: 1); ours at 2 threads too.
ATARI_SIDES = [("ours", "1"), ("cleanrl", "1"), ("sb3", "1"), ("ours", "2"), ("cleanrl", "default"),
               ("sb3", "default")]
VECTOR_ENVS = ["sync", "ale", "envpool"]  # --atari's whole runs of ppo_atari.py on each vector env
ENVPOOL_VENV = HERE / ".envpool-venv"
ENVPOOL_PACKAGES = ["torch==2.13.0", "gymnasium==1.4.0", "numpy==2.4.6", "envpool==1.2.5", "tyro",
                    "tensorboard"]


def cpu_jiffies() -> tuple[int, int]:
    """(busy, steal) clock ticks of the whole machine so far, from /proc/stat; busy counts steal."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return user + nice + system + irq + softirq + steal, steal


def timed(fn, steps: int) -> dict:
    """One measurement that starts one child process: the 1-minute load average before it, the
    child's CPU seconds per 1,000 steps (its whole run, start-up included), and the cores that
    others kept busy meanwhile: the machine's busy time (hypervisor steal and this process's own
    reading of the results included) less the child's, per second of wall time."""
    load, clock = os.getloadavg()[0], os.sysconf("SC_CLK_TCK")
    before, (busy0, steal0), start = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_jiffies(), time.time()
    result = fn()
    after, (busy1, steal1), wall = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_jiffies(), time.time() - start
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {**result, "load": load, "cpu_per_1k": 1000 * cpu / steps,
            "others": max(0.0, ((busy1 - busy0) / clock - cpu) / wall), "steal": (steal1 - steal0) / clock / wall}


def time_atari(sb3_python: str, runs: int) -> dict:
    """ATARI_SIDES alternated, `runs` rounds, on Breakout; then ppo_atari.py's whole run on each
    vector env, alternated; then the vector envs alone and the parts of ppo_atari.py's iteration."""
    subprocess.run([sb3_python, "-m", "pip", "install", "-q", "ale-py==0.12.1", "opencv-python-headless"], check=True)
    envpool_python = ensure_venv(ENVPOOL_VENV, ENVPOOL_PACKAGES)
    start, steps = time.time(), ATARI["steps"]
    measure = {"ours": lambda t: ours(ATARI, t, []), "cleanrl": cleanrl_atari,
               "sb3": lambda t: call_worker(sb3_python, "sb3-atari", "cartpole", t)}
    sides = {f"{who} {threads}": [] for who, threads in ATARI_SIDES}
    commands = {}
    for i in range(runs):
        for who, threads in ATARI_SIDES:
            r = timed(lambda who=who, threads=threads: measure[who](threads), steps)
            sides[f"{who} {threads}"].append(r)
            commands[f"{who} {threads}"] = r.get("command", "")
            print(f"atari round {i + 1}/{runs} {who} threads={threads}: {r['sps']:,.0f} SPS, "
                  f"{r['cpu_per_1k']:.1f} CPU-s/1k steps, load {r['load']:.2f}, others {r['others']:.2f} "
                  "cores", flush=True)
    vector = {name: [] for name in VECTOR_ENVS}
    for i in range(runs):
        for name in VECTOR_ENVS:
            python = envpool_python if name == "envpool" else sys.executable
            r = timed(lambda python=python, name=name: call_worker(python, "atari-vector", name), steps)
            vector[name].append(r)
            print(f"atari round {i + 1}/{runs} ppo_atari.py on {name}: {r['sps']:,.0f} SPS, "
                  f"others {r['others']:.2f} cores", flush=True)
    alone = {name: call_worker(envpool_python if name == "envpool" else sys.executable, "atari-vector-alone", name)
             for name in VECTOR_ENVS}
    profile = call_worker(sys.executable, "profile-atari", "cartpole")
    version = subprocess.run([sb3_python, "-c", "import stable_baselines3; print(stable_baselines3.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    sys.path.insert(0, str(HERE))
    from run import machine

    return {"command": "python benchmarks/speed.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
            "minutes": (time.time() - start) / 60, "sb3_version": version, "runs": runs, "machine": machine(),
            "commands": commands, "sides": sides, "vector": vector, "vector_alone": alone, "profile": profile}


def atari_vector_env(name: str, num_envs: int):
    """Breakout envs with DQN's preprocessing as far as each offers it (life loss as termination,
    FIRE at a life's start, rewards clipped to their sign): gymnasium's SyncVectorEnv of
    ppo_atari.py's make_env, ale-py's AtariVectorEnv (SAME_STEP autoreset, as ours), or EnvPool."""
    sys.path.insert(0, str(ROOT))
    import ppo_atari as script

    if name == "sync":
        return script.make_vec_env(ATARI["env_id"], num_envs)
    if name == "ale":
        from ale_py.vector_env import AtariVectorEnv

        return AtariVectorEnv("breakout", num_envs, autoreset_mode="SameStep", episodic_life=True,
                              repeat_action_probability=0.0)
    import envpool

    return EnvPoolAdapter(envpool.make_gymnasium("Breakout-v5", num_envs=num_envs, episodic_life=True,
                                                 reward_clip=True, repeat_action_probability=0.0))


class EnvPoolAdapter:
    """EnvPool's env, its reset's seed dropped (EnvPool fixes its seeds when made). EnvPool resets
    an env on the step after its episode ends (NEXT_STEP), where the loop expects SAME_STEP:
    enough to time it, not to train."""

    def __init__(self, env):
        self.env, self.single_observation_space, self.single_action_space = env, env.observation_space, env.action_space

    def reset(self, seed=None):
        return self.env.reset()

    def step(self, actions):
        return self.env.step(actions)

    def close(self):
        self.env.close()


def worker_atari_vector(name: str) -> dict:
    """ppo_atari.py's `train` on Breakout with CleanRL's settings, its vector env swapped for `name`'s."""
    sys.path.insert(0, str(ROOT))
    import ppo_atari as script

    if name != "sync":
        script.make_vec_env = lambda env_id, num_envs, sticky_actions=None: atari_vector_env(name, num_envs)
    args = script.Args(env_id=ATARI["env_id"], total_timesteps=ATARI["steps"], update_epochs=4, vf_coef=0.5,
                       anneal_clip=False, num_threads=1)
    with tempfile.TemporaryDirectory() as log_dir:
        with contextlib.redirect_stdout(sys.stderr):
            script.train(args, writer=script.SummaryWriter(log_dir))
        points = sps_points(log_dir)
    return {"sps": sps_after_warmup(points, ATARI["warmup_updates"])}


def worker_atari_vector_alone(name: str) -> dict:
    """Steps per second of `name`'s 8 envs alone, random actions, no learning."""
    import numpy as np

    envs = atari_vector_env(name, 8)
    envs.reset(seed=1)
    actions = np.random.default_rng(0).integers(0, 4, (64, 8))
    for i in range(32):
        envs.step(actions[i % 64])
    start = time.perf_counter()
    for i in range(512):
        envs.step(actions[i % 64])
    return {"sps": 512 * 8 / (time.perf_counter() - start)}


def atari_section(r: dict) -> list[str]:
    """SPEED.md's tables: ppo_atari.py against CleanRL's ppo_atari.py and SB3's CnnPolicy,
    ppo_atari.py on three vector envs, and where ppo_atari.py's time goes."""
    lines = ["## Pixels: `ppo_atari.py` against CleanRL's `ppo_atari.py` and SB3's `CnnPolicy`", "",
             f"Generated by `{r['command']}` on {r['date']}, in {r['minutes']:.0f} minutes, on "
             + (f"{r['machine']['cpu']}, {r['machine']['cores']} cores. " if "machine" in r else "the machine above. ")
             + f"Breakout, {ATARI['steps']:,} steps (4 frames each), SPS after {ATARI['warmup_updates']} warm-up "
             "updates. The settings are CleanRL's on all three sides: 8 envs × 128 steps, 4 epochs of 4 "
             "minibatches, ε 0.1 constant, c₁ 0.5, the Nature CNN shared by actor and critic. CleanRL's file is "
             f"vwxyzjn/cleanrl@{CLEANRL_ATARI_COMMIT} with the patch of benchmarks/reference_runs/, on gymnasium "
             f"0.29.1 and ale-py 0.9.0. SB3 is stable-baselines3 {r['sb3_version']} on gymnasium 1.4.0 and ale-py "
             f"0.12.1. {r['runs']} rounds, each running the six rows below once, in this order. Threads: *1* "
             "gives a program one torch thread (ours: `--num-threads 1`; CleanRL: `OMP_NUM_THREADS=1`; SB3: "
             "`torch.set_num_threads(1)`). *default* is a program as it starts: for CleanRL and SB3, torch's "
             "default of one thread per core (2 here). Ours starts with one thread, so its default row is its "
             "*1* row.", "",
             "Each figure is the median of the rounds. *CPU-s / 1k steps* is the CPU time of the whole process "
             "(start-up included) per 1,000 steps. *Load before* is the 1-minute load average as the run "
             "starts. It is a moving average over about a minute, so it mostly shows the run before: near 1 "
             "after a one-thread run, 1.6 to 2 after a two-thread one. *Others* is the cores that others kept "
             "busy during the run: the machine's busy time (hypervisor steal and speed.py's own reading of the "
             "results included) less the run's, per second. It is the check that the machine was quiet.", "",
             "| program | threads | SPS | CPU-s / 1k steps | ours at as many threads, × | load before, each run | "
             "others, max | SPS, each run |", "|---|---|---|---|---|---|---|---|"]
    sps = {side: median([x["sps"] for x in runs]) for side, runs in r["sides"].items()}
    for side, runs in r["sides"].items():
        who, threads = side.split()
        ratio = "" if who == "ours" else f"{sps['ours 1' if threads == '1' else 'ours 2'] / sps[side]:.2f}×"
        lines.append(f"| {dict(ours='ours', cleanrl='CleanRL', sb3='SB3')[who]} | {threads} | {sps[side]:,.0f} | "
                     f"{median([x['cpu_per_1k'] for x in runs]):.1f} | {ratio} | "
                     + ", ".join(f"{x['load']:.2f}" for x in runs) + f" | {max(x['others'] for x in runs):.2f} | "
                     + ", ".join(f"{x['sps']:,.0f}" for x in runs) + " |")
    fast1, fast2 = max(sps["cleanrl 1"], sps["sb3 1"]), max(sps["cleanrl default"], sps["sb3 default"])
    lines += ["", f"Against the faster peer, ours is {sps['ours 1'] / fast1:.2f}× at one thread each and "
              f"{sps['ours 2'] / fast2:.2f}× at two threads each. At each program's default (ours one thread, the "
              f"peers two) it is {sps['ours 1'] / fast2:.2f}×: ours keeps one thread unless told otherwise, so "
              "that a run's results do not depend on the machine's core count, and so that runs side by side "
              "do not fight over cores. A run alone on a machine goes faster with `--num-threads` set to its "
              f"cores: {sps['ours 2'] / sps['ours 1']:.2f}× here with two.", "",
              "On a shared node, give each run as many torch threads as the cores it was given, and no more "
              "(`--num-threads`, or `OMP_NUM_THREADS` for the peers). torch's default is one thread per core "
              "that the process may run on. A job limited by CPU time instead (`docker --cpus`, a Kubernetes "
              "limit, cgroup `cpu.max`), or placed by a scheduler that does not bind it to cores, still gets "
              "one thread per core it can see. Several such runs on one node then ask for more threads than "
              "there are cores, and every matrix product waits for its slowest thread.", ""]
    names = {"sync": "gymnasium's SyncVectorEnv of make_env (today's)",
             "ale": "ale-py's AtariVectorEnv (C++ threads)", "envpool": "EnvPool 1.2.5 (C++ threads)"}
    base = median([x["sps"] for x in r["vector"]["sync"]])
    lines += ["### ppo_atari.py on other vector envs", "",
              "ppo_atari.py's `train` with our command's settings at one torch thread, its `make_vec_env` "
              "swapped for another vector env (worker `atari-vector`). Each has DQN's preprocessing as far as "
              "it offers it. ale-py 0.12.1's `episodic_life` starts a new game at each lost life, where ours "
              "and EnvPool's play on, and the no-ops and FIRE at a start differ a little. Both C++ envs step "
              "their envs on a pool of their own threads (2 on this machine), so their rows also use the "
              "second core while the envs step. The rounds alternate the three. *Alone* is the 8 envs stepped "
              "with random actions, no learning, one run each after the rounds.", "",
              "| vector env | whole run, SPS | gain | alone, SPS | others, max | SPS, each run |",
              "|---|---|---|---|---|---|"]
    for name, runs in r["vector"].items():
        s = median([x["sps"] for x in runs])
        lines.append(f"| {names[name]} | {s:,.0f} | {100 * (s / base - 1):+.0f}% | "
                     f"{r['vector_alone'][name]['sps']:,.0f} | {max(x['others'] for x in runs):.2f} | "
                     + ", ".join(f"{x['sps']:,.0f}" for x in runs) + " |")
    gains = {name: 100 * (median([x["sps"] for x in runs]) / base - 1) for name, runs in r["vector"].items()}
    best = max(gains, key=gains.get)
    verdict = (f"Neither is adopted: the better, {names[best].split(' (')[0]}, gains {gains[best]:.0f}% on a whole "
               "run, under the 15% that an opt-in speed flag must gain. The env is a small part of an "
               "iteration (the table below)." if gains[best] < 15 else
               f"{names[best].split(' (')[0]} gains {gains[best]:.0f}% on a whole run, at least the 15% that an "
               "opt-in speed flag must gain.")
    lines += ["", verdict + " Both would also give up the exact resume mid-game: neither can "
              "save and restore its games' state (neither has a method for it, and neither can be pickled), so "
              "a resumed run would start new games. EnvPool also resets an env on the step after its episode "
              "ends, and ignores that step's action, where ppo_atari.py's loop expects the reset within the "
              "step that ends the episode."]
    total = 1000.0 * 8 * 128 / sps["ours 1"]
    parts = dict(r["profile"])
    parts["the rest (storage, conversions, logging, parts slowed by running together)"] = total - sum(parts.values())
    lines += ["", f"Where ppo_atari.py's time goes, one iteration of 1,024 steps ({total:,.0f} ms at the median "
              "SPS of ours at one thread). Each part is timed alone by `worker_profile_atari`, one thread, in "
              "one run after the rounds, not alternated. *The rest* is the difference, so it also takes up "
              "any drift of the machine between that run and the rounds.", "",
              "| part | ms per iteration | share |", "|---|---|---|"]
    lines += [f"| {name} | {ms:,.0f} | {100 * ms / total:.0f}% |" for name, ms in parts.items()]
    return lines + ["", "Commands: " + "; ".join(f"{side}: `{c}`" for side, c in r["commands"].items() if c) + ".", ""]


def line_profile(task: dict) -> str:
    """The markdown tables of benchmarks/profile_lines.py for our command of the task."""
    cmd = [sys.executable, str(HERE / "profile_lines.py"), Path(task["script"]).stem, "--markdown",
           "--env-id", task["env_id"], "--total-timesteps", str(task["steps"]), *task["ours"]]
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def call_worker(python: str, kind: str, task_name: str, threads: str = "default") -> dict:
    proc = subprocess.run([python, str(Path(__file__)), "--worker", kind, "--tasks", task_name, "--threads", threads],
                          cwd=ROOT, check=True, capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ensure_venv(folder: Path = SB3_VENV, packages: list[str] = SB3_PACKAGES) -> str:
    """The python of a virtual environment of its own, made with `packages` on first use."""
    python = folder / "bin" / "python"
    if not python.exists():
        print(f"installing {' '.join(packages)} into {folder.relative_to(ROOT)} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    return str(python)


def median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def write_report(results: dict, path: Path) -> None:
    m = results["machine"]
    lines = [
        "# Speed: our PPO scripts against Stable-Baselines3's PPO",
        "",
        f"Generated by `{results['command']}` on {results['date']}, in {results['minutes']:.0f} minutes.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, no GPU; Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + f"; stable-baselines3 {results['sb3_version']}.",
        "",
        "Settings, the same on both sides (CleanRL's): CartPole-v1 with 4 envs × 128 steps, 4 epochs of 4 "
        "minibatches, ent 0.01; HalfCheetah-v4 with 1 env × 2048 steps, 10 epochs of 32 minibatches, observation "
        "normalisation and reward scaling; both: 64-64 tanh actor and critic, lr annealed, clipped value loss, "
        "grad-norm 0.5. SPS counts the steps after the warm-up updates; each figure is the median of "
        f"{results['runs']} runs, ours and SB3's alternated. Thread settings: *default* is each program as it "
        "starts (ours: 1 torch thread, its `--num-threads` default; SB3: torch's default, one per core); *1* gives "
        "both one torch thread.",
        "",
        "| task | threads | ours SPS (median) | SB3 SPS (median) | ours / SB3 | ours, % of our env floor | "
        "SB3, % of its env floor | ours, all runs | SB3, all runs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task_name, task_results in results["tasks"].items():
        floors = task_results["floor"]
        for threads, r in task_results["threads"].items():
            a, b = median(r["ours"]), median(r["sb3"])
            lines.append(f"| {TASKS[task_name]['env_id']} | {threads} | {a:,.0f} | {b:,.0f} | **{a / b:.2f}×** | "
                         f"{100 * a / floors['ours']:.0f}% | {100 * b / floors['sb3']:.0f}% | "
                         f"{', '.join(f'{x:,.0f}' for x in r['ours'])} | {', '.join(f'{x:,.0f}' for x in r['sb3'])} |")
    lines += ["", "Env-only floors (random actions, no policy, no learning; steps per second):", ""]
    for task_name, task_results in results["tasks"].items():
        floors = task_results["floor"]
        lines.append(f"- {TASKS[task_name]['env_id']}: ours {floors['ours']:,.0f} (the script's `make_vec_env`"
                     + (" and its normalisation" if TASKS[task_name]["sb3"]["normalize"] else "")
                     + f"), SB3 {floors['sb3']:,.0f} (`make_vec_env`"
                     + (" + `VecNormalize`" if TASKS[task_name]["sb3"]["normalize"] else "") + ")")
    lines += ["", "## Where our time goes", "",
              "One iteration (one rollout and its update) of each script, in milliseconds: the env's share is the "
              "iteration's steps at the env-only floor's speed; the other parts are timed alone with the script's "
              "own functions (`worker_profile_ours`); *the rest* is what remains of the measured iteration time "
              "(median SPS, one thread): storing the rollout, tensor conversions, bookkeeping and logging, and "
              "the slowdown of every part when it runs interleaved with the others instead of alone in warm "
              "caches.", ""]
    for task_name, task_results in results["tasks"].items():
        hp = TASKS[task_name]["sb3"]
        steps = hp["n_envs"] * hp["n_steps"]
        ours_sps = median(task_results["threads"].get("1", next(iter(task_results["threads"].values())))["ours"])
        total = 1000.0 * steps / ours_sps
        parts = {"env steps (+ normalisation), at the floor's speed": 1000.0 * steps / task_results["floor"]["ours"],
                 **task_results["profile"]}
        parts["the rest"] = total - sum(parts.values())
        lines += [f"**{TASKS[task_name]['env_id']}** ({steps} steps per iteration, {total:.0f} ms measured):", "",
                  "| part | ms per iteration | share |", "|---|---|---|"]
        lines += [f"| {name} | {ms:.0f} | {100 * ms / total:.0f}% |" for name, ms in parts.items()]
        lines.append("")
    profiled = {name: r["line_profile"] for name, r in results["tasks"].items() if r.get("line_profile")}
    if profiled:
        lines += ["## Line by line", "",
                  "Where each microsecond of an env step goes, per line of `train`'s loop, everything the line "
                  "calls included (benchmarks/profile_lines.py: our command in a run of its own, one torch thread, "
                  "with a clock read before and after every statement of the loop, and around the test or "
                  "iterable of every `if` and `for` header; the last row is what the lines leave out of the "
                  "loop's total).", ""]
        for task_name, text in profiled.items():
            summary, _, tables = text.partition("\n")
            lines += [f"**{TASKS[task_name]['env_id']}**: {summary}", "", tables.strip(), ""]
    lines += ["Our commands (SB3's side is `worker_sb3` in benchmarks/speed.py):", ""]
    lines += [f"- `{r['command']}`" for r in results["our_commands"]]
    if "recurrent" in results:
        lines += [""] + recurrent_section(results["recurrent"])
    if "atari" in results:
        lines += [""] + atari_section(results["atari"])
    notes = HERE / "speed_notes.md"  # what the figures say, written by hand
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    path.write_text("\n".join(lines) + "\n")


def time_recurrent(sb3_python: str, runs: int, thread_settings: list[str]) -> dict:
    """ppo_recurrent.py and sb3-contrib's RecurrentPPO alternated, `runs` times each per thread
    setting, on the RECURRENT task."""
    version = subprocess.run([sb3_python, "-c", "import sb3_contrib; print(sb3_contrib.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    start, per_threads = time.time(), {}
    for threads in thread_settings:
        sps = {"ours": [], "sb3": []}
        for i in range(runs):
            a = ours(RECURRENT, threads, [])
            b = call_worker(sb3_python, "sb3-recurrent", "cartpole", threads)
            sps["ours"].append(a["sps"])
            sps["sb3"].append(b["sps"])
            print(f"recurrent threads={threads} run {i + 1}/{runs}: ours {a['sps']:,.0f} SPS, "
                  f"RecurrentPPO {b['sps']:,.0f} SPS ({b['torch_threads']} torch threads)", flush=True)
        per_threads[threads] = sps
    return {"command": "python benchmarks/speed.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
            "minutes": (time.time() - start) / 60, "sb3_contrib_version": version, "runs": runs,
            "our_command": a["command"], "threads": per_threads}


def recurrent_section(r: dict) -> list[str]:
    """SPEED.md's table of ppo_recurrent.py against RecurrentPPO."""
    lines = ["## Memory: `ppo_recurrent.py` against sb3-contrib's RecurrentPPO", "",
             f"Generated by `{r['command']}` on {r['date']}, in {r['minutes']:.0f} minutes, on the machine above; "
             f"sb3-contrib {r['sb3_contrib_version']}. Both sides use RL Zoo's CartPoleNoVel-v1 settings: 8 envs × "
             "32 steps, 20 epochs of one minibatch of 256 steps, an LSTM of 64 units for the actor and another for "
             "the critic, each with a hidden layer of 64 ReLU units, observation normalisation and reward "
             f"scaling. SPS as above, after {RECURRENT['warmup_updates']} warm-up updates, of "
             f"{RECURRENT['steps']:,} steps; each figure is the median of {r['runs']} runs, alternated.", "",
             "| threads | ours SPS (median) | RecurrentPPO SPS (median) | ours / RecurrentPPO | ours, all runs | "
             "RecurrentPPO, all runs |", "|---|---|---|---|---|---|"]
    for threads, sps in r["threads"].items():
        a, b = median(sps["ours"]), median(sps["sb3"])
        lines.append(f"| {threads} | {a:,.0f} | {b:,.0f} | **{a / b:.2f}×** | {', '.join(f'{x:,.0f}' for x in sps['ours'])} "
                     f"| {', '.join(f'{x:,.0f}' for x in sps['sb3'])} |")
    return lines + ["", f"Our command: `{r['our_command']}`", ""]


def compare(checkouts: list[Path], task: dict, runs: int) -> dict[Path, list[float]]:
    """Our command of `task` from each checkout in turn (A B A B ...), `runs` times each: how a
    change is timed against the code before it. Prints each run and the medians."""
    sps = {root: [] for root in checkouts}
    for i in range(runs):
        for root in checkouts:
            sps[root].append(ours(task, "default", [], root)["sps"])
            print(f"run {i + 1}/{runs} {root}: {sps[root][-1]:,.0f} SPS", flush=True)
    base = median(sps[checkouts[0]])
    for root, values in sps.items():
        print(f"{root}: median {median(values):,.0f} SPS ({median(values) / base - 1:+.1%}), "
              f"runs {', '.join(f'{x:,.0f}' for x in values)}")
    return sps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each side per task and thread setting")
    parser.add_argument("--tasks", default="cartpole,halfcheetah", help="comma-separated: " + ", ".join(TASKS))
    parser.add_argument("--threads", default="default,1", help="comma-separated thread settings: default and/or a number")
    parser.add_argument("--ours-flags", default="", help="extra flags for our scripts (e.g. an opt-in speed flag)")
    parser.add_argument("--line-profile", action="store_true", help="add line-by-line timings of our scripts")
    parser.add_argument("--out", type=Path, default=HERE / "SPEED.md", help="the report (raw figures go beside it as .json)")
    parser.add_argument("--compare", nargs="+", type=Path, metavar="CHECKOUT",
                        help="instead of the report: time our command of each task from these checkouts, alternated")
    parser.add_argument("--script", help="with --compare: this script instead of the task's (e.g. vpg.py)")
    parser.add_argument("--recurrent", action="store_true",
                        help="instead: ppo_recurrent.py against sb3-contrib's RecurrentPPO, added to the report")
    parser.add_argument("--atari", action="store_true",
                        help="instead: ppo_atari.py against CleanRL's ppo_atari.py and SB3's CnnPolicy, added to the report")
    parser.add_argument("--report", action="store_true", help="instead: rewrite the report from its .json, timing nothing")
    parser.add_argument("--worker", choices=["sb3", "sb3-recurrent", "sb3-atari", "floor-sb3", "floor-ours", "profile-ours",
                                             "profile-atari", "atari-vector", "atari-vector-alone"],
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    task_names = args.tasks.split(",")
    if args.worker:  # one measurement, in a fresh process
        task = TASKS.get(task_names[0])  # atari-vector workers: the vector env's name instead
        result = {"sb3": lambda: worker_sb3(task, args.threads), "sb3-recurrent": lambda: worker_sb3_recurrent(args.threads),
                  "sb3-atari": lambda: worker_sb3_atari(args.threads), "profile-atari": worker_profile_atari,
                  "floor-sb3": lambda: worker_floor_sb3(task),
                  "atari-vector": lambda: worker_atari_vector(task_names[0]),
                  "atari-vector-alone": lambda: worker_atari_vector_alone(task_names[0]),
                  "floor-ours": lambda: worker_floor_ours(task), "profile-ours": lambda: worker_profile_ours(task)}[args.worker]()
        print(json.dumps(result))
        return

    if args.report:
        write_report(json.loads(args.out.with_suffix(".json").read_text()), args.out)
        print(f"wrote {args.out}")
        return
    if args.compare:
        for task_name in task_names:
            compare(args.compare, {**TASKS[task_name], **({"script": args.script} if args.script else {})}, args.runs)
        return

    sys.path.insert(0, str(HERE))
    from run import machine

    sb3_python = ensure_venv()
    if args.recurrent or args.atari:
        results = json.loads(args.out.with_suffix(".json").read_text())
        if args.recurrent:
            results["recurrent"] = time_recurrent(sb3_python, args.runs, args.threads.split(","))
        else:
            results["atari"] = time_atari(sb3_python, args.runs)
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
        write_report(results, args.out)
        print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
        return
    sb3_version = subprocess.run([sb3_python, "-c", "import stable_baselines3; print(stable_baselines3.__version__)"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    start = time.time()
    results = {"command": "python benchmarks/speed.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
               "machine": machine(), "sb3_version": sb3_version, "runs": args.runs, "tasks": {}, "our_commands": []}
    extra = args.ours_flags.split()
    for task_name in task_names:
        task = TASKS[task_name]
        floor = {"ours": call_worker(sys.executable, "floor-ours", task_name)["sps"],
                 "sb3": call_worker(sb3_python, "floor-sb3", task_name)["sps"]}
        print(f"{task_name}: env-only floor, ours {floor['ours']:,.0f} SPS, SB3 {floor['sb3']:,.0f} SPS", flush=True)
        per_threads = {}
        for threads in args.threads.split(","):
            sps = {"ours": [], "sb3": []}
            for i in range(args.runs):
                a = ours(task, threads, extra)
                b = call_worker(sb3_python, "sb3", task_name, threads)
                sps["ours"].append(a["sps"])
                sps["sb3"].append(b["sps"])
                print(f"{task_name} threads={threads} run {i + 1}/{args.runs}: ours {a['sps']:,.0f} SPS, "
                      f"SB3 {b['sps']:,.0f} SPS ({b['torch_threads']} torch threads)", flush=True)
            per_threads[threads] = sps
            if a["command"] not in [c["command"] for c in results["our_commands"]]:
                results["our_commands"].append({"command": a["command"]})
        profile = call_worker(sys.executable, "profile-ours", task_name)
        results["tasks"][task_name] = {"floor": floor, "threads": per_threads, "profile": profile}
        if args.line_profile:
            results["tasks"][task_name]["line_profile"] = line_profile(task)
    results["minutes"] = (time.time() - start) / 60
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    write_report(results, args.out)
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
