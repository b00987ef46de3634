"""Summarise finished training runs from their TensorBoard event files.

    python benchmarks/summarize_runs.py runs/HalfCheetah-v4__ppo_continuous__1__* ...

For each run folder it prints the metric CleanRL publishes (the mean of the last 100 training
episodes' returns, stochastic policy), the number of environment steps, the wall time from the
first to the last logged event, and the final steps-per-second, then the mean ± std over runs.
"""

import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def summarize(run_dir: str) -> dict:
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    returns = events.Scalars("charts/episodic_return")
    sps = events.Scalars("charts/SPS")
    return {"run": run_dir, "episodes": len(returns), "last_step": returns[-1].step,
            "final_return": float(np.mean([e.value for e in returns[-100:]])),
            "wall_seconds": sps[-1].wall_time - returns[0].wall_time, "sps": sps[-1].value}


if __name__ == "__main__":
    rows = [summarize(d) for d in sys.argv[1:]]
    for r in rows:
        print(f"{r['run']}: last-100 mean {r['final_return']:.1f} over {r['episodes']} episodes, "
              f"{r['last_step']:,} steps, {r['wall_seconds']:.0f} s, {r['sps']:.0f} SPS")
    finals = [r["final_return"] for r in rows]
    print(f"mean ± std over {len(rows)} runs: {np.mean(finals):.1f} ± {np.std(finals):.1f}")
