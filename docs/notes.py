"""The notes beside the code: the teaching that the scripts leave to their pages.

A script keeps short comments (why a line is as it is, its equation once, shapes). The longer
teaching (sources and their exact claims, where the defaults come from, deliberate differences and
their evidence, hedges) is in docs/notes/<script>.md, and its page shows each note beside the code
it explains (tooling.py's are in docs/notes/tooling.md, on tooling.html). A note opens with a
heading `## <anchor>` that names that code:

    ## intro                      the page's introduction, after the module docstring
    ## step                       the step from the file before: in the introduction, and on the
                                  step page under that step
    ## Agent.unroll               a definition (a class, a function, a method), at its `def` line
    ## Args.gamma                 a field of a dataclass, at its line
    ## --- rollout ---            a section banner: its name, or the words before its colon
    ## `nn.LSTM(obs_dim`          the one line of the script that holds this text

Its body is prose in paragraphs, "- " items (continued by lines indented two spaces), and lines
`math: <LaTeX>` set as equations. An anchor that names no line, or a text found on two lines, stops
the build: when the code moves, the note has to move with it.
"""

import ast
import re
from dataclasses import dataclass
from pathlib import Path

NOTES = Path(__file__).resolve().parent / "notes"
HEADING = re.compile(r"^## (.+)$")


@dataclass
class Note:
    anchor: str  # the heading's text
    at: int  # the line of the notes file where the note starts
    body: list[str]
    line: int = 0  # the line of the script it is anchored to; 0 for the introduction (intro, step)


def path_of(name: str) -> Path:
    return NOTES / f"{name}.md"


def parse(text: str) -> list[Note]:
    """The notes of a file, in its order; the text before the first heading is its preface."""
    notes = []
    for number, line in enumerate(text.split("\n"), 1):
        if m := HEADING.match(line):
            notes.append(Note(m[1].strip(), number, []))
        elif notes:
            notes[-1].body.append(line.rstrip())
    for note in notes:
        while note.body and not note.body[-1]:
            note.body.pop()
        while note.body and not note.body[0]:
            note.body.pop(0)
    return notes


def definitions(tree: ast.AST) -> dict[str, int]:
    """Dotted name -> line of each class, function, method and dataclass field."""
    found = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                found.setdefault(prefix + child.name, child.lineno)
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name) and prefix:
                found.setdefault(prefix + child.target.id, child.lineno)

    walk(tree, "")
    return found


def resolve(anchor: str, source: str) -> int:
    """The line of `source` that `anchor` names (0 for the introduction); ValueError if none or
    several do."""
    lines = source.split("\n")
    if anchor in ("intro", "step"):
        return 0
    if anchor.startswith("`") and anchor.endswith("`") and len(anchor) > 2:
        text = anchor[1:-1]
        found = [n for n, line in enumerate(lines, 1) if text in line]
        if len(found) != 1:
            raise ValueError(f"the text {text!r} is on {len(found)} lines, not one"
                             + (f" ({', '.join(map(str, found))})" if found else ""))
        return found[0]
    if anchor.startswith("--- ") and anchor.endswith(" ---"):
        banner = anchor[4:-4]  # its name, or the words before its colon, as the pseudocode's links
        found = [n for n, line in enumerate(lines, 1) if (m := re.match(r"\s*# --- (.*) ---$", line))
                 and (m[1] == banner or m[1].startswith(banner + ":"))]
        if len(found) != 1:
            raise ValueError(f"{len(found)} banners, not one, start '# --- {banner}'")
        return found[0]
    found = definitions(ast.parse(source)).get(anchor)
    if found is None:
        raise ValueError(f"no definition or field is named {anchor}")
    return found


def load(name: str, source: str) -> list[Note]:
    """The notes of script `name`, each with the line it is anchored to in `source`. A script
    without a notes file has none. An anchor that names no line stops the build."""
    path = path_of(name)
    if not path.exists():
        return []
    notes = parse(path.read_text())
    for note in notes:
        try:
            note.line = resolve(note.anchor, source)
        except ValueError as error:
            raise ValueError(f"{path.relative_to(NOTES.parent.parent)}:{note.at}: the note '## {note.anchor}' "
                             f"names no line of {name}.py: {error}") from error
        if not note.body:
            raise ValueError(f"{path.relative_to(NOTES.parent.parent)}:{note.at}: the note '## {note.anchor}' is empty")
    return notes


def html(note: Note, prose_block, math) -> str:
    """A note as HTML, with the page's own renderers: `prose_block(lines)` for paragraphs and
    items, `math(latex)` for an equation."""
    parts, block = [], []

    def flush():
        if block:
            parts.append(prose_block(block))
            block.clear()

    for line in note.body:
        if line.startswith("math: "):
            flush()
            parts.append(math(line[len("math: "):]))
        elif not line.strip():
            flush()
        else:
            block.append(line)
    flush()
    return f'<div class="note" data-anchor="{note.line}">{"".join(parts)}</div>'
