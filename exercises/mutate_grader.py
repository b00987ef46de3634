"""Mutation testing of the grader: does it fail every wrong solution that changes what the code does?

    python exercises/mutate_grader.py                  # every exercise; prints each mutant, then the scores
    python exercises/mutate_grader.py --exercise 11    # one exercise
    python exercises/mutate_grader.py --list           # the mutants, without running them
    python exercises/mutate_grader.py --kind move      # only the statements moved across a loop
    python exercises/mutate_grader.py --survivors-of mutants.log   # again, what an earlier run missed

Each mutant changes one line of an exercise's reference solution (the code that exercises/make.py
cuts out of the student's copy) in one plausible way: the line deleted, an operator or operand
swapped (tests/mutate.py's OPERATORS), or an index off by one. Or it moves one statement across a
loop of that code: out of the loop's body (to just before the loop, or just after it), or into it
(the statement just before the loop to the start of its body, the one just after to its end).
The grader then grades the scripts with that mutant in place, for that exercise alone, without
the learning run. A mutant that fails a check is caught.

A mutant that passes the grader is tried against the project's own tests of that script
(tests/mutate.py's worker: the fast tests and the exact gradients, on inputs they draw themselves).
If one of them fails, the mutant changes behaviour and the grader missed it: a gap, listed. If
none fails, neither the grader nor the tests tell the mutant from the reference: it is listed as
possibly equivalent, and tests/README.md gives the reason for each. Not part of CI (tens of minutes
on two cores).
"""

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import make  # noqa: E402
import mutate  # noqa: E402  (tests/mutate.py)
from ladder import LADDER, SCRIPTS  # noqa: E402

INDEX = [(r"\[t\]", "[t - 1]"), (r"\[t \+ 1\]", "[t]"), (r"\[t - 1\]", "[t]"), (r"\[begin\]", "[begin - 1]"),
         (r"\[0\]", "[1]"), (r"\[-1\]", "[0]")]


def single_line_statements(tree: ast.AST, start: int, end: int) -> dict[int, bool]:
    """Line -> whether it is a simple statement (deletable), for the statements of lines
    start..end that fit on one line; and each line of a simple statement or return that spans
    several (not deletable: its operators are changed, as the clipfrac line of a stats dict)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and start <= node.lineno == node.end_lineno <= end:
            simple = not isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef,
                                           ast.ClassDef, ast.Return))
            found[node.lineno] = found.get(node.lineno, True) and simple
    for node in ast.walk(tree):
        if (isinstance(node, (*SIMPLE_STATEMENTS, ast.Return)) and node.lineno < node.end_lineno
                and start <= node.lineno and node.end_lineno <= end):
            for n in range(node.lineno, node.end_lineno + 1):
                found.setdefault(n, False)
    return found


SIMPLE_STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)


def moves(lines: list[str], tree: ast.AST, start: int, end: int) -> list[tuple[tuple[int, int], str, str]]:
    """((first, last line), what moved where, the lines after the move) of each one-line statement moved
    across a loop that lies within lines start..end: out of the loop's body, to just before the
    loop or just after it, or into it, from just before the loop to its first line or from just
    after the loop to its last."""
    def told(stmt: ast.stmt, where: str, loop: ast.stmt) -> str:
        return f"`{lines[stmt.lineno - 1].strip()}` moved {where} the loop of line {loop.lineno}"

    def line(stmt: ast.stmt, indent: str) -> list[str]:
        return [indent + lines[stmt.lineno - 1].lstrip()]

    def indent_of(n: int) -> str:
        return lines[n - 1][:len(lines[n - 1]) - len(lines[n - 1].lstrip())]

    def movable(stmt: ast.stmt) -> bool:
        return isinstance(stmt, SIMPLE_STATEMENTS) and stmt.lineno == stmt.end_lineno and start <= stmt.lineno <= end

    out = []
    for node in ast.walk(tree):
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if not isinstance(body, list):
                continue
            for i, loop in enumerate(body):
                inside_the_code = start <= loop.lineno <= loop.end_lineno <= end
                if not isinstance(loop, (ast.For, ast.While)) or loop.orelse or not inside_the_code:
                    continue
                outside, inside, first = indent_of(loop.lineno), indent_of(loop.body[0].lineno), loop.body[0].lineno
                for stmt in (s for s in loop.body if movable(s)):
                    n = stmt.lineno  # out: before the loop, then after it
                    out.append(((loop.lineno, n), told(stmt, "out of, before,", loop),
                                line(stmt, outside) + lines[loop.lineno - 1:n - 1]))
                    out.append(((n, loop.end_lineno), told(stmt, "out of, after,", loop),
                                lines[n:loop.end_lineno] + line(stmt, outside)))
                if i > 0 and movable(body[i - 1]):  # in: the statement before the loop, to its first line
                    before = body[i - 1].lineno
                    out.append(((before, first - 1), told(body[i - 1], "into the start of", loop),
                                lines[before:first - 1] + line(body[i - 1], inside)))
                if i + 1 < len(body) and movable(body[i + 1]):  # the statement after it, to its last line
                    after = body[i + 1].lineno
                    out.append(((loop.end_lineno + 1, after), told(body[i + 1], "into the end of", loop),
                                line(body[i + 1], inside) + lines[loop.end_lineno:after - 1]))
    return [(span, what, "\n".join(new)) for span, what, new in out]


def mutants(number: int, kinds: tuple[str, ...] = ("line", "move")) -> list[tuple[str, int | tuple[int, int], str, str]]:
    """(script, line or (first, last line), the original line or what moved where, the new text)
    of every mutant of exercise `number`: of one line ("line"), or a statement moved across a loop
    ("move")."""
    out = []
    for part in next(ex for ex in LADDER if ex.number == number).parts:
        source = (ROOT / f"{part.script}.py").read_text()
        lines, tree = source.splitlines(), ast.parse(source)
        start, end, _ = make.region(lines, make.find(tree, part.name), part.branch, part.block)
        if "move" in kinds:
            for span, what, moved in moves(lines, tree, start, end):
                new = "\n".join(lines[:span[0] - 1] + [moved] + lines[span[1]:])
                try:
                    if ast.dump(ast.parse(new)) != ast.dump(tree):
                        out.append((part.script, span, what, moved))
                except SyntaxError:
                    continue
        if "line" not in kinds:
            continue
        for n, deletable in sorted(single_line_statements(tree, start, end).items()):
            line = lines[n - 1]
            code, comment = mutate.code_part(line), line[len(mutate.code_part(line)):]
            indent = code[:len(code) - len(code.lstrip())]
            candidates = [indent + "pass"] if deletable else []
            for pattern, replacement in mutate.OPERATORS + INDEX:
                for match in re.finditer(pattern, code):
                    candidates.append(code[:match.start()] + re.sub(pattern, replacement, match.group(0))
                                      + code[match.end():] + comment)
            for mutated in dict.fromkeys(candidates):
                new = "\n".join(lines[:n - 1] + [mutated] + lines[n:])
                try:
                    if ast.dump(ast.parse(new)) == ast.dump(tree):
                        continue
                except SyntaxError:
                    continue
                out.append((part.script, n, line, mutated))
    return out


def worker() -> None:
    """In a scratch copy of the repository: read one mutant a line (JSON: exercise, script, line,
    new line), grade the six scripts with it in place, and answer whether the grader failed it and
    its first ✗ line."""
    import grade

    answer = sys.stdout
    student = Path("student")
    student.mkdir(exist_ok=True)
    for name in SCRIPTS:
        shutil.copy(f"{name}.py", student / f"{name}.py")
    for request in sys.stdin:
        number, script, n, new = json.loads(request)
        original = Path(f"{script}.py").read_text()
        lines = original.splitlines()
        first, last = n if isinstance(n, list) else (n, n)  # a move replaces lines first..last
        lines[first - 1:last] = [new]
        (student / f"{script}.py").write_text("\n".join(lines) + "\n")
        printed = []
        sys.stdout = open(os.devnull, "w")
        try:
            passed = grade.grade(student, [number], learning=False, out=printed.append)[number]
        except Exception as error:  # the grader itself broke on the mutant: it did not pass
            passed, printed = False, [f"✗ the grader raised {type(error).__name__}: {error}"]
        finally:
            sys.stdout.close()
            sys.stdout = answer
            (student / f"{script}.py").write_text(original)
        first = next((line.strip() for line in printed if "✗" in line), "")
        answer.write(json.dumps([not passed, first]) + "\n")
        answer.flush()


class Grader(mutate.Worker):
    """The grading worker, restarted when a mutant runs past the time limit (an endless loop)."""

    def ask(self, number: int, script: str, n: int, new: str, timeout: float) -> tuple[bool, str]:
        import queue
        import threading

        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, str(self.work / "exercises" / "mutate_grader.py"), "--worker"],
                                         cwd=self.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONWARNINGS="ignore"))
            self.answers = queue.Queue()
            threading.Thread(target=lambda out: [self.answers.put(line) for line in out], args=(self.proc.stdout,),
                             daemon=True).start()
        self.proc.stdin.write(json.dumps([number, script, n, new]) + "\n")
        self.proc.stdin.flush()
        try:
            return tuple(json.loads(self.answers.get(timeout=timeout)))
        except queue.Empty:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return True, "timeout"


def where(n: int | tuple[int, int]) -> str:
    """A line number, or a move's lines as "first-last"."""
    return f"{n[0]}-{n[1]}" if isinstance(n, tuple) else str(n)


def shown(n: int | tuple[int, int], old: str, new: str, listing: bool = False) -> str:
    """A mutant in one line of the output: the new line (after the old with `listing`), or what moved."""
    if isinstance(n, tuple):
        return old
    return f"{old.strip()}  ->  {new.strip()}" if listing else f"`{new.strip()}`"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", type=int, action="append", help="only these exercises (repeat the flag)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--kind", choices=["line", "move"], action="append",
                        help="only these kinds of mutant: one line changed, or a statement moved across a loop")
    parser.add_argument("--survivors-of", type=Path, metavar="LOG",
                        help="only the mutants an earlier output of this tool did not catch (after new checks)")
    parser.add_argument("--not-in", type=Path, metavar="LIST",
                        help="only the mutants that an earlier --list output does not hold (new operators' mutants)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for one mutant's grading or tests")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
    numbers = args.exercise or [ex.number for ex in LADDER]
    every = [(number, *m) for number in numbers for m in mutants(number, tuple(args.kind or ("line", "move")))]
    if args.survivors_of:  # a mutant is known by its exercise, place and text, as the output prints it
        survived = {line.split("  MISSED")[0].split("  not caught")[0].split("] ", 1)[1]
                    for line in args.survivors_of.read_text().splitlines()
                    if line.startswith("[") and ("  MISSED" in line or "  not caught" in line)}
        every = [m for m in every if f"exercise {m[0]}: {m[1]}.py:{where(m[2])}: {shown(m[2], m[3], m[4])}" in survived]
    if args.not_in:
        listed = set(args.not_in.read_text().splitlines())
        every = [m for m in every
                 if f"exercise {m[0]}: {m[1]}.py:{where(m[2])}: {shown(m[2], m[3], m[4], listing=True)}" not in listed]
    if args.list:
        for number, script, n, old, new in every:
            print(f"exercise {number}: {script}.py:{where(n)}: {shown(n, old, new, listing=True)}")
        return print(f"{len(every)} mutants")
    scores = {number: [0, 0, [], []] for number in numbers}  # mutants, caught, gaps, possibly equivalent
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".git", ".venv", "results", "docs", "runs",
                                                                  "student"))
        grader, tests, start = Grader(work), mutate.Worker(work), time.time()
        for i, (number, script, n, old, new) in enumerate(every, 1):
            caught, why = grader.ask(number, script, n, new, args.timeout)
            score = scores[number]
            score[0] += 1
            if caught:
                score[1] += 1
                status = f"caught: {why[:100]}"
            else:
                differs, by = tests.ask(script, n, new, args.timeout)
                (score[2] if differs else score[3]).append(f"{script}.py:{where(n)}: {shown(n, old, new)}"
                                                           + (f" (the project's {by})" if differs else ""))
                status = f"MISSED (the project's tests: {by})" if differs else "not caught, and no test tells it apart"
            print(f"[{i}/{len(every)}] exercise {number}: {script}.py:{where(n)}: {shown(n, old, new)}  {status} "
                  f"({(time.time() - start) / 60:.0f} min)", flush=True)
    print("\n| exercise | mutants | caught by the grader | missed (behaviour differs) | not told apart by any test |")
    print("|---|---|---|---|---|")
    for number, (count, caught, gaps, same) in scores.items():
        print(f"| {number} | {count} | {caught} | {len(gaps)} | {len(same)} |")
    for number, (_, _, gaps, same) in scores.items():
        for kind, listed in (("missed", gaps), ("not told apart", same)):
            for mutant in listed:
                print(f"- exercise {number}, {kind}: {mutant}")


if __name__ == "__main__":
    main()
