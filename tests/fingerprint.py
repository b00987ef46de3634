"""Fingerprints of short training runs, to show that a change leaves learning alone.

    python tests/fingerprint.py > /tmp/after.txt                      # the working tree
    python tests/fingerprint.py --root /tmp/before > /tmp/before.txt  # another checkout
    diff /tmp/before.txt /tmp/after.txt                               # empty: same results

Each line is one run (script, env, steps) with the sha1 of its episodic returns, of its final
weights (the state_dict) and of its greedy evaluation's returns. CPU runs are deterministic, so
the same code gives the same three hashes on every call; any change to what a run computes
changes at least one of them. Not a test: it runs outside pytest and CI.
"""

import argparse
import hashlib
import importlib.util
import os
import sys
import tempfile
import warnings
from contextlib import redirect_stdout

import torch

RUNS = [  # (script, flags): each script's defaults on a short budget, several updates each
    ("reinforce", dict(env_id="CartPole-v1", total_timesteps=20_000)),
    ("reinforce", dict(env_id="Pendulum-v1", total_timesteps=12_000)),
    # vpg.py's policy step size, its default since it became reinforce.py's: given, so that a
    # checkout from before (default 3e-4) runs the same command
    ("vpg", dict(env_id="CartPole-v1", total_timesteps=16_000, learning_rate=3e-3)),
    ("vpg", dict(env_id="Pendulum-v1", total_timesteps=16_000, learning_rate=3e-3)),
    ("trpo", dict(env_id="CartPole-v1", total_timesteps=24_000)),
    ("trpo", dict(env_id="Pendulum-v1", total_timesteps=16_000)),
    ("ppo_discrete", dict(env_id="CartPole-v1", total_timesteps=16_384)),
    ("ppo_continuous", dict(env_id="Pendulum-v1", total_timesteps=8192)),
    ("ppo_continuous", dict(env_id="HalfCheetah-v4", total_timesteps=4096)),
    ("ppo_recurrent", dict(env_id="CartPoleNoVel-v1", total_timesteps=4096)),
    ("ppo_recurrent", dict(env_id="PendulumNoVel-v1", total_timesteps=4096)),
    ("ppo_atari", dict(env_id="MinAtar/Breakout-v1", total_timesteps=16_384)),
    ("ppo_atari", dict(env_id="ALE/Pong-v5", total_timesteps=2048, num_envs=2)),
]


def sha1(values) -> str:
    return hashlib.sha1(repr(values).encode()).hexdigest()[:12]


def fingerprint(root: str, script: str, flags: dict) -> str:
    spec = importlib.util.spec_from_file_location(f"fp_{script}", os.path.join(root, f"{script}.py"))
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # checkpoints pickle its classes
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as log_dir, open(os.devnull, "w") as null, redirect_stdout(null):
        if os.path.exists(os.path.join(root, "tooling.py")):  # the tooling in its own file (0.5.0)
            tooling = importlib.import_module("tooling")
            result = tooling.main(module, tooling.run_args(module)(**flags, eval_episodes=2,
                                                                   log_dir=log_dir))
        elif hasattr(module, "RunArgs"):  # `main` runs `train` with the tooling around it
            result = module.main(module.RunArgs(**flags, eval_episodes=2, log_dir=log_dir))
        else:  # a checkout from before the tooling left `train` (73d22e8 and older)
            result = module.train(module.Args(**flags, eval_episodes=2, log_dir=log_dir))
    weights = b"".join(t.numpy().tobytes() for t in result["agent"].state_dict().values() if isinstance(t, torch.Tensor))
    returns = [round(r, 6) for _, r in result["episodic_returns"]]
    return (f"{script} {flags['env_id']} {flags['total_timesteps']}: returns {sha1(returns)} "
            f"weights {hashlib.sha1(weights).hexdigest()[:12]} eval {sha1(result['eval_returns'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the checkout whose scripts to run (default: this one)")
    parser.add_argument("--only", default="", help="only the runs of scripts whose name contains this")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    sys.path.insert(0, args.root)
    for script, flags in RUNS:
        if args.only in script:
            print(fingerprint(args.root, script, flags), flush=True)


if __name__ == "__main__":
    main()
