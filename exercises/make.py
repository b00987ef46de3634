"""Write a student copy of the five scripts, with the graded code cut out.

    python exercises/make.py                # writes exercises/student/<script>.py
    python exercises/make.py --out DIR

Each graded function (see ladder.py) keeps its signature, its docstring and its `# math:` lines,
which are the specification; the rest of its body becomes `raise NotImplementedError(...)` with a
one-line hint. Everything else in each file stays byte for byte as in the reference script, so
the exercises never drift from the code they teach.
"""

import argparse
import ast
from pathlib import Path

from ladder import LADDER, SCRIPTS

ROOT = Path(__file__).resolve().parent.parent


def find(tree: ast.Module, name: str) -> ast.FunctionDef:
    """The function or method `name` ("compute_gae", "Agent.get_action") of a parsed script."""
    node = tree
    for part in name.split("."):
        node = next(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    return node


def region(lines: list[str], node: ast.AST, branch: str | None) -> tuple[int, int, str]:
    """(first line, last line, indentation) of the code to cut: a function's body after its
    docstring, or one head of a method that holds both: "if" is the body of its `if
    self.continuous:`, "else" the statements after that block; each without its closing
    `return`, which stays. Lines are 1-based; comment lines just above the first statement
    belong to it."""
    if branch is None:
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        start = node.body[0].end_lineno + 1 if ast.get_docstring(node) is not None else body[0].lineno
        if ast.get_docstring(node) is None:
            while lines[start - 2].strip().startswith("#"):
                start -= 1
    else:
        test = next(n for n in node.body if isinstance(n, ast.If) and ast.unparse(n.test) == "self.continuous")
        body = test.body[:-1] if branch == "if" else node.body[node.body.index(test) + 1:-1]
        start = body[0].lineno
        while lines[start - 2].strip().startswith("#"):
            start -= 1
    indent = lines[body[0].lineno - 1][: len(lines[body[0].lineno - 1]) - len(lines[body[0].lineno - 1].lstrip())]
    return start, body[-1].end_lineno, indent


def blank(source: str, parts: list[tuple[int, str, object]]) -> str:
    """The source with each (exercise number, hint, part) cut out."""
    lines = source.split("\n")
    tree = ast.parse(source)
    cuts = []
    for number, hint, part in parts:
        start, end, indent = region(lines, find(tree, part.name), part.branch)
        kept = [line for line in lines[start - 1:end] if line.strip().startswith("# math:")]
        message = f"exercise {number}: {hint}".replace('"', "'")
        cuts.append((start, end, kept + [f'{indent}raise NotImplementedError("{message}")']))
    for start, end, new in sorted(cuts, reverse=True):  # from the bottom up, so line numbers hold
        lines[start - 1:end] = new
    return "\n".join(lines)


def parts_of(script: str) -> list[tuple[int, str, object]]:
    return [(ex.number, ex.hint, part) for ex in LADDER for part in ex.parts if part.script == script]


def make(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for script in SCRIPTS:
        path = out / f"{script}.py"
        path.write_text(blank((ROOT / f"{script}.py").read_text(), parts_of(script)))
        written.append(path)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "student",
                        help="folder for the student's copy (default: exercises/student)")
    args = parser.parse_args()
    if any((args.out / f"{s}.py").exists() for s in SCRIPTS):
        raise SystemExit(f"make.py: error: {args.out} already holds a copy; move it away first (your work is in it)")
    for path in make(args.out):
        print(f"wrote {path}")
    print(f"now open {args.out}/reinforce.py and grade it with: python exercises/grade.py {args.out} --exercise 1")
