"""Mutation testing of the formula lines: does some test fail when a formula is made wrong?

    python tests/mutate.py                       # every script; prints each survivor, then the score
    python tests/mutate.py --only trpo --list    # the mutants of trpo.py, without running them

A formula line is a line of code under a `# math:` comment (up to the next blank or comment line),
a line of the small math functions (GAE, the returns, the losses, the KL, conjugate gradient, the
normalisers), or one of the FORMULAS lines named below. Each mutant changes one of them in one
plausible way: an operator (+ −, * /, ** ·), a comparison, a swapped name (terminations and
truncations, mean and sum, γ or λ replaced by 1), a dropped 1 − or minus sign, a number, a
shifted slice, a two-sided test or bound made one-sided (an `abs` dropped, a clamp's bound).
The mutant runs in a scratch copy of the repository against the fast tests (FAST_TESTS, stopping
at the first failure); it is killed if a test fails, survives if all pass.
Not part of CI (it takes about an hour on two cores); tests/README.md gives the last score and
explains every survivor.
"""

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ["reinforce", "vpg", "trpo", "ppo_discrete", "ppo_continuous"]
FAST_TESTS = ["tests/test_math.py", "tests/test_reinforce_vpg.py", "tests/test_trpo.py", "tests/test_truncation.py",
              "tests/test_rollout_storage.py", "tests/test_ppo_continuous.py", "tests/test_ppo_discrete.py",
              "tests/test_guard_rails.py"]
# The exact-gradient checks take seconds each: a mutant of a script runs only those of that script.
EXACT = [f"test_loss_gradient_is_the_policy_gradient[{case}]"
         for case in ("reinforce", "vpg-lambda1", "vpg-lambda0.8", "trpo", "ppo_discrete")]
EXACT += [f"test_gaussian_loss_gradient_is_the_policy_gradient[{script}]"
          for script in ("reinforce", "vpg", "trpo", "ppo_continuous")]
MATH_FUNCTIONS = {"compute_gae", "compute_returns", "ppo_loss", "reinforce_loss", "vpg_loss", "value_loss",
                  "surrogate", "mean_kl", "fisher_vector_product", "conjugate_gradient", "flat_grad", "update",
                  "normalize_obs", "scale"}
# Formula lines of train() that carry no `# math:` comment: the bootstrap after a truncation, the
# critic's targets, the advantage normalisations, the KL estimate. Matched by their text.
FORMULAS = [r"next_values = torch\.cat", r"next_values = torch\.where", r"final_values_np\[step, idx\] =",
            r"terminal = \(terminations", r"else torch\.maximum\(terminations", r"_, returns = compute_gae",
            r"args\.gamma, 1\.0\)", r"b_advantages = \(b_advantages - ", r"mb_advantages = \(\(mb_advantages - ",
            r"/ \(mb_advantages\.std\(\) \+ 1e-8\)\)",
            r"mb_mean, mb_std = ", r"b_returns = \(b_returns - ", r"approx_kl = ", r"logratio = ", r"advantages, _ = compute_gae",
            r"advantages, returns = compute_gae", r"args\.gamma, args\.gae_lambda\)"]

# (pattern, replacement): each match of a pattern in the code part of a line is one mutant.
OPERATORS = [
    (r" \+ ", " - "), (r" - ", " + "), (r" \* ", " / "), (r" / ", " * "), (r"\*\*", "*"),
    (r"<=", "<"), (r">=", ">"), (r"(?<![<>=!])<(?!=)", "<="), (r"(?<![<>=!-])>(?!=)", ">="), (r"==", "!="),
    (r"\bterminations\b", "truncations"), (r"\btruncations\b", "terminations"),
    (r"\bterminated\b", "truncated"), (r"\btruncated\b", "terminated"),
    (r"\.mean\(", ".sum("), (r"\.sum\(", ".mean("), (r"\bmaximum\b", "minimum"), (r"\bmin\(", "max("),
    (r"\bmax\(", "min("), (r"\.std\(\)", ""), (r"\.exp\(\)", ""), (r"\.log\(\)", ""), (r"\.detach\(\)", ""),
    (r"\b(args\.)?gamma\b(?!\s*[=:])", "1.0"), (r"\b(args\.)?gae_lambda\b(?!\s*[=:])", "1.0"),
    (r"\(1\.0 - ", "("), (r"\(1 - ", "("), (r"return -\(", "return ("), (r"= -\(", "= ("),
    (r"\[1:\]", "[:-1]"), (r"\[:-1\]", "[1:]"), (r"\bvalues\b", "next_values"), (r"\bnext_values\b", "values"),
    (r"(?<![\w.])0\.5(?![\d.])", "1.0"), (r"(?<![\w.])2(?![\d.])", "1"), (r"(?<![\w.])1e-8(?![\d.])", "1e-2"),
    (r"\bfinal_values\b", "values"), (r"\breturns\b", "advantages"), (r"\badvantages\b", "returns"),
    # A two-sided test or bound made one-sided: |x| > c as x > c, clamp(x, lo, hi) without lo or hi.
    (r"\.abs\(\)", ""), (r"\babs\(", "("), (r"(torch\.clamp\([^,]+, )[^,]+, ", r"\1None, "),
    (r"(torch\.clamp\([^,]+, [^,]+), [^,()]+\)", r"\1)"),
]


def formula_lines(path: Path) -> list[int]:
    """Line numbers (1-based) of the formula lines of a script."""
    source = path.read_text()
    lines = source.splitlines()
    chosen = set()
    for node in ast.walk(ast.parse(source)):  # the math functions, without their docstrings
        if isinstance(node, ast.FunctionDef) and node.name in MATH_FUNCTIONS:
            body = node.body[1:] if ast.get_docstring(node) else node.body
            chosen |= set(range(body[0].lineno, node.end_lineno + 1))
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("# math:"):  # the code under a math block, to the next blank or comment line
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("#"):
                j += 1
            while j < len(lines) and lines[j].strip() and not lines[j].strip().startswith("#"):
                chosen.add(j + 1)
                j += 1
        if any(re.search(p, line) for p in FORMULAS):
            chosen.add(i + 1)
    return sorted(n for n in chosen if lines[n - 1].strip() and not lines[n - 1].strip().startswith("#"))


def code_part(line: str) -> str:
    """The line without its trailing comment (a # inside a string is rare enough in these lines)."""
    return line.split("  #")[0]


def mutants(path: Path) -> list[tuple[int, str, str]]:
    """(line number, original line, mutated line) for every formula line and operator match."""
    lines = path.read_text().splitlines()
    out = []
    for n in formula_lines(path):
        line = lines[n - 1]
        code, comment = code_part(line), line[len(code_part(line)):]
        if re.match(r"\s*(def |return$|\"\"\"|for |with )", code):
            continue
        for pattern, replacement in OPERATORS:
            for match in re.finditer(pattern, code):
                mutated = code[:match.start()] + re.sub(pattern, replacement, match.group(0)) + code[match.end():]
                if mutated == code:
                    continue
                swapped = re.fullmatch(r"[a-z_]+", replacement) and replacement
                if swapped and not re.search(rf"\b{swapped}\b", "\n".join(lines[max(0, n - 40):n + 5])):
                    continue  # a name that does not exist there: a NameError, not a wrong formula
                new_lines = lines[:n - 1] + [mutated + comment] + lines[n:]
                try:
                    if ast.dump(ast.parse("\n".join(new_lines))) == ast.dump(ast.parse("\n".join(lines))):
                        continue
                except SyntaxError:
                    continue
                out.append((n, line, mutated + comment))
    return out


# The test files that pin each script's formulas most directly run first, so that most mutants
# die in seconds; then the rest of FAST_TESTS.
FIRST = {"reinforce": ["tests/test_reinforce_vpg.py"], "vpg": ["tests/test_reinforce_vpg.py", "tests/test_math.py"],
         "trpo": ["tests/test_trpo.py", "tests/test_reinforce_vpg.py", "tests/test_math.py"],
         "ppo_discrete": ["tests/test_math.py", "tests/test_ppo_discrete.py"],
         "ppo_continuous": ["tests/test_ppo_continuous.py", "tests/test_math.py"],
         "ppo_recurrent": ["tests/test_ppo_recurrent.py"]}  # (for exercises/mutate_grader.py)


def worker() -> None:
    """Run in the scratch copy: read one mutant a line (JSON: script, line number, new line) from
    stdin, write it into the script, reload the script's module (the test modules hold the module
    object, so they see the mutant), run the fast tests in this process, put the original back,
    and answer one JSON line: whether a test failed, and which one first. One process for all the
    mutants saves the imports of torch and Gymnasium (seconds each time)."""
    import importlib
    import json
    import linecache

    import pytest

    class FirstFailure:
        def __init__(self):
            self.nodeid = ""

        def pytest_runtest_logreport(self, report):
            if report.failed and not self.nodeid:
                self.nodeid = report.nodeid

    answer = sys.stdout
    for request in sys.stdin:
        script, n, new = json.loads(request)
        path = Path(f"{script}.py")
        original = path.read_text()
        lines = original.splitlines(keepends=True)
        first, last = n if isinstance(n, list) else (n, n)  # exercises/mutate_grader.py's moves span lines
        lines[first - 1:last] = [new + "\n"]
        path.write_text("".join(lines))
        linecache.clearcache()
        first, failed = FirstFailure(), ""
        sys.stdout = open(os.devnull, "w")
        try:
            importlib.reload(importlib.import_module(script))
            tests = (FIRST[script] + [t for t in FAST_TESTS if t not in FIRST[script]]
                     + [f"tests/test_exact_gradient.py::{t}" for t in EXACT if f"[{script}" in t])
            code = pytest.main(["-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-k", "not learns", *tests],
                               plugins=[first])  # -n 0: in this process, not on pytest-xdist's workers
            failed = first.nodeid or ("" if code == 0 else f"pytest exit {int(code)}")
        except Exception as error:  # the mutant does not even import
            failed = f"{type(error).__name__} on import"
        finally:
            sys.stdout.close()
            sys.stdout = answer
            path.write_text(original)
            linecache.clearcache()
            importlib.reload(importlib.import_module(script))
        answer.write(json.dumps([bool(failed), failed]) + "\n")
        answer.flush()


class Worker:
    """The worker process, restarted when a mutant runs past the time limit (an endless loop)."""

    def __init__(self, work: Path):
        self.work, self.proc = work, None

    def ask(self, script: str, n: int, new: str, timeout: float) -> tuple[bool, str]:
        import json
        import queue
        import threading

        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, str(self.work / "tests" / "mutate.py"), "--worker"],
                                         cwd=self.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONWARNINGS="ignore",
                                                                              PYTHONPATH=str(self.work)))
            self.answers = queue.Queue()
            threading.Thread(target=lambda out: [self.answers.put(line) for line in out], args=(self.proc.stdout,),
                             daemon=True).start()
        original = (self.work / f"{script}.py").read_text()
        self.proc.stdin.write(json.dumps([script, n, new]) + "\n")
        self.proc.stdin.flush()
        try:
            return tuple(json.loads(self.answers.get(timeout=timeout)))
        except queue.Empty:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            (self.work / f"{script}.py").write_text(original)  # the worker died before putting it back
            return True, "timeout"


def table(log: str) -> str:
    """Markdown: one row per formula line that has mutants, with the tests that killed them (the
    first failing test of each mutant) and the mutants that survived, from a saved output."""
    rows = {}  # (script, line number) -> (killers, survivors)
    for match in re.finditer(r"^\[\d+/\d+\] (\w+)\.py:(\d+): (.*?)  (killed by (\S+)|SURVIVED)", log, re.M):
        script, n, mutant, _, killer = match.groups()
        killers, survivors = rows.setdefault((script, int(n)), (set(), []))
        if killer:
            killers.add(killer.split("::")[-1].split("[")[0])
        else:
            survivors.append(mutant)
    lines = ["| script | line | formula | mutants | killed by | survived |", "|---|---|---|---|---|---|"]
    for (script, n), (killers, survivors) in sorted(rows.items(), key=lambda kv: (SCRIPTS.index(kv[0][0]), kv[0][1])):
        code = (ROOT / f"{script}.py").read_text().splitlines()[n - 1].split("  #")[0].strip()
        count = len(re.findall(rf"^\[\d+/\d+\] {script}\.py:{n}: ", log, re.M))
        killed_by = ", ".join(f"`{k}`" for k in sorted(killers))
        survived = "<br>".join(f"`{m}`" for m in survivors)
        lines.append(f"| {script} | {n} | `{code}` | {count} | {killed_by} | {survived} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="only the scripts whose name contains this")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for one mutant's tests")
    parser.add_argument("--survivors-of", type=Path, help="run only the mutants a saved output of this command lists as SURVIVED")
    parser.add_argument("--killed-in", type=Path, help="take the mutants a saved output lists as killed as killed (tests only "
                                                      "grow), and run the others")
    parser.add_argument("--table", type=Path, help="print the formula → test table of a saved output of this command")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
    if args.table:
        return print(table(args.table.read_text()))
    scripts = [s for s in SCRIPTS if args.only in s]
    all_mutants = [(s, *m) for s in scripts for m in mutants(ROOT / f"{s}.py")]
    if args.survivors_of:  # matched by script and mutated line, not line number (lines may have moved)
        survived = {re.sub(r"\.py:\d+: ", ".py: ", line.split("  SURVIVED")[0].split("] ", 1)[1])
                    for line in args.survivors_of.read_text().splitlines() if "  SURVIVED" in line}
        all_mutants = [m for m in all_mutants if f"{m[0]}.py: {m[3].strip()}" in survived]
    done = {}  # mutant -> its line of an earlier output, for --killed-in
    if args.killed_in:
        for line in args.killed_in.read_text().splitlines():
            if "  killed by " in line:
                done[re.sub(r"\.py:\d+: ", ".py: ", line.split("  killed by ")[0].split("] ", 1)[1])] = line
    if args.list:
        for script, n, old, new in all_mutants:
            print(f"{script}.py:{n}: {old.strip()}  ->  {new.strip()}")
        print(f"{len(all_mutants)} mutants")
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".git", ".venv", "results", "docs", "runs"))
        runner, killed, start = Worker(work), 0, time.time()
        if all_mutants:  # the unchanged code must pass, or every mutant would look killed
            script, n, old, _ = all_mutants[0]
            dead, by = runner.ask(script, n, old, args.timeout)
            if dead:
                sys.exit(f"mutate.py: the fast tests fail on the unchanged code ({by}); fix that first")
        for i, (script, n, _, new) in enumerate(all_mutants, 1):
            earlier = done.get(f"{script}.py: {new.strip()}")
            if earlier:
                by = earlier.split("  killed by ")[1].rsplit(" (", 1)[0].removesuffix(" (in --killed-in)")
                dead, by = True, by + " (in --killed-in)"
            else:
                dead, by = runner.ask(script, n, new, args.timeout)
            killed += dead
            status = f"killed by {by}" if dead else "SURVIVED"
            print(f"[{i}/{len(all_mutants)}] {script}.py:{n}: {new.strip()}  {status} "
                  f"({(time.time() - start) / 60:.0f} min)", flush=True)
        print(f"score: {killed}/{len(all_mutants)} mutants killed ({100 * killed / max(1, len(all_mutants)):.1f}%)")


if __name__ == "__main__":
    main()
