"""Write a student copy of the six scripts, with the graded code cut out.

    python exercises/make.py                # writes exercises/student/<script>.py
    python exercises/make.py --out DIR

Each graded function (see ladder.py) keeps its signature, its docstring and its comment lines:
the `# math:` lines, which are the specification, and the comments that explain the code. The
rest of its body becomes `raise NotImplementedError(...)` with a one-line hint. A graded block of
statements inside a function (the bootstrap in `train`, say) is cut the same way, in place.
Everything else in each file stays byte for byte as in the reference script, so the exercises
never drift from the code they teach.
"""

import argparse
import ast
from pathlib import Path

from ladder import LADDER, SCRIPTS

ROOT = Path(__file__).resolve().parent.parent


def find(tree: ast.Module, name: str) -> ast.FunctionDef:
    """The function or method `name` ("compute_gae", "Agent.get_action", "trpo_step.acceptable")
    of a parsed script."""
    node = tree
    for part in name.split("."):
        node = next(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    return node


def statements(body: list[ast.stmt], path: tuple = ()):
    """Every statement of `body` and of the blocks inside it, each with its path: the (list of
    statements, index) pairs from `body` down to it."""
    for i, node in enumerate(body):
        yield node, (*path, (body, i))
        for inner in [getattr(node, "body", None), getattr(node, "orelse", None), getattr(node, "finalbody", None),
                      *[handler.body for handler in getattr(node, "handlers", [])]]:
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from statements(inner, (*path, (body, i)))


def anchored(lines: list[str], node: ast.AST, anchor: str) -> tuple:
    """The path of the one statement of `node` whose first line holds the text `anchor`."""
    found = {stmt.lineno: path for stmt, path in statements(node.body) if anchor in lines[stmt.lineno - 1]}
    if len(found) != 1:
        raise SystemExit(f"make.py: error: {len(found)} statements of {node.name} begin with a line that holds "
                         f"{anchor!r}; ladder.py's anchor must name one")
    return next(iter(found.values()))


def block(lines: list[str], node: ast.AST, anchors: tuple[str, ...]) -> list[ast.stmt]:
    """The statements that `anchors` name (see ladder.py): from the first anchor's to the last's,
    in the innermost list of statements that holds both."""
    first, last = anchored(lines, node, anchors[0]), anchored(lines, node, anchors[-1])
    depth = 0
    while depth + 1 < min(len(first), len(last)) and first[depth][1] == last[depth][1] \
            and first[depth + 1][0] is last[depth + 1][0]:
        depth += 1
    (body, i), (_, j) = first[depth], last[depth]
    if i > j:
        raise SystemExit(f"make.py: error: in {node.name}, {anchors[-1]!r} comes before {anchors[0]!r}")
    return body[i:j + 1]


def region(lines: list[str], node: ast.AST, branch: str | None, anchors: tuple[str, ...] | None = None
           ) -> tuple[int, int, str]:
    """(first line, last line, indentation) of the code to cut. It is a function's body after its
    docstring, or one head of a method that holds both, or the block of statements that `anchors`
    name. The head "if" is the body of its `if self.continuous:`, and "else" the statements after
    that block. Each head is cut without its closing `return`, which stays. Lines are 1-based.
    Comment lines just above the first statement belong to it."""
    if anchors is not None:
        body = block(lines, node, anchors)
        start = body[0].lineno
        while lines[start - 2].strip().startswith("#"):
            start -= 1
    elif branch is None:
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


def cut(lines: list[str], tree: ast.Module, number: int, hint: str, part) -> tuple[int, int, list[str]]:
    """(first line, last line, the lines that replace them) of one part: its comment lines, whole
    and as they were, then `raise NotImplementedError("exercise N: <hint>")`."""
    start, end, indent = region(lines, find(tree, part.name), part.branch, part.block)
    kept = [line for line in lines[start - 1:end] if line.strip().startswith("#")]
    message = f"exercise {number}: {hint}".replace('"', "'")
    return start, end, kept + [f'{indent}raise NotImplementedError("{message}")']


def blank(source: str, parts: list[tuple[int, str, object]]) -> str:
    """The source with each (exercise number, hint, part) cut out."""
    lines = source.split("\n")
    tree = ast.parse(source)
    cuts = [cut(lines, tree, number, hint, part) for number, hint, part in parts]
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
