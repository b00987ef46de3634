"""Where a script's training time goes, line by line of its `train`.

    python benchmarks/profile_lines.py ppo_continuous --env-id HalfCheetah-v4 --total-timesteps 40960
    python benchmarks/profile_lines.py ppo_discrete --env-id CartPole-v1 --total-timesteps 102400 --markdown
    python benchmarks/profile_lines.py ppo_continuous --method py-spy ...   # pip install py-spy

Two ways to measure, the same table either way (microseconds per environment step of the loop,
each line with everything it calls: the policy, the env, the normaliser, torch):

- `timer` (the default): the script's `train` is compiled with a clock read before and after
  every simple statement inside its training loop (the `for iteration` loop), and the expression
  of every `if` and `for` header there; the run itself is otherwise unchanged (one torch thread,
  no evaluation). Exact per line, at a cost of two clock reads per statement (about 1% of a step
  here); what the table leaves out of the loop's total is the loops' own iteration and the clock
  reads.
- `py-spy`: py-spy samples the unchanged script 250 times a second without pausing it, and each
  sample is charged to the running line of the loop and to the script's innermost function.
  Sampling a running process misreads fast-changing stacks: here it lost about a fifth of the
  loop's time, most of it inside the vector env's step, and charged some to the wrong lines
  (benchmarks/speed_notes.md). Pausing the process for each sample (py-spy's default, not used)
  fixes that but slows the run by about a tenth. Kept for its second table, by innermost function.
"""
import argparse
import ast
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def loop_lines(script: Path) -> tuple[int, int]:
    """The first and last line of the training loop (the `for iteration` statement) in `train`."""
    tree = ast.parse(script.read_text())
    train = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    loop = next(n for n in ast.walk(train) if isinstance(n, ast.For) and getattr(n.target, "id", "") == "iteration")
    return loop.lineno, loop.end_lineno


def instrument(tree: ast.Module, loop: tuple[int, int]) -> ast.Module:
    """`tree` with a clock around every simple statement, `if` test and `for` iterable inside the
    training loop of `train` (lines `loop`), adding nanoseconds to `_line_ns[line]`, and the
    whole loop's time to `_line_ns[0]`. Statements that leave their block (break, continue,
    return, raise) are not timed: their second clock read would never run."""

    def timed(line: int, *body: ast.stmt) -> list[ast.stmt]:
        start = ast.parse(f"_t{line} = _clock()").body  # a name per line: line 0 encloses the rest
        stop = ast.parse(f"_line_ns[{line}] += _clock() - _t{line}").body
        return [*start, *body, *stop]

    def timed_block(stmts: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for stmt in stmts:
            if isinstance(stmt, (ast.Break, ast.Continue, ast.Return, ast.Raise)):
                out.append(stmt)
                continue
            time_nested_blocks(stmt)
            if isinstance(stmt, (ast.If, ast.For)):  # time the test or the iterable, once
                field = "test" if isinstance(stmt, ast.If) else "iter"
                name = f"_{field}_{stmt.lineno}"
                assign = ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], getattr(stmt, field)), stmt)
                out += timed(stmt.lineno, assign)
                setattr(stmt, field, ast.Name(name, ast.Load()))
                out.append(stmt)
            elif isinstance(stmt, (ast.With, ast.While, ast.Try)):
                out.append(stmt)  # its header is left untimed
            else:
                out += timed(stmt.lineno, stmt)
        return out

    def time_nested_blocks(node: ast.stmt) -> None:
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(node, field, None), list):
                setattr(node, field, timed_block(getattr(node, field)))
        for handler in getattr(node, "handlers", []):
            handler.body = timed_block(handler.body)

    train = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    index, outer = next((i, n) for i, n in enumerate(train.body) if n.lineno == loop[0])
    time_nested_blocks(outer)
    train.body[index:index + 1] = timed(0, outer)
    return ast.fix_missing_locations(tree)


def time_lines(script: Path, flags: list[str]) -> tuple[dict[int, int], int]:
    """Run `train` of `script` with the command-line flags `flags`, every line of its loop timed
    (see `instrument`): nanoseconds per line and the number of env steps the run took."""
    import tyro

    sys.path.insert(0, str(script.parent))
    tree = instrument(ast.parse(script.read_text()), loop_lines(script))
    module = {"__name__": "profiled_" + script.stem, "__file__": str(script),
              "_clock": time.perf_counter_ns, "_line_ns": defaultdict(int)}
    exec(compile(tree, str(script), "exec"), module)
    with tempfile.TemporaryDirectory() as log_dir, contextlib.redirect_stdout(io.StringIO()):
        args = tyro.cli(module["Args"], args=[*flags, "--eval-episodes", "0", "--log-dir", log_dir])
        summary = module["train"](args)  # its progress lines go nowhere
    return dict(module["_line_ns"]), summary["global_step"]


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
    parser.add_argument("--method", choices=["timer", "py-spy"], default="timer", help="see the module's docstring")
    parser.add_argument("--rate", type=int, default=250, help="py-spy: samples per second")
    parser.add_argument("--top", type=int, default=25, help="lines to show")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args, flags = parser.parse_known_args()
    script = ROOT / f"{args.script}.py"
    source = script.read_text().splitlines()
    if args.method == "timer":
        line_ns, steps = time_lines(script, flags)
        total = line_ns.pop(0)
        by_line, by_helper = Counter(line_ns), Counter()
        by_line[None] = total - sum(line_ns.values())  # the loops' own iteration and the clock reads
        per_step = lambda n: f"{n / 1e3 / steps:.1f}"  # noqa: E731
        summary = f"{total / 1e9:.1f} s in the training loop, {total / 1e3 / steps:.0f} µs per env step, timed per line"
    else:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not os.path.exists(py_spy):
            sys.exit("profile_lines.py: error: py-spy not found: pip install py-spy")
        steps = int(flags[flags.index("--total-timesteps") + 1]) if "--total-timesteps" in flags else None
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "raw.txt"
            cmd = [py_spy, "record", "--rate", str(args.rate), "--nonblocking", "--format", "raw", "-o", str(raw),
                   "--", sys.executable, str(script), "--eval-episodes", "0", "--log-dir", tmp, *flags]
            subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
            by_line, by_helper, total = attribute(raw.read_text().splitlines(), script.name, loop_lines(script))
        per_step = (lambda n: f"{n / args.rate / steps * 1e6:.1f}") if steps else (lambda n: "")  # noqa: E731
        summary = (f"{total} samples in the training loop at {args.rate} Hz"
                   + (f", {total / args.rate / steps * 1e6:.0f} µs per env step" if steps else ""))
    print(f"`python {script.name} {' '.join(flags)}`: {summary}")
    print("| line | code | µs per step | share |\n|---|---|---|---|" if args.markdown else "")
    for line, n in by_line.most_common(args.top):
        code = "(loop overhead: iterating, the clock reads)" if line is None else source[line - 1].strip()
        if args.markdown:
            print(f"| {line or ''} | `{code[:70]}` | {per_step(n)} | {n / total:.1%} |")
        else:
            print(f"{line or '':>5} {n / total:6.1%} {per_step(n):>8} {code[:90]}")
    if by_helper:
        print("\n| innermost function of the script | µs per step | share |\n|---|---|---|" if args.markdown else "")
        for func, n in by_helper.most_common():
            print(f"| `{func}` | {per_step(n)} | {n / total:.1%} |" if args.markdown else f"{n / total:6.1%} {func}")


if __name__ == "__main__":
    main()
