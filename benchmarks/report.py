"""Turn finished benchmark runs into learning-curve plots, benchmarks/RESULTS.md and benchmarks/ABLATIONS.md.

    python benchmarks/report.py                       # reads benchmarks/results/, writes the plots and both pages
    python benchmarks/report.py --out /tmp/smoke --results-md /tmp/smoke/RESULTS.md

One PNG per env with every script on it: at each step x, a run's value is the mean return of its
last 20 training episodes finished by x; the line is the mean over seeds and the band a 95%
bootstrap confidence interval of that mean (seeds resampled with replacement). The table gives,
per script and env, the mean ± std over seeds of the final return (mean of the last 100 training
episodes, CleanRL's metric), beside the published figures of the reference implementations.

RESULTS.md holds the default runs only. The runs of the ablations suite (a variant: one detail
switched off) go into ABLATIONS.md, each beside the default runs of the same seeds: one plot per
env, and a table of the difference of final returns with a 95% bootstrap interval.

Each step page of docs/ shows a small figure of committed runs (STEP_FIGURES): the file before the
step against the file after it. They go to docs/figures/, with their captions in steps.json.
"""

import argparse
import itertools
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stats  # noqa: E402
from presets import (  # noqa: E402
    CLEANRL_MUJOCO2,
    CLEANRL_V4,
    FIGURE3_ENVS,
    FIVE_SEEDS,
    MINATAR,
    MINATAR_GAMES,
    MINATAR_PAPER,
    MINATAR_SOURCES,
    MINATAR_TUNE,
    PPO_PAPER_FIGURE3,
    REFERENCES,
    RL_ZOO_RECURRENT,
    SIDE_BY_SIDE_ENVS,
    SUITES,
    THREE_SEEDS,
)
from run import DEFAULT_OUT, load_results, matrix, run_id  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WINDOW = 20


def curve_on_grid(steps, returns, grid, window: int = WINDOW) -> np.ndarray:
    """Mean of the last `window` episode returns finished at or before each grid step (NaN before the first)."""
    steps, returns = np.asarray(steps), np.asarray(returns, dtype=float)
    cumsum = np.concatenate([[0.0], np.cumsum(returns)])
    ended = np.searchsorted(steps, grid, side="right")  # episodes finished by each grid step
    first = np.maximum(ended - window, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = (cumsum[ended] - cumsum[first]) / (ended - first)
    return np.where(ended > 0, values, np.nan)


def bootstrap_band(values: np.ndarray, n_boot: int = 2000, seed: int = 0, level: float = 0.95):
    """values: (seeds, points). Returns the mean over seeds and the lower and upper bounds of a
    percentile bootstrap confidence interval of that mean, each of shape (points,)."""
    rng = np.random.default_rng(seed)
    n = values.shape[0]
    resampled = values[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)  # (n_boot, points)
    tail = (1 - level) / 2 * 100
    return values.mean(axis=0), np.percentile(resampled, tail, axis=0), np.percentile(resampled, 100 - tail, axis=0)


def display(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def difference_interval(without: list[float], with_: list[float], n_boot: int = 10_000, seed: int = 0,
                        level: float = 0.95) -> tuple[float, float, float]:
    """mean(without) − mean(with), and a percentile bootstrap interval of it: the seeds of each
    group are resampled with replacement, independently (two separate samples of runs)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(without, dtype=float), np.asarray(with_, dtype=float)
    boot = (a[rng.integers(0, len(a), (n_boot, len(a)))].mean(1) - b[rng.integers(0, len(b), (n_boot, len(b)))].mean(1))
    tail = (1 - level) / 2 * 100
    return float(a.mean() - b.mean()), float(np.percentile(boot, tail)), float(np.percentile(boot, 100 - tail))


def seed_mean(runs: list[dict]):
    """The runs' smoothed curves on a common grid of 200 steps (where every run has finished an
    episode): the grid, their mean over seeds and its bootstrap band."""
    budget = max(r["total_timesteps"] for r in runs)
    grid = np.linspace(0, budget, 200)
    values = np.stack([curve_on_grid(r["curve"]["step"], r["curve"]["return"], grid) for r in runs])
    keep = ~np.isnan(values).any(axis=0)
    return (grid[keep], *bootstrap_band(values[:, keep]))


def draw(ax, label: str, runs: list[dict], **style) -> None:
    """One line on `ax`: the mean over `runs` of their smoothed curves, with its bootstrap band."""
    grid, mean, low, high = seed_mean(runs)
    (line,) = ax.plot(grid, mean, label=label, **style)
    ax.fill_between(grid, low, high, alpha=0.25, color=line.get_color())


def plot_env(env_id: str, by_algo: dict, path: Path, in_order: bool = False, small: bool = False,
             marks: dict | None = None) -> None:
    """One line per key of `by_algo` (a script, or a script's variant), with its runs' band;
    sorted by key, or in the dict's order. Small: 480 × 300 px, smaller type, steps in k and M.
    marks: {label: [(step, value), ...]}, published readings drawn as unjoined points."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    with plt.rc_context({"font.size": 8} if small else {}):
        fig, ax = plt.subplots(figsize=(4.8, 3.0) if small else (6.4, 4.0), dpi=100)
        for algo, runs in (by_algo.items() if in_order else sorted(by_algo.items())):
            draw(ax, f"{algo} ({len(runs)} seeds)", runs)
        for (label, points), marker in zip((marks or {}).items(), "x^sD", strict=False):
            ax.plot(*zip(*points, strict=True), linestyle="none", marker=marker, color="black", label=label)
        ax.set(title=env_id, xlabel="environment steps", ylabel=f"return (mean of last {WINDOW} episodes)")
        if small:
            ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}k" if x else "0")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


READING_ORDER = ["reinforce", "vpg", "trpo", "ppo_continuous"]


def mean_std(values: list[float], expected: int, missing: str = "not yet run") -> str:
    """mean ± std over seeds, and how many of the expected seeds it is made of when some are missing."""
    if not values:
        return missing
    text = f"{np.mean(values):.1f} ± {np.std(values):.1f}"
    return text if len(values) == expected else f"{text} ({len(values)} of {expected} seeds)"


def figure3(results: list[dict], out: Path, md_path: Path) -> list[str]:
    """The PPO paper's Figure 3 redrawn from the figure3 suite (figure3.png, one panel per env, one
    line per script in the reading order) and its section of RESULTS.md: the tables of final
    return and greedy evaluation, the comparison with the published figures, the commands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = {(r["algo"], r["env_id"], r["seed"]): r for r in results if r["status"] == "ok" and not r.get("variant")}
    cells = defaultdict(list)  # (script, env) -> the suite's finished runs
    for spec in matrix("figure3"):
        if (spec["algo"], spec["env_id"], spec["seed"]) in done:
            cells[spec["algo"], spec["env_id"]].append(done[spec["algo"], spec["env_id"], spec["seed"]])
    if not cells:
        return []
    seeds = {(spec["algo"], spec["env_id"]) for spec in matrix("figure3")}
    expected = len(matrix("figure3")) // len(seeds)

    fig, axes = plt.subplots(2, 4, figsize=(16, 7.5), dpi=100)
    for ax, env_id in zip(axes.flat, FIGURE3_ENVS, strict=False):  # 8 panels, 7 envs
        for color, algo in enumerate(READING_ORDER):
            if cells[algo, env_id]:
                draw(ax, algo, cells[algo, env_id], color=f"C{color}")
        ax.set_title(env_id)
        ax.set_xlim(0, 1_000_000)
        ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1e6:g}M")
        ax.grid(alpha=0.3)
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(handles, labels, loc="center", fontsize=12, title_fontsize=10,
                         title=f"return: mean of the last {WINDOW} training\nepisodes; line: mean over seeds 1-{expected},"
                               "\nband: 95% bootstrap interval")
    for ax in axes[:, 0]:
        ax.set_ylabel("return")
    fig.supxlabel("environment steps")
    fig.tight_layout()
    png = out / "figure3.png"
    fig.savefig(png)
    plt.close(fig)

    def evaluation(runs):
        return [float(np.mean(r["eval_returns"])) for r in runs if r.get("eval_returns")]

    rel = png.relative_to(md_path.parent) if png.is_relative_to(md_path.parent) else png
    lines = ["## Figure 3 of the PPO paper, from our own scripts", "",
             f"![Figure 3]({rel})", "",
             "Each script at its own defaults on the seven MuJoCo envs of the PPO paper's Figure 3 (-v4 here, -v1 "
             f"there), 1M steps, seeds 1-{expected}: the suite `figure3` of `benchmarks/presets.py`.",
             "", "Final return (mean of each run's last 100 training episodes; mean ± std over seeds), beside "
             "CleanRL's published v4 figures (the same metric):", "",
             "| env | " + " | ".join(f"`{a}`" for a in READING_ORDER) + " | CleanRL PPO (v4) |",
             "|---|" + "---|" * (len(READING_ORDER) + 1)]
    for env_id in FIGURE3_ENVS:
        ours = [mean_std([r["final_return"] for r in cells[a, env_id]], expected) for a in READING_ORDER]
        cleanrl = "{:.2f} ± {:.2f}".format(*CLEANRL_V4[env_id]) if env_id in CLEANRL_V4 else "not published"
        lines.append(f"| {env_id} | " + " | ".join(ours) + f" | {cleanrl} |")
    lines += ["", "Best of the mean curve (the plotted line: mean over seeds of the mean of the last "
              f"{WINDOW} training episodes) within 1M steps, beside the PPO paper's curves as Tianshou read them "
              "(\"~\": the best of each curve within 1M steps, read off the plot; see below):", "",
              "| env | " + " | ".join(f"`{a}`" for a in READING_ORDER)
              + " | PPO paper: PPO-clip ~ | PPO paper: TRPO ~ | PPO paper: A2C ~ |",
              "|---|" + "---|" * (len(READING_ORDER) + 3)]
    for env_id in FIGURE3_ENVS:
        best = [f"{seed_mean(cells[a, env_id])[1].max():.1f}" if len(cells[a, env_id]) == expected else "not yet run"
                for a in READING_ORDER]
        lines.append(f"| {env_id} | " + " | ".join(best) + " | " + " | ".join(PPO_PAPER_FIGURE3[env_id]) + " |")
    lines += ["", "Greedy evaluation (after training, each run plays 10 episodes with the mean action, or the most "
              "probable one; mean over seeds of each run's mean ± std over seeds):", "",
              "| env | " + " | ".join(f"`{a}`" for a in READING_ORDER) + " |", "|---|" + "---|" * len(READING_ORDER)]
    for env_id in FIGURE3_ENVS:
        lines.append(f"| {env_id} | " + " | ".join(mean_std(evaluation(cells[a, env_id]), expected, "not recorded yet")
                                                  for a in READING_ORDER) + " |")
    lines += ["", "CleanRL's v4 table completed: `ppo_continuous.py` on the six envs CleanRL publishes (1M steps, "
              f"seeds 1-{expected}, last-100 training mean):", "",
              "| env | `ppo_continuous` | per seed | greedy evaluation | CleanRL (v4) | against CleanRL |",
              "|---|---|---|---|---|---|"]
    for env_id, (mean, std) in CLEANRL_V4.items():
        runs = cells["ppo_continuous", env_id]
        finals = [r["final_return"] for r in runs]
        verdict = ("" if len(runs) < expected else "above its mean" if np.mean(finals) >= mean
                   else "within one std below" if np.mean(finals) >= mean - std else "more than one std below")
        lines.append(f"| {env_id} | {mean_std(finals, expected)} | {' / '.join(f'{f:.1f}' for f in finals)} | "
                     f"{mean_std(evaluation(runs), expected, 'not recorded yet')} | {mean:.2f} ± {std:.2f} | {verdict} |")
    lines += ladder(cells, expected)
    lines += ["", "Commands (any env and seed; `reinforce.py`, `vpg.py` and `trpo.py` default to 500k steps, so their "
              "budget is given), and the whole suite, resumable:", "", "```bash"]
    for algo in READING_ORDER:
        runs = next((cells[algo, e] for e in FIGURE3_ENVS if cells[algo, e]), None)
        if runs:
            lines.append(runs[0]["command"].replace(f"--env-id {runs[0]['env_id']}", "--env-id ENV")
                         .replace(f"--seed {runs[0]['seed']}", "--seed SEED"))
    lines += ["python benchmarks/run.py --suite figure3 --workers 2",
              "python benchmarks/run.py --suite figure3 --refresh-eval  # the greedy evaluations of older runs",
              "```", ""]
    notes = ROOT / "benchmarks" / "figure3_notes.md"  # the reading of the figure, written by hand
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    return lines


def ladder(cells: dict, expected: int) -> list[str]:
    """Where the reading order's ranking REINFORCE < VPG < TRPO < PPO holds, by the final return:
    each step of the ladder on each env, as the difference of the two scripts' seed means with a
    95% bootstrap interval ("higher" or "lower" only where the interval excludes 0)."""
    if any(len(cells[a, e]) < expected for a in READING_ORDER for e in FIGURE3_ENVS):
        return []
    steps = list(itertools.pairwise(READING_ORDER))
    lines = ["", "### Where the ranking REINFORCE < VPG < TRPO < PPO holds", "",
             "Written by `report.py` from the table above. Each step of the reading order on each env: the final "
             "return of the later script minus the earlier one's (mean over seeds), with a 95% bootstrap interval "
             f"over the {expected} seeds of each; \"higher\" or \"lower\" only where the interval excludes 0.", "",
             "| env | " + " | ".join(f"`{b}` − `{a}`" for a, b in steps) + " | ranking holds (means) |",
             "|---|" + "---|" * (len(steps) + 1)]
    holds, level, broken = [], [], defaultdict(list)  # step -> envs where the later script ends lower
    for env_id in FIGURE3_ENVS:
        finals = {a: [r["final_return"] for r in cells[a, env_id]] for a in READING_ORDER}
        signs = [np.sign(np.mean(finals[b]) - np.mean(finals[a])) for a, b in steps]
        for (a, b), sign in zip(steps, signs, strict=True):
            if sign < 0:
                broken[a, b].append(env_id)
        verdict = "yes" if min(signs) > 0 else "no" if min(signs) < 0 else "level where equal"
        (holds if verdict == "yes" else level if verdict != "no" else []).append(env_id)
        lines.append(f"| {env_id} | " + " | ".join(compare(finals[a], finals[b]).replace(" | ", ", ")
                                                  for a, b in steps) + f" | {verdict} |")
    lines += ["", f"By the means, the whole ranking holds on {len(holds)} of {len(FIGURE3_ENVS)} envs"
              + (f" ({', '.join(holds)})" if holds else "")
              + (f", and with equal means at some step on {', '.join(level)}" if level else "") + "; "
              + "; ".join(f"`{b}` ends below `{a}` on {', '.join(envs)}" for (a, b), envs in broken.items())
              + (". " if broken else "") + "With three seeds, a step that \"cannot tell apart\" is not evidence "
              "of a tie, only of too few seeds to order the two."]
    return lines


def vpg_lr_section(results: list[dict]) -> list[str]:
    """vpg.py at its policy step size (3e-3, reinforce.py's) beside vpg.py at Spinning Up's pi_lr
    3e-4 (the suite figure3-vpg-lr) and reinforce.py, on the figure3 envs."""
    cells, (_, _, flags, seeds, variant) = by_cell(results), SUITES["figure3-vpg-lr"][0]
    if not any(cells.get(("vpg", e, variant)) for e in FIGURE3_ENVS):
        return []
    lines = ["## `vpg.py`'s policy step size", "",
             f"`vpg.py` takes `reinforce.py`'s policy step size, 3e-3, so that the step size is not what tells the first "
             f"step of the reading order apart. Spinning Up's VPG uses pi_lr 3e-4; the suite `figure3-vpg-lr` "
             f"runs `vpg.py` at 3e-4 (`{' '.join(flags[2:])}`, seeds {', '.join(map(str, seeds))}), the runs made "
             "when 3e-4 was the default. Final returns, mean ± std over seeds; differences with a 95% bootstrap "
             "interval.", "",
             "| env | `reinforce` | `vpg` at 3e-4 | `vpg` at 3e-3 | 3e-3 − 3e-4 [95%] | | `vpg` at 3e-3 − `reinforce` [95%] | |",
             "|---|---|---|---|---|---|---|---|"]
    for env_id in FIGURE3_ENVS:
        finals = [[r["final_return"] for r in cells.get((a, env_id, v), {}).values()]
                  for a, v in (("reinforce", None), ("vpg", variant), ("vpg", None))]
        done = all(len(f) == len(seeds) for f in finals)
        lines.append(f"| {env_id} | " + " | ".join(mean_std(f, len(seeds)) for f in finals) + " | "
                     + (f"{compare(finals[1], finals[2])} | {compare(finals[0], finals[2])}" if done else " | | | ")
                     + " |")
    return lines + [""]


def by_cell(results: list[dict]) -> dict:
    """(algo, env_id, variant) -> {seed: run} of the finished runs."""
    cells = defaultdict(dict)
    for r in results:
        if r["status"] == "ok":
            cells[r["algo"], r["env_id"], r.get("variant")][r["seed"]] = r
    return cells


def compare(before: list[float], after: list[float]) -> str:
    """after − before with its 95% bootstrap interval, and a verdict."""
    diff, low, high = difference_interval(after, before)
    verdict = "higher" if low > 0 else "lower" if high < 0 else "cannot tell apart"
    return f"{diff:+.1f} [{low:+.1f}, {high:+.1f}] | {verdict}"


def mujoco2_section(results: list[dict]) -> list[str]:
    """ppo_continuous.py on mujoco 2.3.7 (the cleanrl-mujoco2 suite) beside its mujoco 4 runs of the
    same seeds and CleanRL's published figures, which were made on mujoco 2."""
    cells, variant = by_cell(results), SUITES["cleanrl-mujoco2"][0][4]
    if not any(cells.get(("ppo_continuous", e, variant)) for e in CLEANRL_MUJOCO2):
        return []
    seeds = SUITES["cleanrl-mujoco2"][0][3]
    lines = ["## `ppo_continuous.py` against CleanRL on CleanRL's simulator", "",
             f"CleanRL's v4 table was made on mujoco 2 (its install pins `mujoco<=2.3.3`); the figure3 runs above use "
             f"mujoco 4. The suite `cleanrl-mujoco2` runs the same commands (seeds {', '.join(map(str, seeds))}, 1M steps) "
             "on mujoco 2.3.7, in a venv of its own (the Pusher-v4 commands above), so that \"above\" or \"below\" "
             "CleanRL is measured on its simulator. Final returns, mean ± std over seeds (ddof 0); the difference is "
             "mujoco 2.3.7 − mujoco 4 with a 95% bootstrap interval of the seeds.", "",
             "| env | mujoco 4.0.0 | mujoco 2.3.7 | per seed (2.3.7) | CleanRL (v4, mujoco 2) | 2.3.7 against CleanRL "
             "| 2.3.7 − 4.0.0 [95%] | |", "|---|---|---|---|---|---|---|---|"]
    for env_id in CLEANRL_MUJOCO2:
        new = [cells["ppo_continuous", env_id, variant][s]["final_return"] for s in seeds
               if s in cells["ppo_continuous", env_id, variant]]
        old = [cells["ppo_continuous", env_id, None][s]["final_return"] for s in seeds
               if s in cells["ppo_continuous", env_id, None]]
        mean, std = CLEANRL_V4[env_id]
        verdict = ("" if len(new) < len(seeds) else "above its mean" if np.mean(new) >= mean
                   else "within one std below" if np.mean(new) >= mean - std else "more than one std below")
        done = len(new) == len(seeds) == len(old)
        lines.append(f"| {env_id} | {mean_std(old, len(seeds))} | {mean_std(new, len(seeds))} | "
                     f"{' / '.join(f'{f:.1f}' for f in new)} | {mean:.2f} ± {std:.2f} | {verdict} | "
                     + (compare(old, new) if done else " | ") + " |")
    return lines + ["", cpus("The mujoco 4 runs", [r for (a, e, v), runs in cells.items() if a == "ppo_continuous"
                                                     and e in CLEANRL_MUJOCO2 and v is None for r in runs.values()],
                             "the mujoco 2.3.7 runs", [r for (a, e, v), runs in cells.items() if v == variant
                                                      for r in runs.values()]), ""]


def cpus(name_a: str, runs_a: list[dict], name_b: str, runs_b: list[dict]) -> str:
    """Which CPUs two groups of runs were made on: a run repeats bit for bit only on the same kind of
    CPU (its kernels round differently), so across kinds two runs of one seed are two samples."""
    def on(runs):  # "AMD EPYC", or "AMD EPYC (4 runs) and Intel(R) Xeon(R) Processor (7 runs)"
        counts = {cpu: sum(r["machine"]["cpu"] == cpu for r in runs) for cpu in sorted({r["machine"]["cpu"] for r in runs})}
        return " and ".join(f"{cpu} ({n} runs)" if len(counts) > 1 else cpu for cpu, n in counts.items())

    a, b = on(runs_a), on(runs_b)
    same = ("the same CPU" if a == b and " and " not in a else
            "CPUs whose round-off differs, so a seed repeats bit for bit only on the same kind")
    return f"{name_a} ran on {a}, {name_b} on {b}: {same}."


def before_after(results: list[dict], suite: str, heading: str, intro: str, note: str) -> list[str]:
    """A suite that reran cells after a change to a script (its variant names the change) beside
    the runs of the same cells and seeds made before it: final returns, identical curves, and the
    difference with its bootstrap interval."""
    cells, rows = by_cell(results), []
    for script, env_id, _, seeds, variant in SUITES[suite]:
        after, before = cells.get((script, env_id, variant), {}), cells.get((script, env_id, None), {})
        if not after:
            continue
        both = [s for s in seeds if s in after and s in before]
        same = sum(after[s]["curve"]["return"] == before[s]["curve"]["return"] for s in both)
        a, b = [after[s]["final_return"] for s in both], [before[s]["final_return"] for s in both]
        rows.append(f"| {env_id} | {len(both)} of {len(seeds)} | {mean_std(b, len(both))} | {mean_std(a, len(both))} | "
                    f"{same} | " + (compare(b, a) if len(both) > 1 else " | ") + " |")
    if not rows:
        return []
    variants, envs = {c[4] for c in SUITES[suite]}, {(c[0], c[1]) for c in SUITES[suite]}
    return [f"## {heading}", "", intro + " (final returns, mean ± std over seeds, ddof 0; the difference is after − "
            "before with a 95% bootstrap interval):", "",
            "| env | seeds | before | after | runs with the identical curve | after − before [95%] | |",
            "|---|---|---|---|---|---|---|", *rows, "",
            cpus("The runs before", [r for (a, e, v), runs in cells.items() if (a, e) in envs and v is None
                                     for r in runs.values()],
                 "the runs after", [r for (a, e, v), runs in cells.items() if v in variants for r in runs.values()])
            + " " + note, ""]


def cg_stop_section(results: list[dict]) -> list[str]:
    return before_after(
        results, "trpo-cg-stop", "`trpo.py`'s conjugate-gradient stop",
        "Conjugate gradient now stops once rᵀr < 1e-10, as OpenAI Baselines' and SB3-contrib's TRPO do (before, it "
        "always ran 10 iterations; past convergence those divide round-off by round-off, and on a residual of exactly "
        "0 they gave a NaN step). On CartPole its residual falls below 1e-10 after 5 or 6 iterations in the first "
        "updates of a run (seed 1), so the new stop changes the runs' later bits. The classic cells rerun "
        "with it (suite `trpo-cg-stop`), against the runs made before it",
        "The change itself was seen on one machine: the same seed and flags give other weights after it "
        "(`tests/fingerprint.py`, trpo on CartPole-v1).")


def reinforce_rollout_section(results: list[dict]) -> list[str]:
    return before_after(
        results, "reinforce-rollout", "`reinforce.py`'s time-major rollout",
        "`reinforce.py` now stores every step of its N envs time-major, as `vpg.py` does, with a mask of the steps "
        "that enter the batch, where it kept a list of steps per env and episode. Its batches hold the same kind "
        "of data (whole episodes, every one begun played to its end) in another order, and the rule that stops "
        "new episodes once the batch is full now counts the steps of unfinished episodes too. A run's first "
        "rollout steps the same envs with the same actions, but which of its episodes enter the batch, and when "
        "the rollout ends, may differ; everything after differs in its bits. The classic cells rerun with it (suite "
        "`reinforce-rollout`), against the runs made before it",
        "The `reinforce.py` runs of the other suites (mujoco, figure3) were made before the change and were not "
        "rerun.")


def recurrent_section(results: list[dict], out: Path, md_path: Path) -> list[str]:
    """ppo_recurrent.py on the NoVel envs (the recurrent suite), beside the feed-forward
    ppo_discrete.py on the same env and budget and RL Zoo's RecurrentPPO; and each env's learning
    curves, both programs in one plot (recurrent-<env>.png in `out`)."""
    runs = [r for r in results if r["suite"] == "recurrent" and r["status"] == "ok"]
    if not runs:
        return []
    lines = ["## Memory: `ppo_recurrent.py` on partially observed envs", "",
             "The NoVel envs are Gymnasium's with the velocities in the observation set to 0 (`ppo_recurrent.py` "
             "registers them). On CartPoleNoVel-v1, `ppo_recurrent.py` runs at its defaults, RL Zoo's settings, and "
             "the feed-forward `ppo_discrete.py` at its own, on the same budget. On the other envs, both programs "
             "take the flags listed below the table: RL Zoo's settings for the env, translated as "
             "benchmarks/presets.py explains (LunarLanderNoVel-v3, with no RL Zoo figure, takes our feed-forward "
             "LunarLander settings). The feed-forward program is `ppo_continuous.py` for Box actions. Final return as above "
             "(last 100 training episodes, mean ± std over seeds); greedy evaluation: the mean over seeds of each "
             "run's mean over 10 greedy episodes. RL Zoo (rl-baselines3-zoo `benchmark.md`): one trained "
             "RecurrentPPO agent, deterministic evaluation episodes.", "",
             "| env | script | seeds | steps | final return | greedy evaluation | RL Zoo RecurrentPPO |",
             "|---|---|---|---|---|---|---|"]
    cells = defaultdict(list)
    for r in runs:
        cells[(r["env_id"].rpartition(":")[2], r["algo"])].append(r)
    for (env_id, algo), cell in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1] != "ppo_recurrent")):
        finals = [r["final_return"] for r in cell]
        evals = [np.mean(r["eval_returns"]) for r in cell if r.get("eval_returns")]
        seeds = ", ".join(str(r["seed"]) for r in sorted(cell, key=lambda r: r["seed"]))
        greedy = f"{np.mean(evals):.1f} ± {np.std(evals):.1f}" if evals else "not recorded"
        zoo = RL_ZOO_RECURRENT.get(env_id, "") if algo == "ppo_recurrent" else ""
        lines.append(f"| {env_id} | `{algo}` | {seeds} | {cell[0]['total_timesteps']:,} | {np.mean(finals):.1f} ± "
                     f"{np.std(finals):.1f} | {greedy} | {zoo} |")
    lines += ["", "Per seed, final return / greedy evaluation:", ""]
    for (env_id, algo), cell in sorted(cells.items()):
        per_seed = ", ".join(f"{r['final_return']:.1f} / {np.mean(r['eval_returns']):.1f}"
                             for r in sorted(cell, key=lambda r: r["seed"]))
        lines.append(f"- {env_id}, `{algo}`: {per_seed}")
    lines += ["", "Flags of each cell (beside `--env-id` and `--seed`):", ""]
    for (env_id, algo), cell in sorted(cells.items()):
        flags = cell[0]["command"].split(f"--seed {cell[0]['seed']}", 1)[1].strip()  # after env and seed
        lines.append(f"- {env_id}, `{algo}`: " + (f"`{flags}`" if flags else "its defaults"))
    lines += ["", "Learning curves: the mean over seeds of each run's mean return over its last "
              f"{WINDOW} episodes, with a 95% bootstrap band.", ""]
    for env_id in sorted({env_id for env_id, _ in cells}):
        png = out / f"recurrent-{env_id}.png"
        plot_env(env_id, {algo: cell for (env, algo), cell in cells.items() if env == env_id}, png)
        rel = png.relative_to(md_path.parent) if png.is_relative_to(md_path.parent) else png
        lines += [f"![{env_id}: ppo_recurrent and the feed-forward script]({rel})", ""]
    lines += ["```bash", "python benchmarks/run.py --suite recurrent --workers 1", "```", ""]
    return lines


def minatar_section(results: list[dict], out: Path, md_path: Path) -> list[str]:
    """ppo_atari.py on MinAtar's five games (the minatar suite), beside ppo_discrete.py on the same
    frames flattened into vectors, with the same batches, epochs, clip and loss weights; and each
    game's curves, both scripts in one plot (minatar-<game>.png in `out`)."""
    runs = [r for r in results if r["suite"] == "minatar" and r["status"] == "ok"]
    if not runs:
        return []
    expected = {(algo, env_id): len(seeds) for algo, env_id, _, seeds, *_ in SUITES["minatar"]}
    lines = ["## Pixels: `ppo_atari.py` on MinAtar", "",
             "MinAtar's five games (Young and Tian 2019): 10×10 frames, one channel per kind of object, "
             "sticky actions 0.1. `ppo_atari.py` runs at its defaults (the PPO paper's Atari settings) with "
             "MinAtar's network (one 3×3 convolution of 16 filters, 128 units). `ppo_discrete.py` takes the "
             "same frames flattened into a vector (`benchmarks/flat_minatar.py`), the same batches of 8 × 128 "
             "steps, 3 epochs, ε 0.1 and c₁ 1, and two tanh layers of 128 units. It keeps ε constant, and "
             "`ppo_atari.py` decays it. Final return and greedy evaluation as above. The difference is "
             "`ppo_atari.py` − `ppo_discrete.py` in final return, with its 95% bootstrap interval over seeds. "
             "The last column sets the MinAtar paper's figures beside ours: its DQN and AC(λ = 0.8) curves "
             "read at 2M frames (our budget; a MinAtar step is one frame) and at its 5M. The paper publishes "
             "curves only, so these are readings (\"~\"; benchmarks/presets.py says how). Its metric is ours, "
             "the mean of the last 100 training episodes. Its protocol differs: the mean of 30 runs, the v0 "
             "games with all 6 actions against v1's minimal sets, and MinAtar 1.0.10 or earlier for Seaquest, "
             "whose oxygen-bar bug (the bar flashed full one step before the oxygen ran out) was fixed in "
             "1.0.11. Its algorithms differ too, so the column places our "
             "runs on its scale and ranks nothing.", "",
             "| game | script | seeds | steps | final return | greedy evaluation | difference "
             "| MinAtar paper at 2M (5M) frames |",
             "|---|---|---|---|---|---|---|---|"]
    cells = defaultdict(list)
    for r in runs:
        game = r["env_id"].rpartition("/")[2]
        cells[(game, r["algo"])].append(r)
    for game in sorted({game for game, _ in cells}):
        flat, pixels = cells.get((game, "ppo_discrete"), []), cells.get((game, "ppo_atari"), [])
        for algo, cell in (("ppo_atari", pixels), ("ppo_discrete", flat)):
            if not cell:
                continue
            finals = [r["final_return"] for r in cell]
            evals = [np.mean(r["eval_returns"]) for r in cell if r.get("eval_returns")]
            count = next(n for (a, env_id), n in expected.items() if a == algo and env_id.endswith(game))
            seeds = ", ".join(str(r["seed"]) for r in sorted(cell, key=lambda r: r["seed"]))
            greedy = f"{np.mean(evals):.1f} ± {np.std(evals):.1f}" if evals else "not recorded"
            diff = (compare([r["final_return"] for r in flat], finals).replace(" | ", ", ")
                    if algo == "ppo_atari" and flat else "")
            paper = ", ".join(f"{curve} {at2} ({at5})" for curve, (at2, at5) in MINATAR_PAPER[game].items())
            lines.append(f"| {game} | `{algo}` | {seeds} | {cell[0]['total_timesteps']:,} | "
                         f"{mean_std(finals, count)} | {greedy} | {diff} | {paper if algo == 'ppo_atari' else ''} |")
    places = defaultdict(list)  # where ppo_atari.py's mean final return falls among the paper's readings at 2M
    for (game, algo), cell in sorted(cells.items()):
        if algo == "ppo_atari":
            mean = np.mean([r["final_return"] for r in cell])
            readings = [float(at2.lstrip("~")) for at2, _ in MINATAR_PAPER[game].values()]
            place = "below both" if mean < min(readings) else "above both" if mean > max(readings) else "between them"
            places[place].append(game)
    lines += ["", "At 2M frames, `ppo_atari.py`'s mean final return is " + "; ".join(
        f"{place} on {', '.join(games)}" for place, games in places.items()) + " (the readings of DQN and AC(0.8))."]
    lines += ["", "Flags of each cell (beside `--env-id` and `--seed`), and the commit of each script:", ""]
    for (game, algo), cell in sorted(cells.items()):
        flags = cell[0]["command"].split(f"--seed {cell[0]['seed']}", 1)[1].strip()
        lines.append(f"- {game}, `{algo}`: `{flags}` ({made_at(cell)})")
    lines += ["", "Learning curves: the mean over seeds of each run's mean return over its last "
              f"{WINDOW} episodes, with a 95% bootstrap band.", ""]
    for game in sorted({game for game, _ in cells}):
        png = out / f"minatar-{game}.png"
        plot_env(f"MinAtar {game}", {algo: cell for (g, algo), cell in cells.items() if g == game}, png)
        rel = png.relative_to(md_path.parent) if png.is_relative_to(md_path.parent) else png
        lines += [f"![MinAtar {game}: ppo_atari.py and ppo_discrete.py on flattened frames]({rel})", ""]
    lines += ["```bash", "python benchmarks/run.py --suite minatar --workers 1", "```", ""]
    return lines


def one_sample_interval(x: list[float], statistic, reps: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of statistic(x) over resamples of the seeds."""
    rng, x = np.random.default_rng(seed), np.asarray(x, dtype=float)
    low, high = stats.percentile_interval([statistic(stats.redraw(rng, x)) for _ in range(reps)], 0.95)
    return float(low), float(high)


def with_interval(x: list[float], statistic) -> str:
    low, high = one_sample_interval(x, statistic)
    return f"{statistic(x):.1f} [{low:.1f}, {high:.1f}]"


def minatar_5m_section(results: list[dict], out: Path, md_path: Path) -> list[str]:
    """ppo_atari.py at MINATAR's settings on MinAtar's five games, 10 seeds of 5M steps (the
    minatar-5m suite): per game, the mean and the IQM of the final return with 95% bootstrap
    intervals, the greedy and the sampled evaluation, beside the MinAtar paper's readings at 5M;
    the goal (at or above the better reading on at least 4 games) met or its shortfall; curves."""
    runs = [r for r in results if r["suite"] == "minatar-5m" and r["status"] == "ok"]
    if not runs:
        return []
    (_, _, flags, _, *_), *_ = SUITES["minatar-5m"]
    seeds = sorted({seed for _, _, _, cell_seeds, *_ in SUITES["minatar-5m"] for seed in cell_seeds})
    shown_flags = " ".join(flags[flags.index("--total-timesteps") + 2:]) if "--total-timesteps" in flags else " ".join(flags)
    lines = ["## Pixels: `ppo_atari.py` on MinAtar at 5M steps, 10 seeds", "",
             "MinAtar's five games (`MinAtar/<Game>-v1`: the minimal action sets, sticky actions 0.1, as the "
             "MinAtar paper played), 5M steps a run (the MinAtar paper's horizon; a step is one frame), seeds "
             f"{seeds[0]}-{seeds[-1]}. `ppo_atari.py` with MinAtar's network and the settings of "
             "`benchmarks/presets.py`'s `MINATAR`, chosen from published PPO work on MinAtar "
             "(`benchmarks/minatar_sources.md`) by the minatar-tune sweep below: "
             f"`{shown_flags}`. Final return: each run's mean over its last 100 training episodes (sampled "
             "actions; the MinAtar paper's metric). The mean and the interquartile mean (IQM) over seeds, each "
             "with its 95% bootstrap interval over seeds. Evaluation: after training, 10 episodes with the most "
             "probable action (greedy) and 10 on the same seeds with sampled actions, each episode to its end "
             "(or 108,000 steps); the mean over seeds of each run's mean. The MinAtar paper's readings are "
             "those of `benchmarks/presets.py` at 5M frames (its curves, 30 runs, the v0 games).", "",
             "| game | seeds | final return: mean [95%] | IQM [95%] | greedy evaluation | sampled evaluation "
             "| MinAtar paper at 5M: DQN, AC(0.8) | against the better reading |",
             "|---|---|---|---|---|---|---|---|"]
    met, short = [], []
    cells = {game: sorted([r for r in runs if r["env_id"] == f"MinAtar/{game}-v1"], key=lambda r: r["seed"])
             for game in MINATAR_GAMES}
    for game, cell in cells.items():
        readings = {curve: float(at5.lstrip("~")) for curve, (_, at5) in MINATAR_PAPER[f"{game}-v1"].items()}
        paper = ", ".join(f"{curve} {at5}" for curve, (_, at5) in MINATAR_PAPER[f"{game}-v1"].items())
        if not cell:
            lines.append(f"| {game}-v1 | 0 of {len(seeds)} | not yet run | | | | {paper} | |")
            continue
        finals = [r["final_return"] for r in cell]
        greedy = [np.mean(r["eval_returns"]) for r in cell if r.get("eval_returns")]
        sampled = [np.mean(r["eval_sampled_returns"]) for r in cell if r.get("eval_sampled_returns")]
        best = max(readings.values())
        mean = float(np.mean(finals))
        if mean >= best:
            verdict = f"at or above ({mean:.1f} ≥ {best:g})"
            met.append(game)
        else:
            verdict = f"short by {best - mean:.1f} ({(best - mean) / best:.0%} of {best:g})"
            short.append(game)
        lines.append(f"| {game}-v1 | {len(cell)} of {len(seeds)} | {with_interval(finals, np.mean)} | "
                     f"{with_interval(finals, stats.iqm) if len(finals) >= 4 else 'needs 4 seeds'} | "
                     f"{np.mean(greedy):.1f} | {np.mean(sampled):.1f} | {paper} | {verdict} |"
                     if greedy and sampled else
                     f"| {game}-v1 | {len(cell)} of {len(seeds)} | {with_interval(finals, np.mean)} | | | | {paper} | "
                     f"{verdict} |")
    done = all(len(cell) == len(seeds) for cell in cells.values())
    lines += ["", ("The suite is complete. " if done else f"The suite is not complete: {len(runs)} of "
                   f"{len(seeds) * len(cells)} runs so far, so each figure may still move. ")
              + f"The goal is the better of the paper's two readings on at least 4 of the 5 games. Reached on "
              f"{len(met)} ({', '.join(met) or 'none'}); short on {', '.join(short) or 'none'}. The paper's "
              "readings come from curves of other algorithms on the v0 games, so they place these runs on its "
              "scale and rank nothing.", "",
              "The published PPO sources cannot be read at 5M steps: " + MINATAR_SOURCES, "",
              "Flags of every run (beside `--env-id` and `--seed`): `" + " ".join(flags) + "` ("
              + made_at(runs) + ").", "",
              f"Learning curves: the mean over seeds of each run's mean return over its last {WINDOW} episodes, "
              "with a 95% bootstrap band. The black marks are the MinAtar paper's DQN (×) and AC(0.8) (▲) "
              "curves read at 2M and 5M frames (the mean of its last 100 episodes over 30 runs).", ""]
    for game, cell in cells.items():
        if cell:
            png = out / f"minatar-5m-{game}-v1.png"
            marks = {f"MinAtar paper's {curve}, read at 2M and 5M": [(2e6, float(at2.lstrip("~"))),
                                                                      (5e6, float(at5.lstrip("~")))]
                     for curve, (at2, at5) in MINATAR_PAPER[f"{game}-v1"].items()}
            plot_env(f"MinAtar/{game}-v1: ppo_atari.py, 5M steps", {"ppo_atari": cell}, png, marks=marks)
            rel = png.relative_to(md_path.parent) if png.is_relative_to(md_path.parent) else png
            lines += [f"![MinAtar/{game}-v1 at 5M steps]({rel})", ""]
    lines += ["```bash", "python benchmarks/run.py --suite minatar-5m --workers 2", "```", ""]
    return lines


def minatar_tune_section(results: list[dict]) -> list[str]:
    """The sweep that chose MINATAR: each setting's final return per seed, on its two games."""
    runs = [r for r in results if r["suite"] == "minatar-tune" and r["status"] == "ok"]
    if not runs:
        return []
    lines = ["## Pixels: the sweep that chose `ppo_atari.py`'s MinAtar settings", "",
             "Three settings from published PPO work on MinAtar, scaled to 64 envs (`benchmarks/presets.py`, "
             "`MINATAR_TUNE`), on Breakout and SpaceInvaders, seeds 1 and 2, 2M steps each. Beside them, "
             "`ppo_atari.py`'s defaults (the PPO paper's Atari settings, 8 envs) from the minatar suite above, "
             "seeds 1-3. Final return per seed.", "",
             "| setting | Breakout-v1 | SpaceInvaders-v1 |", "|---|---|---|"]
    defaults = [r for r in results if r["suite"] == "minatar" and r["algo"] == "ppo_atari" and r["status"] == "ok"]
    for name, group in [("defaults (PPO paper, Atari)", defaults)] + [
            (variant, [r for r in runs if r["variant"] == variant]) for variant in dict.fromkeys(r["variant"] for r in runs)]:
        per_game = [", ".join(f"{r['final_return']:.1f}" for r in sorted(group, key=lambda r: r["seed"])
                              if r["env_id"] == f"MinAtar/{game}-v1") or "not run" for game in ("Breakout", "SpaceInvaders")]
        lines.append(f"| {name} | {per_game[0]} | {per_game[1]} |")
    chosen = next(name for name, flags in MINATAR_TUNE.items() if flags == MINATAR)
    return lines + ["", f"`MINATAR`, the settings of the 5M suite, is `{chosen}`.", "",
                    "```bash", "python benchmarks/run.py --suite minatar-tune --workers 2", "```", ""]


def atari_section(results: list[dict], out: Path, md_path: Path) -> list[str]:
    """ppo_atari.py beside CleanRL's ppo_atari.py on ALE Breakout and Pong (the atari suite), at
    CleanRL's settings and the same budget on this machine: per seed, the two means, and each game's
    curves (atari-<game>.png in `out`). Two seeds a program: no interval and no verdict."""
    runs = [r for r in results if r["suite"] == "atari" and r["status"] == "ok"]
    if not runs:
        return []
    expected = {(algo, env_id): seeds for algo, env_id, _, seeds, *_ in SUITES["atari"]}
    lines = ["## Pixels: `ppo_atari.py` beside CleanRL's on Atari", "",
             "ALE Breakout and Pong, 499,712 steps a run (488 batches of 1,024 steps, about 2M frames), on this "
             "machine. `ppo_atari.py` plays `ALE/<Game>-v5` made with frame skip 1 and no sticky actions, on "
             "Gymnasium 1.4 and ale-py 0.12. CleanRL's `ppo_atari.py` (its pinned commit with "
             "`reference_runs/cleanrl_ppo_atari.patch`) plays `<Game>NoFrameskip-v4` on Gymnasium 0.29 and "
             "ale-py 0.9, in its own virtual environment. The emulator settings are the same: one frame a step, "
             "no sticky actions, the minimal action set, a game cut at 108,000 frames. So are the preprocessing "
             "steps: 1 to 30 random no-ops at a game's start, skip 4 with a max over the last two frames, 84×84 "
             "gray, 4 frames stacked, a life loss ends a training episode, FIRE at the start of each life, "
             "rewards clipped to their sign. They differ in small ways. CleanRL also plays RIGHT after each FIRE. "
             "It turns frames gray after the max and the resize, so a few pixels differ by rounding. Both use the "
             "Nature CNN. `ppo_atari.py` runs at CleanRL's settings (`--update-epochs 4 --vf-coef 0.5 "
             "--no-anneal-clip`). Everything else is at both programs' defaults, which agree: 8 envs × 128 steps, "
             "4 minibatches, learning rate 2.5e-4 annealed linearly, clip 0.1, γ 0.99, λ 0.95, entropy 0.01, "
             "gradient norm 0.5, Adam ε 1e-5. One default differs: `ppo_atari.py` bootstraps a game cut at "
             "108,000 frames with its value, and CleanRL counts the cut as the game's end. No game is expected "
             "to reach the cut at this budget. One torch thread each (`ppo_atari.py`'s default `--num-threads "
             "1`, and `OMP_NUM_THREADS=1` for CleanRL's). "
             "Final return: the mean of each run's last 100 training games, the real score over all lives. "
             "Greedy evaluation: `ppo_atari.py`'s 10 games after training, each action the most probable one, on "
             "seeds training never used, each game cut at 10,000 steps (about 40,000 frames), the evaluation's cap when "
             "these runs were made (it now plays a game to ALE's own limit of 108,000 frames). CleanRL's file has "
             "no evaluation. Two "
             "seeds a program are too few for an interval, so no verdict is drawn: the columns are as measured. "
             "CleanRL publishes 414.66 ± 28.09 on Breakout and 20.36 ± 0.20 on Pong (3 seeds) after 10M steps "
             "(40M frames), 20 times this budget.", "",
             "| game | program | seeds | steps | final return: mean (per seed) | greedy evaluation: mean (per seed) |",
             "|---|---|---|---|---|---|"]
    cells = defaultdict(list)
    for r in runs:
        game = r["env_id"].removeprefix("ALE/").removesuffix("-v5").removesuffix("NoFrameskip-v4")
        cells[(game, r["algo"])].append(r)
    games = sorted({env_id.removeprefix("ALE/").removesuffix("-v5") for _, env_id in expected if env_id.startswith("ALE/")})
    for game in games:
        for algo, name in (("ppo_atari", "`ppo_atari.py`"), ("cleanrl_ppo_atari", "CleanRL's `ppo_atari.py`")):
            cell = sorted(cells.get((game, algo), []), key=lambda r: r["seed"])
            wanted = next(seeds for (a, env_id), seeds in expected.items() if a == algo and game in env_id)
            if not cell:
                lines.append(f"| {game} | {name} | {', '.join(map(str, wanted))} | | not yet run | |")
                continue
            finals = [r["final_return"] for r in cell]
            evals = [np.mean(r["eval_returns"]) for r in cell if r.get("eval_returns")]
            per_seed = ", ".join(f"{f:.1f}" for f in finals)
            seeds = ", ".join(str(r["seed"]) for r in cell) + ("" if len(cell) == len(wanted) else f" (of {len(wanted)})")
            greedy = f"{np.mean(evals):.1f} ({', '.join(f'{e:.1f}' for e in evals)})" if evals else "none"
            lines.append(f"| {game} | {name} | {seeds} | {cell[0]['total_timesteps']:,} | {np.mean(finals):.1f} "
                         f"({per_seed}) | {greedy} |")
    for game in games:  # where the seeds of the two programs fall, one against the other
        a, b = ([r["final_return"] for r in cells.get((game, algo), [])] for algo in ("ppo_atari", "cleanrl_ppo_atari"))
        if a and b:
            where = ("below CleanRL's on every seed" if max(a) < min(b) else
                     "above CleanRL's on every seed" if min(a) > max(b) else "on neither side of CleanRL's: the seeds overlap")
            lines += ["", f"On {game}, `ppo_atari.py`'s final return is {where}. With {len(a)} and {len(b)} seeds, "
                      "this cannot tell the programs apart from the luck of the seeds."]
    ours, theirs = ([r for r in runs if r["algo"] == algo] for algo in ("ppo_atari", "cleanrl_ppo_atari"))
    lines += ["", (cpus("`ppo_atari.py`'s runs", ours, "CleanRL's", theirs) + " " if ours and theirs else "")
              + "The runs shared the machine with other work, so their speed is not reported here: "
              "`benchmarks/SPEED.md` times the two programs alone.", "",
              "Flags of each cell (beside `--env-id` and `--seed`), and the commit of each program:", ""]
    for (game, algo), cell in sorted(cells.items()):
        flags = cell[0]["command"].split(f"--seed {cell[0]['seed']}", 1)[1].strip()
        made = made_at(cell) if algo == "ppo_atari" else cell[0]["script_commit"]
        lines.append(f"- {game}, `{algo}`: `{flags}` ({made})")
    lines += ["", "Learning curves: the mean over seeds of each run's mean score over its last "
              f"{WINDOW} games, with a 95% bootstrap band.", ""]
    for game in sorted({game for game, _ in cells}):
        png = out / f"atari-{game}.png"
        plot_env(f"{game}: 500k steps (2M frames)", {algo: cell for (g, algo), cell in cells.items() if g == game}, png)
        rel = png.relative_to(md_path.parent) if png.is_relative_to(md_path.parent) else png
        lines += [f"![{game}: ppo_atari.py and CleanRL's ppo_atari.py]({rel})", ""]
    lines += ["```bash", "python benchmarks/speed.py --atari   # once: CleanRL's environment and patched copy",
              "python benchmarks/run.py --suite atari --workers 2", "```", ""]
    return lines + atari_at_10m()


def atari_at_10m(speed_json: Path = ROOT / "benchmarks" / "SPEED.json") -> list[str]:
    """What a citable Atari suite takes (from SPEED.json's Breakout speeds at one thread and its
    profile), and the commands that would run it on both sides."""
    atari = json.loads(speed_json.read_text())["atari"]
    ours, theirs = (float(np.median([run["sps"] for run in atari["sides"][f"{side} 1"]])) for side in ("ours", "cleanrl"))
    hours = [10_000_000 / sps / 3600 for sps in (ours, theirs)]
    profile = atari["profile"]
    network = sum(ms for part, ms in profile.items() if part.startswith(("act", "update: forward", "update: backward")))
    share = network / sum(profile.values())
    return ["### Atari at the standard 10M steps: not run here", "",
            "The figures that Atari papers cite are at 10M steps (40M frames), the budget of the PPO paper's "
            "Table 5 and of CleanRL's published runs. On this machine one such run takes "
            f"{min(hours):.0f} to {max(hours):.0f} hours: `benchmarks/SPEED.md` measures {ours:.0f} steps a second "
            f"for ours and {theirs:.0f} for CleanRL's at one thread on Breakout. Three games, three seeds and two "
            f"programs would take some {3 * 3 * sum(hours):.0f} CPU-hours. The network's forward and backward "
            f"passes, {share:.0%} of the time of the parts that its profile times, are what a GPU speeds up. "
            "This suite needs a GPU machine, which this project does not have, so it is not run. The commands "
            "below would run it at one protocol on both sides: CleanRL's settings, no sticky actions, the minimal action set, 30 "
            "no-ops at most, a game cut at 108,000 frames. `ppo_atari.py` adds a greedy and a sampled "
            "evaluation of 10 games after training. For Machado et al.'s sticky actions, add "
            "`--sticky-actions 0.25` to ours. CleanRL's file has no such flag: its `make_env` would pass "
            "`repeat_action_probability=0.25` to `gym.make`.", "",
            "```bash",
            "for game in Breakout Pong BeamRider; do for seed in 1 2 3; do",
            "  python ppo_atari.py --env-id ALE/$game-v5 --seed $seed --total-timesteps 10000000 --cuda \\",
            "      --update-epochs 4 --vf-coef 0.5 --no-anneal-clip --eval-sampled",
            "  python cleanrl/ppo_atari.py --env-id ${game}NoFrameskip-v4 --seed $seed --total-timesteps 10000000",
            "done; done",
            "```", ""]


def side_by_side_runs(results: list[dict]) -> tuple[dict, dict, list[dict]]:
    """The side-by-side suite's finished runs: ours and CleanRL's by env, and ours on HalfCheetah-v4
    without the truncation bootstrap."""
    ok = [r for r in results if r["status"] == "ok"]
    ours = {e: [r for r in ok if r["algo"] == "ppo_continuous" and not r.get("variant") and r["env_id"] == e
                and r["total_timesteps"] >= 999_000] for e in SIDE_BY_SIDE_ENVS}
    peer = {e: [r for r in ok if r["algo"].startswith("cleanrl") and r["env_id"] == e] for e in SIDE_BY_SIDE_ENVS}
    no_bootstrap = [r for r in ok if r["algo"] == "ppo_continuous" and r["env_id"] == "HalfCheetah-v4"
                    and r.get("variant") == "no-bootstrap-truncation"]
    return ours, peer, no_bootstrap


def versus(a_runs: list[dict], b_runs: list[dict]) -> dict:
    """Program A's final returns against B's: the difference of the means and the probability of
    improvement, each with its 95% stratified bootstrap interval, and the verdict."""
    import stats

    a, b = [r["final_return"] for r in a_runs], [r["final_return"] for r in b_runs]
    low, high = stats.bootstrap_interval(a, b, stats.difference_of_means)
    p_low, p_high = stats.bootstrap_interval(a, b, stats.probability_of_improvement)
    return {"a": a, "b": b, "difference": stats.difference_of_means(a, b), "low": low, "high": high,
            "p": stats.probability_of_improvement(a, b), "p_low": p_low, "p_high": p_high,
            "verdict": stats.verdict(low, high)}


def side_by_side_claims(results: list[dict]) -> str:
    """README's sentences on CleanRL, written from the side-by-side runs: the verdict on each env,
    with the difference, its interval and the seeds. tests/test_figures.py checks that README.md
    holds them word for word, so README changes when the runs do."""
    ours, peer, no_bootstrap = side_by_side_runs(results)
    cells = {e: versus(ours[e], peer[e]) for e in SIDE_BY_SIDE_ENVS if ours[e] and peer[e]}

    def figures(v):
        return (f"{v['difference']:+,.0f}, 95% interval [{v['low']:+,.0f}, {v['high']:+,.0f}], "
                f"{len(v['a'])} / {len(v['b'])} seeds").replace("-", "−")

    def envs(verdict):
        return [f"{e} ({figures(v)})" for e, v in cells.items() if v["verdict"] == verdict]

    sentences = ["CleanRL's own `ppo_continuous_action.py` ran here beside `ppo_continuous.py`, on the same "
                 "machine and simulator, 1M steps each (RESULTS.md, \"Side by side with CleanRL\")."]
    for verdict, words in (("higher", "ends higher"), ("lower", "ends lower")):
        if envs(verdict):
            sentences.append(f"By final return, ours {words} on {' and '.join(envs(verdict))}.")
    if envs("cannot tell apart"):
        sentences.append(f"On {' and '.join(envs('cannot tell apart'))}, the two cannot be told apart.")
    if no_bootstrap and ours["HalfCheetah-v4"]:
        v = versus(ours["HalfCheetah-v4"], no_bootstrap)
        effect = {"higher": "raises", "lower": "lowers"}.get(v["verdict"])
        sentences.append("On HalfCheetah-v4, the truncation bootstrap (which CleanRL's script lacks) "
                         + (f"{effect} our final return by {figures(v)}." if effect else
                            f"changes our final return by no amount we can tell ({figures(v)})."))
    return " ".join(sentences)


def rewrite_readme(results: list[dict], readme: Path = ROOT / "README.md") -> None:
    """Put side_by_side_claims, wrapped at 100 columns, between README's side-by-side markers."""
    import textwrap

    begin, end = "<!-- side-by-side: written by benchmarks/report.py -->\n", "\n<!-- /side-by-side -->"
    text = readme.read_text()
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    if rest and tail:
        claims = textwrap.fill(side_by_side_claims(results), 100, break_on_hyphens=False)
        readme.write_text(head + begin + claims + end + tail)


def side_by_side_section(results: list[dict], out: Path, md_path: Path) -> list[str]:
    """CleanRL's ppo_continuous_action.py and ppo_continuous.py on the same machine and simulator
    (the side-by-side suite), with the statistics of benchmarks/stats.py; and the truncation
    bootstrap's effect on HalfCheetah-v4, measured the same way."""
    import stats

    ours, peer, no_bootstrap = side_by_side_runs(results)
    if not any(peer.values()):
        return []
    lines = ["## Side by side with CleanRL", "",
             "CleanRL's `ppo_continuous_action.py` (its pinned commit with `reference_runs/`'s patch, its defaults) and "
             "`ppo_continuous.py` (its defaults), each 1M steps, on this machine and simulator (the side-by-side suite). "
             "Final return: each run's mean over its last 100 training episodes. IQM: the interquartile mean over seeds. "
             "Difference: ours − CleanRL of the means, with a 95% stratified bootstrap interval (10,000 samples). "
             "P(ours > CleanRL): the probability that a run of ours ends above a run of CleanRL's, with its interval. "
             "The verdict reads the difference's interval: \"higher\" or \"lower\" where it excludes 0, else "
             "\"cannot tell apart\". Steps to CleanRL's median, the time to a result: for each program, the median over "
             "its runs of the first step where the mean of the last 20 episodes reaches the median final return of "
             "CleanRL's runs (∞ where a run never does), with a 95% bootstrap interval of that median.", "",
             "| env | seeds (ours / CleanRL) | ours: mean ± std, IQM | CleanRL: mean ± std, IQM | ours − CleanRL [95%] "
             "| P(ours > CleanRL) [95%] | verdict | steps to CleanRL's median: ours [95%] | CleanRL [95%] |",
             "|---|---|---|---|---|---|---|---|---|"]

    def finals(runs):
        return [r["final_return"] for r in runs]

    def steps_to(runs, target):  # "median [low, high]" of the runs' steps to target
        steps = [stats.steps_to(r["curve"]["step"], r["curve"]["return"], target) for r in runs]
        return "{:,.0f} [{:,.0f}, {:,.0f}]".format(np.median(steps), *stats.median_interval(steps)).replace("inf", "∞")

    def row(label, a_runs, b_runs, with_steps=True):
        v = versus(a_runs, b_runs)
        a, b = v["a"], v["b"]
        target = float(np.median(b))
        steps = f"{steps_to(a_runs, target)} | {steps_to(b_runs, target)}" if with_steps else " |"
        return (f"| {label} | {len(a)} / {len(b)} | {np.mean(a):.1f} ± {np.std(a):.1f}, {stats.iqm(a):.1f} | "
                f"{np.mean(b):.1f} ± {np.std(b):.1f}, {stats.iqm(b):.1f} | {v['difference']:+.1f} "
                f"[{v['low']:+.1f}, {v['high']:+.1f}] | {v['p']:.2f} [{v['p_low']:.2f}, {v['p_high']:.2f}] | "
                f"{v['verdict']} | {steps} |")

    for env_id in SIDE_BY_SIDE_ENVS:
        if ours[env_id] and peer[env_id]:
            lines.append(row(env_id, ours[env_id], peer[env_id]))
    expected = {e: 10 for e in SIDE_BY_SIDE_ENVS}
    short = [f"{e} ({len(ours[e])} / {len(peer[e])})" for e in SIDE_BY_SIDE_ENVS
             if (len(ours[e]), len(peer[e])) != (expected[e], expected[e])]
    if short:
        lines += ["", "Not all 10 seeds have run yet on both sides: " + ", ".join(short) + " (ours / CleanRL). "
                  "The suite is resumable: `python benchmarks/run.py --suite side-by-side --workers 1`."]
    if no_bootstrap and ours["HalfCheetah-v4"]:
        lines += ["", "The truncation bootstrap on HalfCheetah-v4: `ppo_continuous.py` against itself with "
                  "`--no-bootstrap-truncation` (the columns as above but the steps, the second program the one without it):", "",
                  "| env | seeds (with / without) | with: mean ± std, IQM | without: mean ± std, IQM | with − without [95%] "
                  "| P(with > without) [95%] | verdict | | |", "|---|---|---|---|---|---|---|---|---|",
                  row("HalfCheetah-v4", ours["HalfCheetah-v4"], no_bootstrap, with_steps=False)]
    # The performance profile: each run's final return normalised per env by the lowest and highest
    # final return of all runs of both programs there, then the fraction of runs above each τ.
    import matplotlib.pyplot as plt

    taus = np.linspace(0, 1, 101)
    normalised = {"ppo_continuous.py": [], "CleanRL": []}  # one array of scores per env
    for env_id in SIDE_BY_SIDE_ENVS:
        both = finals(ours[env_id]) + finals(peer[env_id])
        if ours[env_id] and peer[env_id] and max(both) > min(both):
            lo, hi = min(both), max(both)
            normalised["ppo_continuous.py"].append([(x - lo) / (hi - lo) for x in finals(ours[env_id])])
            normalised["CleanRL"].append([(x - lo) / (hi - lo) for x in finals(peer[env_id])])
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, strata in normalised.items():
        if strata:
            scores = np.concatenate(strata)
            line, = ax.plot(taus, stats.performance_profile(scores, taus), label=f"{label} ({len(scores)} runs)")
            ax.fill_between(taus, *stats.profile_interval(strata, taus), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("τ: final return, normalised per env to [0, 1]\nover both programs' runs")
    ax.set_ylabel("fraction of runs above τ")
    ax.legend()
    fig.tight_layout()
    png = out / "side-by-side-profile.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    rel = png.relative_to(md_path.parent) if png.is_relative_to(md_path.parent) else png
    lines += ["", f"![performance profile]({rel})", "",
              "The performance profile over the three envs: the share of each program's runs whose normalised final "
              "return is above τ, with a 95% stratified bootstrap band. A curve above the other is better at every "
              "level. Where the bands overlap, the runs cannot tell the two apart at that τ.", ""]
    return lines


def reference_runs() -> list[str]:
    """One line per peer's run kept in benchmarks/reference_runs/: its seeds' final returns and
    their mean ± std beside the peer's published figure."""
    lines = []
    for path in sorted((ROOT / "benchmarks" / "reference_runs").glob("*.json")):
        ref = json.loads(path.read_text())
        finals = [run["final_return"] for run in ref["runs"]]
        env_id = ref["env_id"]
        published = "{:.2f} ± {:.2f}".format(*CLEANRL_V4[env_id]) if env_id in CLEANRL_V4 else "none"
        lines.append(f"  - {env_id}, seeds {', '.join(str(run['seed']) for run in ref['runs'])}, "
                     f"mujoco {ref['machine']['versions']['mujoco']}: {' / '.join(f'{f:.1f}' for f in finals)} "
                     f"({np.mean(finals):.1f} ± {np.std(finals):.1f}), against its published {published} "
                     f"(`{path.name}`)")
    return lines


def write_ablations(results: list[dict], out: Path, md_path: Path) -> None:
    """ABLATIONS.md: each cell of the ablations suite beside its default, over the suite's seeds."""
    done = {(r["algo"], r["env_id"], r.get("variant"), r["seed"]): r for r in results if r["status"] == "ok"}
    if not any(variant for _, _, variant, _ in done):
        return
    cells = [(script, env_id, (variant or [None])[0], seeds) for script, env_id, _, seeds, *variant in SUITES["ablations"]]
    defaults = {(script, env_id): seeds for script, env_id, variant, seeds in cells if variant is None}
    lines = ["# What each detail buys: ablations of the PPO scripts", "",
             f"Made by `python benchmarks/report.py` from the runs in `{display(out)}/runs/`, which "
             "`python benchmarks/run.py --suite ablations` makes (the cells are in `benchmarks/presets.py`). "
             "Each ablation switches one detail off and keeps everything else at the script's defaults; it is "
             "compared with the default runs of the same seeds (for CartPole and MuJoCo, the runs of the classic and "
             "mujoco suites, reused). Final return: the mean return of a run's last 100 training episodes; "
             "with and without: mean ± std over seeds. Difference: without − with, with a 95% percentile bootstrap "
             "interval (10,000 resamples of the seeds of each group). Verdict: \"helps\" or \"hurts\" where the "
             "interval excludes 0, otherwise \"cannot tell\" at this number of seeds.", "",
             "| detail switched off | env | seeds | with (default) | without | difference [95% interval] | verdict |",
             "|---|---|---|---|---|---|---|"]
    plots = defaultdict(dict)  # env -> label -> runs
    for script, env_id, variant, seeds in cells:
        runs = [done[script, env_id, variant, s] for s in seeds if (script, env_id, variant, s) in done]
        if runs:
            plots[env_id][f"--{variant}" if variant else f"{script} default"] = runs
        if variant is None:
            continue
        base = [done[script, env_id, None, s] for s in defaults[script, env_id] if (script, env_id, None, s) in done]
        if len(runs) < len(seeds) or len(base) < len(defaults[script, env_id]):
            lines.append(f"| `--{variant}` ({script}) | {env_id} | {len(runs)} of {len(seeds)} finished | | | | not yet run |")
            continue
        with_, without = [r["final_return"] for r in base], [r["final_return"] for r in runs]
        diff, low, high = difference_interval(without, with_)
        verdict = "helps" if high < 0 else "hurts" if low > 0 else "cannot tell"
        lines.append(f"| `--{variant}` ({script}) | {env_id} | {', '.join(map(str, seeds))} | "
                     f"{np.mean(with_):.1f} ± {np.std(with_):.1f} | {np.mean(without):.1f} ± {np.std(without):.1f} | "
                     f"{diff:+.1f} [{low:+.1f}, {high:+.1f}] | {verdict} |")
    lines += [""]
    for env_id, lines_of_env in plots.items():
        if len(lines_of_env) < 2:  # no ablation of this env has finished a run yet
            continue
        png = out / f"ablations-{env_id}.png"
        plot_env(f"{env_id}: ablations", lines_of_env, png, in_order=True)  # the default first
        rel = png.relative_to(md_path.parent) if png.is_relative_to(md_path.parent) else png
        lines += [f"## {env_id}", "", f"![{env_id}]({rel})", "", "```bash"]
        lines += sorted({runs[0]["command"] for runs in lines_of_env.values()})
        scripts = sorted({runs[0]["algo"] for runs in lines_of_env.values()})
        lines += [f"python benchmarks/run.py --suite ablations --only {s}__{env_id}__" for s in scripts] + ["```", ""]
    notes = ROOT / "benchmarks" / "ablations_notes.md"  # the comparison with the literature, written by hand
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    md_path.write_text("\n".join(lines))
    print(f"wrote {md_path} and {sum(len(v) > 1 for v in plots.values())} plots in {out}")


# The figure of each step page of docs/, which docs/build.py shows below the page's list of steps:
# the committed runs of the file before the step and of the file after it, on an env where the
# step makes a visible difference. Where the two cannot run on one env, ablations of the file after
# the step stand in for its steps' ideas. A line: (its label, script, env, variant, seeds). The
# note is the caption's reading of the runs, written by hand. It holds no number: the caption's
# numbers are computed from the runs.
STEP_FIGURES = {
    ("reinforce", "vpg"): (
        [("reinforce.py", "reinforce", "LunarLander-v3", "time-major", FIVE_SEEDS),
         ("vpg.py", "vpg", "LunarLander-v3", None, FIVE_SEEDS)],
        "`reinforce.py` runs with its time-major rollout, the code it has today. No committed run compares "
        "one step file with the next. So the figure cannot tell which of the five steps makes the "
        "difference, and no run shows the baseline of step 1 alone. `benchmarks/ABLATIONS.md` measures the "
        "truncation bootstrap of step 3 in the PPO scripts."),
    ("vpg", "trpo"): (
        [("vpg.py", "vpg", "InvertedDoublePendulum-v4", None, THREE_SEEDS),
         ("trpo.py", "trpo", "InvertedDoublePendulum-v4", None, THREE_SEEDS)],
        "`trpo.py` does not end higher on every env. On HalfCheetah-v4 and LunarLander-v3 it ends below "
        "`vpg.py` (`benchmarks/RESULTS.md`)."),
    ("trpo", "ppo_discrete"): (
        [("trpo.py", "trpo", "LunarLander-v3", "cg-stop", FIVE_SEEDS),
         ("ppo_discrete.py", "ppo_discrete", "LunarLander-v3", None, FIVE_SEEDS)],
        "`trpo.py` runs with its conjugate-gradient stop, the code it has today. The two scripts do not "
        "run with the same settings. `ppo_discrete.py` takes the classic suite's LunarLander settings, "
        "tuned for it, and `trpo.py` its defaults. So the gap is not the clip's alone. At their defaults "
        "on CartPole-v1, `trpo.py` reaches the top sooner (`benchmarks/RESULTS.md`). No committed run of "
        "`steps/ppo_1_clip.py` tells its step from the next."),
    ("vpg", "ppo_discrete"): (
        [("vpg.py", "vpg", "LunarLander-v3", None, FIVE_SEEDS),
         ("ppo_discrete.py", "ppo_discrete", "LunarLander-v3", None, FIVE_SEEDS)],
        "`ppo_discrete.py` learns faster at first, then `vpg.py` catches up. The two scripts do not run "
        "with the same settings. `ppo_discrete.py` takes the classic suite's LunarLander settings, tuned "
        "for it, and `vpg.py` its defaults. So the early gap is not the clip's alone. At their defaults on "
        "CartPole-v1, `vpg.py` reaches the top sooner (`benchmarks/RESULTS.md`). No committed run of "
        "`steps/ppo_1_clip.py` tells its step from the next."),
    ("ppo_discrete", "ppo_continuous"): (
        [("ppo_continuous.py", "ppo_continuous", "Pendulum-v1", None, FIVE_SEEDS),
         ("--no-norm-reward", "ppo_continuous", "Pendulum-v1", "no-norm-reward", FIVE_SEEDS),
         ("--no-norm-obs", "ppo_continuous", "Pendulum-v1", "no-norm-obs", FIVE_SEEDS)],
        "`ppo_discrete.py` cannot act in Pendulum-v1, whose actions are continuous. So the figure shows "
        "`ppo_continuous.py` with one step's idea switched off, from the ablations suite "
        "(`benchmarks/ABLATIONS.md`). Its flag `--no-norm-reward` takes away the reward scaling of step 2, "
        "and `--no-norm-obs` the observation normalisation of step 3. No committed run shows the Gaussian "
        "head of step 1 or the defaults of step 4 alone."),
    ("ppo_discrete", "ppo_recurrent"): (
        [("ppo_discrete.py, memory off", "ppo_discrete", "ppo_recurrent:CartPoleNoVel-v1", "recurrent-settings",
          FIVE_SEEDS),
         ("ppo_recurrent.py, memory on", "ppo_recurrent", "CartPoleNoVel-v1", "no-normalisers", FIVE_SEEDS)],
        "CartPoleNoVel-v1 is CartPole-v1 with the velocities in the observation set to 0. Without them, "
        "one observation does not tell where the pole is going. Both scripts run at `ppo_recurrent.py`'s "
        "settings (RL Zoo's): 8 envs × 32 steps, 20 epochs of one minibatch, α 1e-3 decayed, γ 0.98, λ 0.8, "
        "no entropy bonus, no value clip (the memory suite, `benchmarks/presets.py`). `ppo_recurrent.py` runs "
        "without its observation normaliser and reward scaling, which `ppo_discrete.py` lacks. The networks "
        "still differ: an LSTM of 64 units and a ReLU layer of 64 against two tanh layers of 64. At its "
        "defaults, with its normalisers, `ppo_recurrent.py`'s results are in `benchmarks/RESULTS.md`."),
    ("ppo_discrete", "ppo_atari"): (
        [("ppo_discrete.py on MinAtarFlat/<game>-v1", "ppo_discrete", "benchmarks.flat_minatar:MinAtarFlat/{game}-v1",
          "discrete-defaults", THREE_SEEDS),
         ("steps/ppo_atari_1_encoder.py on MinAtar/<game>-v1", "steps/ppo_atari_1_encoder", "MinAtar/{game}-v1", None,
          THREE_SEEDS)],
        "The figure is the step's first half alone: the encoder. Both files run at `ppo_discrete.py`'s defaults "
        "(4 envs × 128 steps, 4 epochs of 4 minibatches, α 2.5e-4 decayed, ε 0.2 constant, c₁ 0.5; the encoder "
        "suite, `benchmarks/presets.py`). ppo_discrete.py plays MinAtarFlat, MinAtar with each 10×10 frame "
        "flattened into a vector of zeros and ones. The networks differ by design: MinAtar's network (one 3×3 "
        "convolution of 16 filters, 128 features, two linear heads) against two tanh MLPs of 64 units. The "
        "step's second half, Atari's details and the PPO paper's defaults, is not in this figure. "
        "`benchmarks/RESULTS.md` runs `ppo_atari.py` on MinAtar with them.",
        MINATAR_GAMES),
}


def difference(name: str, compared: str) -> str:
    """A sentence from `compare`'s "+96.2 [+45.6, +133.5] | higher"."""
    value, verdict = compared.split(" | ")
    diff, interval = value.split(" ", 1)
    return f"{name}: {diff}, 95% bootstrap interval {interval}, {verdict}."


def made_at(runs: list[dict]) -> str:
    """The commits of the script that made some runs, from their result.json: "vpg.py at ba81da2",
    or "ppo_discrete.py at 6457ad2 for seeds 1-3 and 1150aa6 for seeds 4-5" where the seeds differ."""
    by_commit = defaultdict(list)
    for r in sorted(runs, key=lambda r: r["seed"]):
        commit, dirty, _ = r["script_commit"].partition("+dirty")
        by_commit[commit[:7] + (" with uncommitted changes" if dirty else "")].append(r["seed"])
    if len(by_commit) == 1:
        return f"{runs[0]['algo']}.py at {next(iter(by_commit))}"

    def seeds(s: list[int]) -> str:
        return f"seed {s[0]}" if len(s) == 1 else (f"seeds {s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1))
                                                    else "seeds " + ", ".join(map(str, s)))
    made = [f"{commit} for {seeds(s)}" for commit, s in by_commit.items()]
    return f"{runs[0]['algo']}.py at " + ", ".join(made[:-1]) + f" and {made[-1]}"


def step_figures(results: list[dict], out: Path = ROOT / "docs" / "figures") -> dict:
    """For each step page of STEP_FIGURES: its plot, step-<from>-to-<to>.png (480 × 300 px), and its
    entry in steps.json, which docs/build.py reads: the image, its alt text, the caption and the ids
    of its runs. A run that the table names and that has not finished stops it."""
    done = {run_id(r["algo"], r["env_id"], r["seed"], r.get("variant")): r for r in results if r["status"] == "ok"}
    out.mkdir(parents=True, exist_ok=True)
    pages = {}
    for (before, after), (lines, note, *games) in STEP_FIGURES.items():
        if games:  # one env per game: "{game}" in each line's env id
            pages[f"{before}-to-{after}"] = games_figure(before, after, lines, note, games[0], done, out)
            continue
        ids = {label: [run_id(script, env_id, seed, variant) for seed in seeds]
               for label, script, env_id, variant, seeds in lines}
        missing = [i for run_ids in ids.values() for i in run_ids if i not in done]
        if missing:
            raise FileNotFoundError(f"the figure of {before} → {after} needs the run {missing[0]}, not finished "
                                    f"in {display(DEFAULT_OUT)}/runs/")
        runs = {label: [done[i] for i in run_ids] for label, run_ids in ids.items()}
        env_id = lines[0][2].rpartition(":")[2]
        budget = {r["flags"]["total_timesteps"] for cell in runs.values() for r in cell}
        seeds = {tuple(seeds) for *_, seeds in lines}
        assert len(budget) == len(seeds) == 1, f"{before} → {after}: one budget and one set of seeds for all lines"
        budget, seeds = budget.pop(), seeds.pop()
        seeds_text = (f"{seeds[0]}-{seeds[-1]}" if list(seeds) == list(range(seeds[0], seeds[-1] + 1))
                      else ", ".join(map(str, seeds)))
        name = f"step-{before}-to-{after}.png"
        plot_env(f"{env_id}, {budget:,} steps", runs, out / name, in_order=True, small=True)
        finals = {label: [r["final_return"] for r in cell] for label, cell in runs.items()}
        (first, base), *others = finals.items()
        results_text = (f"{env_id}, {budget:,} steps, seeds {seeds_text}. Final return, a run's mean over its last "
                        "100 training episodes (mean ± population std over seeds, ddof 0): "
                        + ", ".join(f"`{label}` {mean_std(f, len(f))}" for label, f in finals.items()) + ". "
                        + " ".join(difference(f"`{label}` − `{first}`", compare(base, f)) for label, f in others))
        caption = "\n\n".join([
            re.sub(r"(?<![\w-])-(?=\d)", "−", results_text),  # a minus sign, not a hyphen
            note,
            f"Each line is the mean over seeds of a run's mean return over its last {WINDOW} training episodes, "
            "and its band a 95% bootstrap interval of that mean. The runs are in `benchmarks/results/runs/`: "
            + ", ".join(f"`{run_ids[0].rpartition('seed')[0]}seed*` (suite {runs[label][0]['suite']}, "
                        f"{made_at(runs[label])})" for label, run_ids in ids.items()) + "."])
        pages[f"{before}-to-{after}"] = {
            "image": name, "width": 480, "height": 300,
            "alt": f"Learning curves on {env_id} of " + " and ".join(finals) + ", mean over seeds with 95% bands",
            "caption": caption, "runs": [i for run_ids in ids.values() for i in run_ids]}
    (out / "steps.json").write_text(json.dumps(pages, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(pages)} step figures and steps.json in {display(out)}")
    return pages


def games_figure(before: str, after: str, lines: list, note: str, games: list[str], done: dict, out: Path) -> dict:
    """A step figure over several games (480 × 300 px): per game, each line's mean final return over
    seeds with its 95% bootstrap interval, as grouped bars; the caption gives each game's
    difference, the second line − the first, with its interval and verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = {(label, game): [run_id(script, env_id.format(game=game), seed, variant) for seed in seeds]
           for label, script, env_id, variant, seeds in lines for game in games}
    missing = [i for run_ids in ids.values() for i in run_ids if i not in done]
    if missing:
        raise FileNotFoundError(f"the figure of {before} → {after} needs the run {missing[0]}, not finished "
                                f"in {display(DEFAULT_OUT)}/runs/")
    finals = {key: [done[i]["final_return"] for i in run_ids] for key, run_ids in ids.items()}
    budget = {done[i]["flags"]["total_timesteps"] for run_ids in ids.values() for i in run_ids}
    seeds = {tuple(seeds) for *_, seeds in lines}
    assert len(budget) == len(seeds) == 1, f"{before} → {after}: one budget and one set of seeds for all lines"
    budget, seeds = budget.pop(), seeds.pop()
    labels = [label for label, *_ in lines]
    name = f"step-{before}-to-{after}.png"
    with plt.rc_context({"font.size": 8}):
        fig, ax = plt.subplots(figsize=(4.8, 3.0), dpi=100)
        width = 0.8 / len(labels)
        for k, label in enumerate(labels):
            means = [np.mean(finals[label, game]) for game in games]
            bands = [one_sample_interval(finals[label, game], np.mean) for game in games]
            x = np.arange(len(games)) + (k - (len(labels) - 1) / 2) * width
            ax.bar(x, means, width, label=label,
                   yerr=[[m - lo for m, (lo, _) in zip(means, bands, strict=True)],
                         [hi - m for m, (_, hi) in zip(means, bands, strict=True)]], capsize=2)
        ax.set_xticks(np.arange(len(games)), games)
        ax.set(title=f"MinAtar, {budget:,} steps: final return, 95% intervals", ylabel="final return")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name)
        plt.close(fig)
    first, second = labels[0], labels[1]
    per_game = " ".join(difference(f"{game}: `{second}` − `{first}`", compare(finals[first, game], finals[second, game]))
                        for game in games)
    results_text = (f"{', '.join(games)}, {budget:,} steps, seeds {seeds[0]}-{seeds[-1]}. Final return, a run's mean "
                    "over its last 100 training episodes, each bar the mean over seeds with its 95% bootstrap "
                    "interval. " + per_game)
    caption = "\n\n".join([
        re.sub(r"(?<![\w-])-(?=\d)", "−", results_text), note,
        "The runs are in `benchmarks/results/runs/`: " + ", ".join(
            f"`{run_ids[0].rpartition('seed')[0]}seed*`" for run_ids in ids.values())
        + f" (suite {done[next(iter(ids.values()))[0]]['suite']}; "
        + ", ".join(made_at([done[i] for (label, _), run_ids in ids.items() if label == line[0] for i in run_ids])
                    for line in lines) + ")."])
    return {"image": name, "width": 480, "height": 300,
            "alt": f"Final returns on MinAtar's {len(games)} games of " + " and ".join(labels)
                   + ", mean over seeds with 95% intervals",
            "caption": caption, "runs": [i for run_ids in ids.values() for i in run_ids]}


def differing_versions(runs: list[dict], common: dict) -> str:
    """The package versions of `runs` that differ from `common`, e.g. "mujoco 2.3.7" (Pusher-v4
    does not load on mujoco 3+, so its runs are made in a venv with mujoco<3)."""
    return ", ".join(sorted({f"{k} {v}" for r in runs for k, v in r["machine"]["versions"].items()
                             if common.get(k) != v}))


# The suites whose runs RESULTS.md shows in sections of their own, or only on a step page (encoder).
OWN_SECTIONS = ("recurrent", "minatar", "atari", "minatar-5m", "minatar-tune", "encoder")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder that run.py wrote")
    parser.add_argument("--results-md", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--ablations-md", type=Path, default=ROOT / "benchmarks" / "ABLATIONS.md",
                        help="written when the results hold runs of the ablations suite")
    args = parser.parse_args()

    results = load_results(args.out)
    write_ablations(results, args.out, args.ablations_md)
    # RESULTS.md: our scripts' defaults only (the side-by-side suite's CleanRL runs are a peer's)
    results = [r for r in results if not r.get("variant") and not r["algo"].startswith("cleanrl")
               and r["suite"] not in OWN_SECTIONS]
    finished = [r for r in results if r["status"] == "ok"]
    cells = defaultdict(lambda: defaultdict(list))  # env -> algo -> runs
    for r in finished:
        cells[r["env_id"]][r["algo"]].append(r)
    lines = ["# Benchmark results", "",
             f"Made by `python benchmarks/report.py` from the runs in `{display(args.out)}/runs/` "
             "(one `result.json` per run: command, versions, machine, wall time, SPS, full learning curve).",
             "Final return: mean over seeds of each run's mean return over its last 100 training episodes "
             "(stochastic policy; CleanRL's metric), ± the standard deviation over seeds (the population std, ddof 0, "
             "as CleanRL's tables). Curves and \"best of the curve\": at each step, the mean return of the last "
             f"{WINDOW} training episodes finished by then. Greedy evaluation: after training, each run's mean over "
             "10 episodes with the mean (or most probable) action.", ""]
    common, other_versions = {}, {}
    if finished:
        m = finished[0]["machine"]
        common = {k: Counter(r["machine"]["versions"].get(k) for r in finished).most_common(1)[0][0]
                  for k in m["versions"]}
        other_versions = {e: v for e in sorted(cells)
                          if (v := differing_versions([r for rs in cells[e].values() for r in rs], common))}
        exceptions = "; ".join(f"{env_id} ran on {v}" for env_id, v in other_versions.items())
        lines += [f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}; "
                  + ", ".join(f"{k} {v}" for k, v in common.items())
                  + (f" ({exceptions}, see its section)" if exceptions else "") + ". "
                  f"Runs were started up to {max(r['workers'] for r in finished)} at a time and the machine had "
                  "other work too, so wall time and SPS are those of a busy machine: `benchmarks/` measures learning, "
                  "not speed.", ""]
    lines += figure3(finished, args.out, args.results_md)
    everything = load_results(args.out)  # the variants too
    lines += (vpg_lr_section(everything) + mujoco2_section(everything) + cg_stop_section(everything)
              + reinforce_rollout_section(everything) + recurrent_section(everything, args.out, args.results_md)
              + minatar_section(everything, args.out, args.results_md)
              + minatar_5m_section(everything, args.out, args.results_md)
              + minatar_tune_section(everything)
              + atari_section(everything, args.out, args.results_md)
              + side_by_side_section(everything, args.out, args.results_md))
    if args.out == DEFAULT_OUT:  # README and the step pages' figures show the committed runs only
        rewrite_readme(everything)
        step_figures(everything)
    for env_id in sorted(cells):
        png = args.out / f"{env_id}.png"
        plot_env(env_id, cells[env_id], png)
        rel = png.relative_to(args.results_md.parent) if png.is_relative_to(args.results_md.parent) else png
        lines += [f"## {env_id}", "", f"![{env_id}]({rel})", "",
                  "| script | seeds | steps | final return | median wall | median SPS | reference |",
                  "|---|---|---|---|---|---|---|"]
        for algo, runs in sorted(cells[env_id].items()):
            finals = [r["final_return"] for r in runs]
            seeds = ", ".join(str(r["seed"]) for r in sorted(runs, key=lambda r: r["seed"]))
            steps = int(np.median([r["total_timesteps"] for r in runs]))
            wall, sps = np.median([r["wall_seconds"] for r in runs]) / 60, np.median([r["sps"] for r in runs])
            lines.append(f"| `{algo}` | {seeds} | {steps:,} | {np.mean(finals):.1f} ± {np.std(finals):.1f} | {wall:.1f} min "
                         f"| {sps:,.0f} | {REFERENCES.get((algo, env_id), '')} |")
        if env_id in other_versions:
            lines += ["", f"These runs used {other_versions[env_id]}, not the version on the machine line above."]
        lines += ["", "Reproduce one run (any seed), or the whole cell:", "", "```bash"]
        for algo, runs in sorted(cells[env_id].items()):
            lines.append(runs[0]["command"])
            lines.append(f"python benchmarks/run.py --suite {runs[0]['suite']} --only {algo}__{env_id}__seed")
        lines += ["```", ""]
    lines += ["## How the reference figures compare", "",
              "- **CleanRL** (`docs/benchmark/ppo*.md`): the mean of each run's last 100 training episodes at the end "
              "of training (stochastic policy), mean ± std over 3 seeds: the same metric as ours. Its script, run on the "
              "project's machine (`reference_runs/`: the source commit, the patch applied, versions, commands and curves):",
              *reference_runs(), "",
              "- **RL Baselines3 Zoo** (`benchmark.md`): one trained agent, deterministic evaluation episodes, on "
              "LunarLander-v2 and MuJoCo -v3 (SB3-contrib's TRPO): a different metric (greedy, one seed) and env "
              "version; the TRPO section below compares it with our greedy evaluation too.",
              "- **Spinning Up** (`docs/spinningup/bench.rst`): MuJoCo -v3, 10 seeds, (64, 32) networks, curves smoothed "
              "over 11 epochs; published only as figures, so its values are approximate readings of the plotted mean curve.", ""]
    notes = ROOT / "benchmarks" / "results_notes.md"  # measured explanations, written by hand
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    failed = [r for r in results if r["status"] != "ok"]
    if failed:
        lines += ["## Failed runs", ""]
        for r in failed:
            lines.append(f"- `{r.get('command') or r['algo']}` ({r['env_id']}, seed {r['seed']}): {r['error']}")
        lines.append("")
    args.results_md.write_text("\n".join(lines))
    print(f"wrote {args.results_md} and {len(cells)} plots in {args.out}")


if __name__ == "__main__":
    main()
