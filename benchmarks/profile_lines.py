"""Where a script's training time goes, line by line of its `train`, sampled with py-spy.

    pip install py-spy                                       # a sampling profiler, not a dependency
    python benchmarks/profile_lines.py ppo_continuous --env-id HalfCheetah-v4 --total-timesteps 40960
    python benchmarks/profile_lines.py ppo_discrete --env-id CartPole-v1 --total-timesteps 102400 --markdown

The script runs as usual (one torch thread, no evaluation) while py-spy samples its stack 250
times a second without pausing it. Each sample is charged to the line of `train` that was running,
including everything that line called (the policy, the env, the normaliser, torch), and to the
helper of the script that was innermost. Samples outside `train`'s loop (imports, building the
envs and networks) are left out, so the figures are per environment step of the loop itself:
microseconds per step = samples of the line / rate / steps. The sampling adds a few percent to
the run and the counts carry sampling noise of about √n, so lines under 1% are only a hint.
"""

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def loop_lines(script: Path) -> tuple[int, int]:
    """The first and last line of the training loop (the `for iteration` statement) in `train`."""
    tree = ast.parse(script.read_text())
    train = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    loop = next(n for n in ast.walk(train) if isinstance(n, ast.For) and getattr(n.target, "id", "") == "iteration")
    return loop.lineno, loop.end_lineno


def attribute(raw_lines: list[str], script_name: str, loop: tuple[int, int]) -> tuple[Counter, Counter, int]:
    """From py-spy's raw output (one `frame;frame;... count` per line): samples per line of the
    loop in `train` (inclusive of callees), samples per innermost function of the script, and
    the loop's total."""
    by_line, by_helper, total = Counter(), Counter(), 0
    for raw in raw_lines:
        stack, _, count = raw.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        frames = [FRAME.match(f) for f in stack.split(";")]
        ours = [f for f in frames if f and os.path.basename(f["file"]) == script_name]
        in_train = [f for f in ours if f["func"] == "train"]
        if not in_train or not loop[0] <= int(in_train[-1]["line"]) <= loop[1]:
            continue
        total += int(count)
        by_line[int(in_train[-1]["line"])] += int(count)
        by_helper[ours[-1]["func"]] += int(count)
    return by_line, by_helper, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", choices=["ppo_continuous", "ppo_discrete", "vpg", "reinforce"])
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--top", type=int, default=25, help="lines to show")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args, flags = parser.parse_known_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(py_spy):
        sys.exit("profile_lines.py: error: py-spy not found: pip install py-spy")
    script = ROOT / f"{args.script}.py"
    steps = int(flags[flags.index("--total-timesteps") + 1]) if "--total-timesteps" in flags else None
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.txt"
        cmd = [py_spy, "record", "--rate", str(args.rate), "--nonblocking", "--format", "raw", "-o", str(raw), "--",
               sys.executable, str(script), "--eval-episodes", "0", "--log-dir", tmp, *flags]
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        by_line, by_helper, total = attribute(raw.read_text().splitlines(), script.name, loop_lines(script))
    source = script.read_text().splitlines()
    per_step = (lambda n: f"{n / args.rate / steps * 1e6:.1f}") if steps else (lambda n: "")
    print(f"`python {script.name} {' '.join(flags)}`: {total} samples in the training loop at {args.rate} Hz"
          + (f", {total / args.rate / steps * 1e6:.0f} µs per env step" if steps else ""))
    header = "| line | code | µs per step | share |\n|---|---|---|---|" if args.markdown else ""
    print(header)
    for line, n in by_line.most_common(args.top):
        code = source[line - 1].strip()
        if args.markdown:
            print(f"| {line} | `{code[:70]}` | {per_step(n)} | {n / total:.1%} |")
        else:
            print(f"{line:5d} {n / total:6.1%} {per_step(n):>8} {code[:90]}")
    print("\n| innermost function of the script | µs per step | share |\n|---|---|---|" if args.markdown else "")
    for func, n in by_helper.most_common():
        print(f"| `{func}` | {per_step(n)} | {n / total:.1%} |" if args.markdown else f"{n / total:6.1%} {func}")


if __name__ == "__main__":
    main()
