"""Every figure quoted in the prose of README.md, docs/*.md and the hand-written notes comes from a committed file.

The generated parts of benchmarks/RESULTS.md, ABLATIONS.md and SPEED.md are computed from the
runs; the notes they include verbatim, README.md and benchmarks/reference_runs/README.md are
written by hand. This test reads the figures of that prose and looks each one up among the
*known values*, the numbers that the committed files give or that are recomputed from them:

- each finished run (benchmarks/results/runs/*/result.json): final return, last-20 and last-100
  means of its curve, the mean length of its last 100 episodes, the peak of its last-20 mean
  (over its episodes), the mean and std of its greedy evaluation and that mean over the
  final return, steps (wall time and SPS are left out: no figure needs them, and they are
  the commonest chance matches);
- each cell (script, env, variant) over all its seeds, seeds 1-3 and seeds 1-5: mean, std (ddof
  0 and 1) of the final returns and of the runs' evaluation means, the best of the mean curve
  (RESULTS.md's), and the mean curve of last-100 means at 250k, 500k, 750k and 1M steps;
- each ablation of presets.SUITES["ablations"]: the difference of means and its bootstrap
  interval, as ABLATIONS.md computes them;
- every number, or number inside a string, of benchmarks/reference_runs/*.json,
  benchmarks/results/trpo_normalized/*.json (their curves as a run's curve, not number by
  number) and benchmarks/SPEED.json, with SPEED.md's medians, ratios and shares of the floor, its
  parts in µs per env step, the line tables grouped into the parts of speed_notes.md, and the
  arithmetic of its 1.7× target;
- presets.py's published figures (CLEANRL_V4, PPO_PAPER_FIGURE3, REFERENCES) and the settings of
  the runs: every number of SUITES' flags and of the five scripts' `Args` defaults, with each
  batch (envs × steps) and the updates it makes in 1M steps.

What a figure is. Fenced code blocks, `inline code`, link targets, URLs and image lines are
skipped. A figure is a number token (thousands commas allowed; a leading -, − or + is its sign)
that has a decimal point, or stands next to "±", or is directly followed by "×", or is at least
100 in size. A token glued to a letter, "_", ".", "§" or "#" on either side is not a number (300k,
1M, 3e-4, Hopper-v4, 8b5564c, §13.3, #504), nor is a dotted version (2.9.2). Not figures either:
a plain four-digit year 1950-2030 unless it stands beside "/", "±" or "→" (then it is a value in
a list, e.g. "2021 / 1851"); a number within two words after a package name (Python, torch,
Gymnasium, mujoco, numpy, SB3, Stable-Baselines3: a version); a number right after a Greek
hyperparameter symbol, optionally with "=", "≤" or "<" (γ 0.999, δ = 0.01: a setting).

A figure matches when a known value rounds to it at the precision shown: "4473" within 0.5,
"2382.86" within 0.005, "1.33×" within 0.005 (a "%" figure is compared as written). Its sign
counts. A "mean ± std" written on one line must match as a pair: the mean and std of one group
of seeds (either ddof) or of one run's evaluation, or a pair that a committed file writes (CleanRL's
published figures, REFERENCES, the reference runs). ALLOWED lists the few remaining figures that
no committed file holds, each with the words that must stand beside it and why.

The runs are read from disk as report.py reads them (in a clean clone: the committed ones). A
figure is matched by value, not by meaning, so an edited figure can land on an unrelated known
value: about three in four edits of a figure's last digit go red.
"""

import ast
import json
import re
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))
import presets  # noqa: E402
import report  # noqa: E402
import speed as speed_py  # noqa: E402

PROSE = ["README.md", "docs/usage.md", "docs/own-env.md",
         "benchmarks/figure3_notes.md", "benchmarks/results_notes.md", "benchmarks/ablations_notes.md",
         "benchmarks/speed_notes.md", "benchmarks/reference_runs/README.md"]
SCRIPTS = ["reinforce.py", "vpg.py", "trpo.py", "ppo_discrete.py", "ppo_continuous.py"]
SEED_SETS = [None, {1, 2, 3}, {1, 2, 3, 4, 5}]  # None: every seed of the cell
CHECKPOINTS = [250_000, 500_000, 750_000, 1_000_000]
SPEED_TARGET = 1.7  # speed_notes.md: the ratio to SB3 that the round aimed for (allowed below)

# (numbers as written, a regex that must match the words around them, why no committed file holds them)
ALLOWED = [
    ("1.7", r"aimed|reach|× 1\.7 is", "speed_notes.md's target ratio to SB3: a goal, not a measurement"),
    ("475", r"CartPole|reach", "CartPole-v1's reward threshold (Gymnasium's spec), a property of the env"),
    ("200", r"Pendulum|cut at", "Pendulum-v1's time limit, a property of the env"),
    ("-16.3", r"reward lies", "Pendulum-v1's lowest reward, −(π² + 0.1·8² + 0.001·2²), a property of the env"),
    ("8", r"angular velocity", "Pendulum-v1's velocity bound, a property of the env"),
    ("0.61", r"initial σ", "trpo.py's initial σ, exp(−0.5), written in its comments"),
    ("10,000", r"\+ 10,000|10,000 steps", "the scripts' evaluation seed offset and episode cap, constants of their code"),
    ("0.01 0.05", r"is usual", "the usual range of PPO's approx-KL, a rule of thumb beside the guard's threshold"),
    ("130 143", r"code 130|exits 130|exits with 1(30|43)",
     "the exit codes of a run stopped by Ctrl-C or SIGTERM (128 + SIGINT, 128 + SIGTERM)"),
    ("100", r"last 100|100 columns", "definitions: the final return's window (CleanRL's metric), the scripts' line length"),
    ("1.1 1.3", r"1\.1 to 1\.3 have", "Gymnasium versions, in docs/own-env.md's note on versions"),
    ("1366 1920", r"pixel", "the screen widths docs/ is laid out and tested for"),
]

PACKAGES = r"(?:python|torch|gymnasium|mujoco|numpy|sb3|stable-baselines3|tyro|tensorboard)"
NUMBER = re.compile(r"(?P<sign>[-−+]?)(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?")


# --- the known values ------------------------------------------------------------------------

def curve_stats(curve: dict) -> list[float]:
    """A run's curve: last-20 and last-100 means, mean length of the last 100, the peak of its last-20 mean."""
    returns = np.asarray(curve["return"], dtype=float)
    if not len(returns):
        return []
    out = [returns[-20:].mean(), returns[-100:].mean()]
    if curve.get("length"):
        out.append(float(np.mean(curve["length"][-100:])))
    window = min(20, len(returns))
    out.append(float(np.convolve(returns, np.ones(window) / window, "valid").max()))
    return out


def mean_std(values: list[float]) -> list[tuple[float, float]]:
    """(mean, std) of the values, the std with ddof 0 and, where there are two or more, ddof 1."""
    return [(np.mean(values), np.std(values, ddof=ddof)) for ddof in (0, 1) if len(values) > ddof]


def cell_stats(runs: list[dict], finals: list[float], evals: list[float]) -> tuple[list[float], list[tuple]]:
    """A group of seeds: mean and std of the final returns and of the evaluation means (also as
    pairs), the best of the mean curve, and the mean curve of last-100 means at the checkpoints."""
    out, pairs = [], []
    for values in (finals, evals):
        if values:
            pairs += mean_std(values)
            out += [x for pair in mean_std(values) for x in pair]
    if runs:  # the best of the mean curve: report.seed_mean's line, without its bootstrap band
        grid = np.linspace(0, max(r.get("total_timesteps", r["curve"]["step"][-1]) for r in runs), 200)
        curves = np.stack([report.curve_on_grid(r["curve"]["step"], r["curve"]["return"], grid) for r in runs])
        out.append(float(curves[:, ~np.isnan(curves).any(axis=0)].mean(axis=0).max()))
        at = np.stack([report.curve_on_grid(r["curve"]["step"], r["curve"]["return"], CHECKPOINTS, 100) for r in runs])
        out += [v for v in at.mean(axis=0) if np.isfinite(v)]
    return out, pairs


def pairs_in(texts) -> list[tuple[float, float]]:
    """The "mean ± std" pairs written in strings."""
    number = r"(-?\d+(?:,\d{3})*(?:\.\d+)?)"
    return [(float(a.replace(",", "")), float(b.replace(",", ""))) for text in texts
            for a, b in re.findall(rf"{number} ± {number}", text)]


def strings_in(obj) -> list[str]:
    """Every string of a JSON value."""
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, list):
        return [text for v in obj for text in strings_in(v)]
    return [obj] if isinstance(obj, str) else []


def numbers_in(obj, skip=("curve",)) -> list[float]:
    """Every number of a JSON value, with the numbers written inside its strings; `skip` keys are left out."""
    if isinstance(obj, dict):
        return [x for k, v in obj.items() if k not in skip for x in numbers_in(v, skip)]
    if isinstance(obj, list):
        return [x for v in obj for x in numbers_in(v, skip)]
    if isinstance(obj, bool) or obj is None:
        return []
    if isinstance(obj, int | float):
        return [float(obj)]
    return [float(m.group().replace(",", "")) for m in re.finditer(r"-?\d+(?:,\d{3})*(?:\.\d+)?", str(obj))]


def speed_values(speed: dict) -> list[float]:
    """SPEED.md's medians, ratios and shares of the floor, its parts timed alone per env step;
    speed_notes.md's parts of the line tables (and their pairwise sums), and the SPS and µs per step
    that the target ratio asks for."""
    parts = {"acting": r"get_action_and_value\(next_obs\)", "env step": r"envs\.step\(",
             "normaliser": r"normalize_obs\(|scale_reward\(",
             "update": r"backward\(|get_action_and_value\(b_obs|ppo_loss\(|clip_grad_norm_|optimizer\.|mb_"}
    out = numbers_in(speed)
    for name, task in speed["tasks"].items():
        steps = speed_py.TASKS[name]["sb3"]["n_envs"] * speed_py.TASKS[name]["sb3"]["n_steps"]  # per iteration
        out += [1000 * ms / steps for ms in task["profile"].values()]  # each part alone, µs per env step
        for sides in task["threads"].values():
            ours, sb3 = np.median(sides["ours"]), np.median(sides["sb3"])
            out += [ours, sb3, ours / sb3, 100 * ours / task["floor"]["ours"], 100 * sb3 / task["floor"]["sb3"]]
            target = SPEED_TARGET * round(sb3)  # as the notes work it out, from SPEED.md's rounded median
            out += [target, 1e6 / target]
        table = task.get("line_profile", "")
        total = float(re.search(r"([\d.]+) µs per env step", table).group(1)) if table else None
        if total:
            sums = dict.fromkeys(parts, 0.0)
            for code, us in re.findall(r"^\|[^|]*\| `(.*)` \| ([\d.]+) \|", table, re.M):
                part = next((p for p, pattern in parts.items() if re.search(pattern, code)), None)
                if part:
                    sums[part] += float(us)
            sums["else"] = total - sum(sums.values())
            values = list(sums.values())
            out += values + [a + b for i, a in enumerate(values) for b in values[i + 1:]]
            out += [total - 1e6 / (SPEED_TARGET * round(np.median(s["sb3"]))) for s in task["threads"].values()]
    for sides in speed.get("recurrent", {}).get("threads", {}).values():  # ppo_recurrent.py's table
        ours, sb3 = np.median(sides["ours"]), np.median(sides["sb3"])
        out += [ours, sb3, ours / sb3]
    atari = speed.get("atari", {})  # ppo_atari.py's tables: medians, ratios, the vector envs' gains
    sps = {side: np.median([r["sps"] for r in runs]) for side, runs in atari.get("sides", {}).items()}
    out += list(sps.values()) + [a / b for a in sps.values() for b in sps.values()]
    out += [np.median([r["cpu_per_1k"] for r in runs]) for runs in atari.get("sides", {}).values()]
    vector = {name: np.median([r["sps"] for r in runs]) for name, runs in atari.get("vector", {}).items()}
    out += list(vector.values()) + [100 * (v / vector["sync"] - 1) for v in vector.values()]
    return out


def settings() -> list[float]:
    """The runs' settings: every number of the suites' flags and of the scripts' Args defaults, and
    each batch (envs × steps, or REINFORCE's batch size) with the number of updates it makes in 1M steps."""
    out, batches = [], []
    for cells in presets.SUITES.values():
        for cell in cells:
            flags = dict(zip(cell[2][::2], cell[2][1::2], strict=False))
            out += [float(v) for v in cell[2] if re.fullmatch(r"-?[\d.]+(e-?\d+)?", v)]
            if "--num-envs" in flags and "--num-steps" in flags:
                batches.append(int(flags["--num-envs"]) * int(flags["--num-steps"]))
    for script in SCRIPTS:
        args = next(n for n in ast.parse((ROOT / script).read_text()).body if isinstance(n, ast.ClassDef) and n.name == "Args")
        defaults = {n.target.id: n.value.value for n in args.body
                    if isinstance(n, ast.AnnAssign) and isinstance(n.value, ast.Constant)
                    and isinstance(n.value.value, int | float) and not isinstance(n.value.value, bool)}
        out += [float(v) for v in defaults.values()]
        batches.append(defaults.get("batch_size") or defaults["num_envs"] * defaults["num_steps"])
    return out + batches + [1_000_000 // b for b in batches]


@cache
def known_values() -> tuple[np.ndarray, np.ndarray]:
    """The known values (sorted) and the known (mean, std) pairs."""
    values, pairs = [], []
    runs = [r for r in report.load_results(BENCH / "results") if r["status"] == "ok"]
    for r in runs:
        evals = r.get("eval_returns") or []
        values += [r["final_return"], r["total_timesteps"]]
        values += curve_stats(r["curve"])
        if evals:
            values += [np.mean(evals), np.std(evals), np.mean(evals) / r["final_return"]]
            pairs += mean_std(evals)[:1]
    cells = defaultdict(list)
    for r in runs:
        cells[r["algo"], r["env_id"], r.get("variant")].append(r)
    for cell in cells.values():
        for seeds in SEED_SETS:
            group = [r for r in cell if seeds is None or r["seed"] in seeds]
            if group:
                stats = cell_stats(group, [r["final_return"] for r in group],
                                   [np.mean(r["eval_returns"]) for r in group if r.get("eval_returns")])
                values, pairs = values + stats[0], pairs + stats[1]
    done = {(r["algo"], r["env_id"], r.get("variant"), r["seed"]): r["final_return"] for r in runs}
    defaults = {(c[0], c[1]): c[3] for c in presets.SUITES["ablations"] if len(c) == 4}
    for script, env_id, _, seeds, variant in (c for c in presets.SUITES["ablations"] if len(c) == 5):
        without = [done[script, env_id, variant, s] for s in seeds if (script, env_id, variant, s) in done]
        with_ = [done[script, env_id, None, s] for s in defaults[script, env_id] if (script, env_id, None, s) in done]
        if without and with_:
            values += report.difference_interval(without, with_)
    ours, peer, no_bootstrap = report.side_by_side_runs(runs)  # the side-by-side verdicts' figures
    for a, b in [(ours[e], peer[e]) for e in ours] + [(ours["HalfCheetah-v4"], no_bootstrap)]:
        if a and b:
            v = report.versus(a, b)
            values += [v[k] for k in ("difference", "low", "high", "p", "p_low", "p_high")]
    others = sorted((BENCH / "reference_runs").glob("*.json")) + sorted((BENCH / "results" / "trpo_normalized").glob("*.json"))
    for path in others:
        data = json.loads(path.read_text())
        values += numbers_in(data)
        group = data.get("runs", [data])
        for run in group:
            values += curve_stats(run["curve"])
        stats = cell_stats(group, [run["final_return"] for run in group], [])
        values, pairs = values + stats[0], pairs + stats[1] + pairs_in(strings_in(data))
    values += speed_values(json.loads((BENCH / "SPEED.json").read_text()))
    values += [x for pair in presets.CLEANRL_V4.values() for x in pair]
    values += [float(v.strip("~")) for row in presets.PPO_PAPER_FIGURE3.values() for v in row]
    values += numbers_in(list(presets.REFERENCES.values()) + list(presets.RL_ZOO_RECURRENT.values()))
    pairs += (list(presets.CLEANRL_V4.values()) + pairs_in(presets.REFERENCES.values())
              + pairs_in(presets.RL_ZOO_RECURRENT.values()))
    values += settings()
    return np.unique(np.asarray(values, dtype=float)), np.asarray(pairs, dtype=float)


# --- the figures of the prose ----------------------------------------------------------------

def prose_lines(text: str):
    """(line number, the line without code, link targets, URLs and images); fenced blocks left out."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith("!["):
            continue
        line = re.sub(r"`[^`]*`", " ", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        yield number, re.sub(r"https?://\S+", " ", line)


class Figure(NamedTuple):
    line: int  # its line number
    text: str  # as written
    value: float
    tolerance: float  # half a unit of the last digit shown
    words: str  # the words around it
    start: int  # where it stands in the line (code spans blanked)
    end: int
    source: str  # that line


def figures(text: str):
    """Every figure of the prose, in order."""
    for number, line in prose_lines(text):
        for m in NUMBER.finditer(line):
            start, end = m.start(), m.end()
            sign = m["sign"]
            if sign and start > 0 and (line[start - 1].isalnum() or line[start - 1] in "_.§#"):
                sign, start = "", start + 1  # a hyphen inside a word or a range (Hopper-v4, 1-3): not a sign
            before, after = line[start - 1] if start else " ", line[end] if end < len(line) else " "
            if before.isalnum() or before in "_.§#" or after.isalnum() or after == "_":
                continue
            if after == "." and line[end + 1:end + 2].isdigit():
                continue  # a dotted version
            digits = m["int"].replace(",", "")
            value = float(digits + (m["frac"] or "")) * (-1 if sign in "-−" and sign else 1)
            left, right = line[:start].rstrip(), line[end:].lstrip()
            next_to = (left[-1:] or " ") + (right[:1] or " ")
            is_figure = m["frac"] or "±" in next_to or after == "×" or abs(value) >= 100
            if not is_figure:
                continue
            if (re.fullmatch(r"\d{4}", m["int"]) and not m["frac"] and 1950 <= value <= 2030
                    and not set(next_to) & set("/±→")):
                continue  # a year
            if m["frac"] and re.search(rf"\b{PACKAGES}(?:\W+\w+){{0,2}}\W*$", left, re.I):
                continue  # a version
            if re.search(r"[γλδεα]\s*[=≤<]?$", left):
                continue  # a hyperparameter setting
            decimals = len(m["frac"]) - 1 if m["frac"] else 0
            words = " ".join(line[:start].split()[-7:] + [line[start:end]] + line[end:].split()[:7])
            yield Figure(number, line[start:end].strip(), value, 0.5 * 10.0 ** -decimals, words, start, end, line)


def allowed(written: str, words: str) -> bool:
    normal = written.replace("−", "-").lstrip("+")
    return any(normal in numbers.split() and re.search(context, words) for numbers, context, _ in ALLOWED)


def unmatched(path: Path) -> list[str]:
    known, pairs = known_values()
    found = list(figures(path.read_text()))
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    def within(figure: Figure, values: np.ndarray) -> np.ndarray:
        return np.abs(values - figure.value) <= figure.tolerance + 1e-9 * max(1.0, abs(figure.value))

    missing, paired = [], set()
    for i, (a, b) in enumerate(zip(found, found[1:], strict=False)):  # "mean ± std" on one line: one known pair
        if a.line == b.line and a.source[a.end:b.start].strip() == "±" and i not in paired:
            paired |= {i, i + 1}
            if not np.any(within(a, pairs[:, 0]) & within(b, pairs[:, 1])):
                missing.append(f"{name}:{a.line}: {a.text} ± {b.text}  ({a.words})")
    for i, figure in enumerate(found):
        if i in paired or np.any(within(figure, known)) or allowed(figure.text, figure.words):
            continue
        missing.append(f"{name}:{figure.line}: {figure.text}  ({figure.words})")
    return missing


@pytest.mark.parametrize("name", PROSE)
def test_every_quoted_figure_comes_from_a_committed_file(name):
    missing = unmatched(ROOT / name)
    assert not missing, (f"{len(missing)} figure(s) in {name} match no committed file (see this test's docstring):\n"
                         + "\n".join(missing))


def test_the_figure_reader_reads_what_it_should():
    found = [(f.text, f.value, f.tolerance) for f in figures(
        "Hopper-v4 at 300k, 1M and 3e-4 (mujoco 2.3.7, Python 3.11, §13.3, #504, 8b5564c, Pardo et al. 2018): "
        "4473 ± 5, 2,382.86, −36.9, 1.33×, 99, 2021 / 1851, γ 0.999, seeds 1-3 `1234.5` [x](a/100.5.md)\n"
        "```\n999.5\n```\n![a](b) 123.4\n")]
    assert found == [("4473", 4473, 0.5), ("5", 5, 0.5), ("2,382.86", 2382.86, 0.005), ("−36.9", -36.9, 0.05),
                     ("1.33", 1.33, 0.005), ("2021", 2021, 0.5), ("1851", 1851, 0.5)]


def test_a_figure_or_a_std_changed_by_hand_goes_red(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "known_values",
                        lambda: (np.array([2081.37, 2540.28]), np.array([[2081.37, 562.46]])))
    page = tmp_path / "notes.md"
    page.write_text("It ends at 2540, and 2081 ± 562.\nIt ends at 2541, and 2081 ± 563 over the last 100 episodes; 1000 steps.\n")
    assert [m.split("  (")[0] for m in unmatched(page)] == [f"{page}:2: 2081 ± 563", f"{page}:2: 2541", f"{page}:2: 1000"]


def test_readme_states_the_side_by_side_verdicts_the_report_computes():
    """README's sentences on CleanRL are report.side_by_side_claims of the committed runs, word for
    word: a run that lands, or a number edited by hand, turns this red until README is rewritten
    (python -c 'import report; ...' in benchmarks/, see report.side_by_side_claims)."""
    claims = report.side_by_side_claims(report.load_results(BENCH / "results"))
    assert claims and claims in " ".join((ROOT / "README.md").read_text().split())


def test_results_md_states_the_side_by_side_section_the_report_computes(tmp_path):
    """RESULTS.md's section "Side by side with CleanRL" is report.side_by_side_section of the
    committed runs, line for line (the figure's path aside): every number in it is the report's.
    Rewrite it with python benchmarks/report.py."""
    section = report.side_by_side_section(report.load_results(BENCH / "results"), tmp_path, tmp_path / "RESULTS.md")
    text = (BENCH / "RESULTS.md").read_text().splitlines()
    start = text.index(section[0])
    committed = text[start:start + len(section)]
    image = [i for i, line in enumerate(section) if line.startswith("![performance profile]")]
    assert image and committed[image[0]] == "![performance profile](results/side-by-side-profile.png)"
    assert [line for i, line in enumerate(committed) if i not in image] == \
        [line for i, line in enumerate(section) if i not in image]
