"""trpo.py with the RL Zoo's normalisation, to measure what it is worth on MuJoCo.

    python benchmarks/trpo_normalized.py --env-id Hopper-v4 --seed 1 [--zoo-batch] [--out FILE]

SB3-contrib's TRPO, whose RL Zoo figures RESULTS.md compares trpo.py with, trains MuJoCo behind
VecNormalize: observations normalised by a running mean and variance, rewards divided by the
std of a running discounted return. trpo.py has neither (like Spinning Up's TRPO, whose
defaults it keeps). This runs trpo.py unchanged at its defaults and 1M steps, with only its
`make_vec_env` replaced by one that adds Gymnasium's normalisers:

- NormalizeObservation inside each env (per-env statistics), so that the final observation in
  infos["final_obs"], which bootstraps a truncated episode, is normalised like every other;
- NormalizeReward on the vector env, outside RecordEpisodeStatistics, so that the logged
  returns stay the env's own.

Neither clips (VecNormalize clips both at 10). With --zoo-batch, the Zoo's batch and λ too (2 envs
× 1024 steps, λ 0.95: the trpo-zoo suite's flags), so that the two differences are also
measured together. The policy learns on normalised observations, so
the script's evaluation, which would feed it raw ones, is switched off. Writes the last-100
mean of the training returns and the curve to --out as JSON (atomically), and skips a run whose
file is already there.
"""

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import trpo  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from run import script_commit  # noqa: E402

import tooling


def make_normalized_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.NormalizeObservation(trpo.make_env(env_id)) for _ in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)  # the env's own returns
    return gym.wrappers.vector.NormalizeReward(envs, gamma=0.99)  # trpo.py's default γ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--zoo-batch", action="store_true", help="also --num-envs 2 --num-steps 1024 --gae-lambda 0.95")
    parser.add_argument("--out", type=Path,
                        help="default: benchmarks/results/trpo_normalized/<env>[__zoo-batch]__seed<seed>.json")
    args = parser.parse_args()
    name = f"{args.env_id}{'__zoo-batch' if args.zoo_batch else ''}__seed{args.seed}.json"
    out = args.out or ROOT / "benchmarks" / "results" / "trpo_normalized" / name
    if out.exists():
        print(f"{out} exists: skipped")
        return
    trpo.make_vec_env = make_normalized_vec_env
    start = time.time()
    zoo = dict(num_envs=2, num_steps=1024, gae_lambda=0.95) if args.zoo_batch else {}
    trpo_args = tooling.run_args(trpo)(env_id=args.env_id, seed=args.seed, total_timesteps=args.total_timesteps, eval_episodes=0,
                          log_dir="/tmp/trpo_normalized_runs", **zoo)
    result = tooling.main(trpo, trpo_args)
    returns = result["episodic_returns"]
    record = {
        "command": f"python benchmarks/trpo_normalized.py --env-id {args.env_id} --seed {args.seed}"
                   + (" --zoo-batch" if args.zoo_batch else ""),
        "final_return": round(float(np.mean([r for _, r in returns[-100:]])), 2),
        "global_step": result["global_step"], "wall_seconds": round(time.time() - start, 1),
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "gymnasium": gym.__version__},
        "curve": {"step": [s for s, _ in returns], "return": [round(r, 2) for _, r in returns]},
        "flags": asdict(trpo_args), "script_commit": script_commit("trpo"),  # trpo.py's, as run.py records them
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, out)  # a half-written file is never mistaken for a finished run
    print(f"{args.env_id} seed {args.seed}: last-100 mean {record['final_return']}; written to {out}")


if __name__ == "__main__":
    main()
