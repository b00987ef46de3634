"""Render each script as an annotated page: its comments and equations beside the code they explain.

    pip install -r docs/requirements.txt
    python docs/build.py                 # writes docs/<script>.html, tooling.html, the step pages, index.html, derivations.html
    python docs/build.py --out /tmp/docs
    python docs/build.py --screenshots docs   # docs/screenshot-*.png (chromium)

The scripts are read, never changed. A script is cut into sections at each block of whole-line
comments: the block is the section's notes (left), the code up to the next block its code
(right, highlighted by pygments, with the file's line numbers). A `def` or `class` whose body
opens with a comment block starts that block's section, so a definition is never cut from its
body. A comment line `# math: <LaTeX>` becomes a typeset equation (MathML from latex2mathml, which
browsers render natively); a banner `# --- name ---` becomes a heading; other comment lines are
prose, in which short formulas such as V_θ(s_t) are typeset too. A definition's docstring is read
in the notes beside it, as prose with its formulas typeset (the equations indented in it, GAE's δ_t
and A_t, the rewards-to-go, as equations); the code column keeps one line in its place. The notes
beside `Args` list every flag with its meaning, the field's docstring, which the code column leaves
out: the notes never say again what the code column says. The imports are folded away.

A script ends with its algorithm and its `__main__`, which hands the script to tooling.py where
that is importable. tooling.html renders tooling.py as a page of its own, in the same way, with
its notes (docs/notes/tooling.md), and each script page links it. Beside `Args`, a script page
lists the tooling's flags too (tooling.py's `RunFlags`) under a heading of their own, as `--help`
lists both.

The module docstring opens the page. A script's opens with the algorithm's numbered steps (its
pseudocode) in a box, typeset as the notes are. Each name in backquotes there links to the line
that does the step: the `def` of a function, a banner `# --- rollout ---` of `train`, the line of
`train` that reads a flag or assigns a name. A name that stands for no line stops the build.

The code of a definition reads on without a gap, as in the file. Each section's notes start level
with its first line of code, or just below the notes before them where those run longer. A
definition that opens a section of its own starts level with its notes.

Formulas are set in a math font at the prose's size (DejaVu Math TeX Gyre, from Debian's
fonts-dejavu-extra, where it is installed). A script of a script is drawn as large as the first,
and π_θ_old is written π_old, with one subscript. A name in a subscript or superscript (old, new,
clip, CLIP) is upright, as in the prose.

Step pages (reinforce-to-vpg.html, ..., vpg-to-ppo_discrete.html for a reader who skips TRPO, and
ppo_discrete-to-ppo_recurrent.html for the branch off the reading order, BRANCHES)
go step by step through the files in steps/ (SUBSTEPS): each step under the idea, or list of
details, its docstring names, with the algorithm's lines of code it removes or adds (its lines of
comments and docstrings counted apart) and the differences of each of its definitions; then,
once, the differences of everything else (the imports, the lines that name the script and its
spaces, the `__main__`). There a fraction
in a `# math:` line is drawn as large as the code around it. Under the list of steps, a figure
shows the learning curves of the files before and after the step, from committed benchmark runs:
benchmarks/report.py draws it and writes its caption in docs/figures/. derivations.html (docs/derivations.py)
derives the equations beside the lines that compute them, and each `# math:` equation of a script
page links to it.

Pages are self-contained static HTML: no JavaScript, no network. A `# math:` formula that does not
convert, or a link that no longer resolves, stops the build.
"""

import argparse
import ast
import difflib
import html
import io
import itertools
import json
import re
import tokenize
from pathlib import Path

import derivations  # docs/derivations.py: derivations.html, and the links to it beside each `# math:` line
import notes as side_notes  # docs/notes.py: the notes of docs/notes/<script>.md, each beside the line it names
from latex2mathml.converter import convert
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {  # in reading order, then the branches (BRANCHES)
    "reinforce": "REINFORCE: the Monte-Carlo policy gradient, no critic.",
    "vpg": "Vanilla policy gradient: a learned value baseline, GAE-λ advantages, one step per batch.",
    "trpo": "TRPO: a natural-gradient step to the edge of a KL trust region, checked by a line search.",
    "ppo_discrete": "PPO-clip for discrete actions: many minibatch steps per batch on a clipped surrogate.",
    "ppo_continuous": "PPO-clip for continuous control (MuJoCo): a Gaussian policy, observation and reward normalisation.",
    "ppo_recurrent": "PPO with memory: an LSTM policy and critic for partially observed envs such as CartPoleNoVel-v1.",
    "ppo_atari": "PPO from pixels: Atari and MinAtar games through a convolutional encoder of stacked frames.",
}
# A script that branches off the reading order, and the script it changes: read after that one.
BRANCHES = {"ppo_recurrent": "ppo_discrete", "ppo_atari": "ppo_discrete"}
ORDER = [name for name in SCRIPTS if name not in BRANCHES]  # the linear reading order
# tooling.py, which each script hands itself to: a page of its own, rendered as a script's is but
# for the pseudocode, which it has none of
TOOLING = "tooling"
TOOLING_TEXT = ("The tooling, written once for the seven scripts: input checks, run folders, checkpoints and "
                "--resume, guard rails, evaluation and the command line.")
# The sub-steps of a step of the reading order: files in steps/, each of a script's shape (the
# algorithm, then a `__main__`) and changed from the file before it by what its docstring names, in
# a paragraph "What changes from <file before>.py, one idea: <the idea>."
SUBSTEPS = {("reinforce", "vpg"): ["vpg_1_baseline", "vpg_2_rollout", "vpg_2b_truncation", "vpg_3_gae"],
            ("trpo", "ppo_discrete"): ["ppo_1_clip"],
            ("vpg", "ppo_discrete"): ["ppo_1_clip"],
            ("ppo_discrete", "ppo_continuous"): ["ppo_continuous_1_gaussian", "ppo_continuous_1b_reward_scaling",
                                                 "ppo_continuous_2_norm"],
            ("ppo_discrete", "ppo_atari"): ["ppo_atari_1_encoder"]}
# (from, to): the step pages; then one for a reader who skips TRPO, and one for each branch
STEPS = list(itertools.pairwise(ORDER)) + [("vpg", "ppo_discrete")] + [(old, new) for new, old in BRANCHES.items()]
# The step pages' figures and their captions, which benchmarks/report.py makes from the committed
# runs (its STEP_FIGURES): step-<from>-to-<to>.png and steps.json.
FIGURES = ROOT / "docs" / "figures"
# The definitions that make up the algorithm; a step page shows their differences first.
ALGORITHM = ["layer_init", "mlp", "Agent", "compute_returns", "compute_gae", "reinforce_loss", "vpg_loss",
             "surrogate", "mean_kl", "flat_grad", "fisher_vector_product", "conjugate_gradient", "line_search",
             "trpo_step", "value_loss", "ppo_loss", "RunningMeanStd", "RewardScaler", "zero_entries",
             "make_no_velocity_env", "is_ale", "make_env", "SaveALEState", "EpisodicLife", "FireAtLifeStart",
             "make_vec_env", "encoder", "head", "train"]
# The definitions of the older file that a definition of the newer file can take the place of, for
# the step pages: the first one that the older file has.
REPLACES = {"compute_gae": ["compute_returns"], "vpg_loss": ["reinforce_loss"], "surrogate": ["vpg_loss"]}
MATH = re.compile(r"^# math: (.*)$")
BANNER = re.compile(r"^# --- (.*) ---$")

CSS = """
body { margin: 0; font: 15px/1.5 system-ui, sans-serif; color: #1d1d1f; background: #fff; }
header, .intro, nav.pages, .index { max-width: 1100px; margin: 0 auto; padding: 0 24px; }
header h1 { font-size: 26px; margin: 20px 0 4px; }
nav.pages { display: flex; justify-content: space-between; gap: 16px; padding-top: 10px; padding-bottom: 10px; }
.intro pre, .notes pre { background: #f4f4f6; padding: 8px 12px; border-radius: 4px; white-space: pre-wrap; }
/* The algorithm's steps, in a box at the top of a script page: each name links to its line. */
.pseudocode { border: 1px solid #d6d6de; border-radius: 4px; margin: 12px 0 16px; background: #fbfbfd; }
.pseudocode > p { margin: 0; padding: 6px 16px; background: #eeeef3; border-bottom: 1px solid #d6d6de; font-weight: 600; }
.pseudocode ol { margin: 0; padding: 8px 16px 8px 44px; }
.pseudocode li { margin: 3px 0; padding-left: 4px; }
.pseudocode a { text-decoration: none; } .pseudocode a:hover code { text-decoration: underline; }
.pseudocode a code { color: #1a55a8; }
.notes h3:target { background: #fff3b0; } .notes h3 { scroll-margin-top: 30vh; }
/* A script page: the code flows on in one column, each section's notes float to its left, at the
   height of its code's first line or, where the notes before them run longer, just below those. A
   definition that opens a section of its own starts below the notes before it: so notes stay
   within their definition, and the code of a definition is never cut into islands. */
@property --code-width { syntax: "<length>"; inherits: true; initial-value: 862px; }
.sections { --code-width: calc(101ch + 5.5em); font: 13px ui-monospace, Menlo, Consolas, monospace;
            --notes-width: max(180px, min(660px, 100% - var(--code-width)));
            max-width: calc(var(--code-width) + 660px); margin: 0 auto;
            background: linear-gradient(to right, #fafafa calc(var(--notes-width) - 1px), #eee 0 var(--notes-width), #fff 0); }
.section:not(.inner)::before, .sections > .end { content: ""; display: block; clear: left; border-top: 1px solid #eee; }
.section > .notes { float: left; clear: left; width: var(--notes-width); box-sizing: border-box; }
.section > .notes:empty { display: none; }
.section > .code { margin-left: var(--notes-width); }
.section.inner > .notes, .section.inner > .code { border-top: 1px dashed #e6e6ea; }
.section:has(> .notes:hover) > .code pre { background: #fdf8e4; }  /* the code that a note explains */
.notes { padding: 8px 20px; min-width: 0; font: 15px/1.5 system-ui, sans-serif; }
.notes p { margin: 6px 0; }
/* A note from docs/notes/<script>.md: the longer teaching, set apart from the script's own comments. */
.notes .note { border-left: 3px solid #c8d3e6; padding: 0 0 0 10px; margin: 8px 0; font-size: 14px; color: #33333d; }
.diff .step-note { padding: 0 0 4px; } .diff .step-note :is(p, ul) { max-width: 44em; }  /* about 90 characters a line */
.diff .step-note .where { color: #5a5a66; font-size: 13px; margin: 8px 0 0; }
.intro .note { border-left: 3px solid #c8d3e6; padding: 0 0 0 12px; margin: 10px 0; }
.nowrap { white-space: nowrap; }
.notes h3 { margin: 10px 0 4px; font-size: 16px; color: #3c3c46; }
.notes table { border-collapse: collapse; font-size: 13.5px; width: 100%; }
.notes td { padding: 2px 6px 2px 0; vertical-align: top; border-bottom: 1px solid #eee; overflow-wrap: anywhere; }
.notes td:first-child { white-space: nowrap; }
.notes tr.flag-note td { white-space: normal; padding-left: 1.2em; color: #333; }
math { font-family: "DejaVu Math TeX Gyre", "STIX Two Math", "Cambria Math", "Latin Modern Math", math; }
math[display="block"] { margin: 8px 0; }
/* A script of a script at the size of the first (0.7 of the text), not of the second (0.5): π_old in a subscript */
:is(msub, msup, msubsup, munder, mover, munderover, mmultiscripts) > :not(:first-child) { math-depth: 1; }
mover:not([accent]) > mrow:nth-child(2) { padding-bottom: 0.4em; }  /* a label over =, clear of it */
.diff pre math { font-size: 125%; }
.diff mfrac { math-style: normal; }  /* a fraction in a code line at full size, not as small as a script */
.code pre { margin: 0; padding: 8px 12px; font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; }
.code { width: calc(101ch + 5.5em); font: 13px ui-monospace, Menlo, Consolas, monospace; }
.code .ln { color: #b0b0b8; user-select: none; display: inline-block; width: 3.2em; }
.docref { color: #8a8a99; font-style: italic; }
.notes h4 { margin: 10px 0 2px; font-size: 14px; font-weight: normal; }
details.imports summary { cursor: pointer; padding: 8px 12px; color: #5a5a66; font: 13px system-ui, sans-serif; }
code { font: 90% ui-monospace, Menlo, Consolas, monospace; background: #f0f0f3; padding: 0 3px; border-radius: 3px; }
.index ul { padding-left: 20px; } .index li { margin: 6px 0; }
.diff { max-width: 1100px; margin: 0 auto; padding: 0 24px 24px; }
.diff h2 { font-size: 20px; margin: 28px 0 6px; }
.diff h3 { font-size: 15px; margin: 16px 0 4px; }
.diff pre { margin: 0; padding: 8px 12px; background: #fafafa; border: 1px solid #eee; border-radius: 4px;
            font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap; overflow-wrap: anywhere; }
.diff pre > span { display: block; min-height: 1.45em; }
.diff pre > span:has(math) { padding: 0.25em 0; }  /* a formula's line: room above and below it */
.diff .ln { color: #b0b0b8; user-select: none; display: inline-block; width: 3.2em; text-align: right; padding-right: 0.6em; }
.diff .add { background: #e6f7e6; } .diff .del { background: #fbe9e9; } .diff .hunk { color: #8a8a99; }
.notes .eq { display: flex; flex-wrap: wrap; align-items: center; justify-content: center; column-gap: 10px; }
.notes .backlinks { font-size: 12.5px; text-align: right; margin: 6px 0; }
.notes .eq > math { min-width: 0; } .notes a.derivation { font-size: 12.5px; white-space: nowrap; text-decoration: none; }
.code .line:target { background: #fff3b0; } .code .line { scroll-margin-top: 30vh; }
/* A step page's figure: the learning curves before and after the step, its caption beside it. */
.step-figure { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 8px 20px; margin: 12px 0 16px; }
.step-figure img { flex: none; max-width: 100%; height: auto; border: 1px solid #eee; }
.step-figure figcaption { flex: 1 1 320px; font-size: 13.5px; color: #3c3c46; }
.step-figure figcaption p { margin: 0 0 6px; } .step-figure code { white-space: nowrap; }
"""

# Unicode in the scripts' plain-text formulas -> LaTeX, for typesetting them.
SYMBOLS = {"α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\varepsilon", "θ": r"\theta",
           "λ": r"\lambda", "μ": r"\mu", "π": r"\pi", "σ": r"\sigma", "τ": r"\tau", "φ": r"\phi", "Σ": r"\sum",
           "∇": r"\nabla", "−": "-", "≥": r"\geq", "≤": r"\leq", "·": r"\cdot", "∈": r"\in", "×": r"\times",
           "≈": r"\approx", "Â": r"\hat{A}", "ĝ": r"\hat{g}", "‖": r"\|", "∞": r"\infty"}
# A short formula inside prose: one letter (R̂ with its hat too), then subscripts or superscripts,
# then an optional argument: δ_t, R̂_t, V_θ(s_t), π_θ_old, A_{t+1}, γ^l, r_t(θ); or a number to a
# power, 0.8^k. Identifiers such as final_obs do not match.
INLINE_MATH = re.compile(r"(?<![\w`\\])[A-Za-zα-ωΑ-ΩÂĝ∇]\u0302?"
                         r"(?:_\{[^{}\s]+\}|_[0-9A-Za-zα-ω]+|\^\{[^{}\s]+\}|\^[0-9A-Za-zα-ω]+)+"
                         r"(?:\((?:[^()\s]|\([^()\s]*\))*\))?"
                         # or a letter applied to an argument with a subscript, V(s_{t+k}), kept whole
                         r"|(?<![\w`\\])[A-Za-zα-ωΑ-Ω]\((?=[^()\s]*_)(?:[^()\s]|\([^()\s]*\))+\)"
                         r"|(?<![\w.`\\])[0-9]+(?:\.[0-9]+)?\^(?:\{[^{}\s]+\}|[0-9A-Za-zα-ω]+)")


def to_latex(text: str) -> str:
    """A formula written in the scripts' plain text (Greek letters, − and ≥, words) as LaTeX."""
    text = re.sub(r"\s{2,}", " §Q§ ", text.strip())  # wide gaps separate equations on one line
    text = re.sub(r"([A-Za-z])\u0302", r"\\hat{\1}", text)  # R̂: R and a combining hat
    # π_θ_old: a chain of subscripts (but a_t|s_t is two)
    text = re.sub(r"_([^\s_{}^()\[\],|]+)_([^\s_{}^()\[\],|]+)", r"_{\1_{\2}}", text)
    text = re.sub(r"([_^])([0-9A-Za-z]{2,})", r"\1{\2}", text)  # _old -> _{old}
    text = re.sub(r"( ?)(?<![\\A-Za-z])([A-Za-z]{2,}(?: [A-Za-z]{2,})*)( ?)(?![A-Za-z])",
                  lambda m: word(m, text), text)
    for symbol, latex in SYMBOLS.items():
        text = text.replace(symbol, latex + " ")
    return text.replace("§Q§", r"\qquad ")


def word(m: re.Match, text: str) -> str:
    """Words inside a formula as upright text; a space is kept beside a word only where it
    separates two operands ("terminated_t or truncated_t"), not beside an operator ("1 − done_t")."""
    before, after = text[:m.start(2)].rstrip()[-1:], text[m.end(2):].lstrip()[:1]
    space_before = " " if m.group(1) and (before.isalnum() or before in ",)}") else ""
    space_after = " " if m.group(3) and after.isalpha() else ""
    return rf"\text{{{space_before}{m.group(2)}{space_after}}}"


def comment_lines(source: str) -> set[int]:
    """Line numbers (1-based) that hold nothing but a comment, found with Python's own tokenizer
    (so a '#' inside a string is never mistaken for one)."""
    code_lines, comments = set(), set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments.add(tok.start[0])
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    return comments - code_lines


# The policy that collected the batch, π at θ_old: written π_old, with one subscript. A subscript of
# a subscript, π_{θ_{old}}, would be drawn at half the text's size, too small to read.
PI_OLD = re.compile(r"\\pi\s*_\{\s*\\theta\s*_\{(?:old|\\text\{old\}|\\mathrm\{old\})\}\s*\}")
# In a formula's subscript or superscript: a name of two letters or more, or a command that sets
# text or a font, whose letters are left as they are.
SCRIPT_NAME = re.compile(r"\\(?:text|mathrm|operatorname|mathbb|mathcal|mathbf)\{[^{}]*\}|\\[A-Za-z]+"
                         r"|(?<![A-Za-z])[A-Za-z]{2,}(?![A-Za-z])")


def upright(latex: str) -> str:
    """A formula with π_θ_old written π_old, and with each name of two letters or more in a
    subscript or superscript (old, new, clip, CLIP, CPI) upright, as the prose sets them: V^{clip}
    reads as V with the name clip, not as the product c·l·i·p."""
    latex = PI_OLD.sub(r"\\pi_{\\mathrm{old}}", latex)
    out, k = [], 0
    for m in re.finditer(r"[_^]\s*\{", latex):
        if m.start() < k:
            continue  # inside a script already re-set
        depth, end = 1, m.end()
        while end < len(latex) and depth:  # to the brace that closes the script
            depth += {"{": 1, "}": -1}.get(latex[end], 0)
            end += 1
        script = SCRIPT_NAME.sub(lambda w: w[0] if w[0].startswith("\\") else rf"\mathrm{{{w[0]}}}",
                                 latex[m.end():end - 1])
        out += [latex[k:m.end()], script, "}"]
        k = end
    return "".join(out) + latex[k:]


def typeset(latex: str, display: str = "inline") -> str:
    """LaTeX -> MathML, with the typography that browsers get wrong from latex2mathml's output: a
    hat drawn as a small accent (not a tall detached caret), ε rather than ϵ as in the prose, a thin
    space after log, and a displayed Σ drawn large."""
    mathml = convert(upright(latex).replace(r"\epsilon", r"\varepsilon"), display=display)
    mathml = mathml.replace("<mo>&#x0005E;</mo></mover>", '<mo stretchy="false">&#x002C6;</mo></mover>')
    # Browsers centre an accent on the letter's box, which for an italic capital is left of its
    # slanted top: over Â's left stroke. A tenth of an em to the right puts the hat on the letter.
    mathml = re.sub(r'(<mover accent="true">(?:<mrow>)?<mi>[A-Z]</mi>(?:</mrow>)?<mo stretchy="false")>',
                    r'\1 style="transform: translateX(0.1em)">', mathml)
    mathml = re.sub(r"<mi>(log|exp)</mi>", r'<mi>\1</mi><mspace width="0.1667em"></mspace>', mathml)
    if display == "block" and r"\textstyle" not in latex:  # limits under and over, large
        mathml = mathml.replace("<mo>&#x02211;</mo>",
                                '<mo movablelimits="false" largeop="true" style="font-size: 150%">&#x02211;</mo>')
    return mathml


def inline_math(latex: str) -> str | None:
    try:
        mathml = typeset(latex)
    except Exception:
        return None
    return None if "merror" in mathml or re.search(r">\\[A-Za-z]", mathml) else mathml


def prose(text: str) -> str:
    """Escape, show `backticks` as code, and typeset short formulas outside the code."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        pieces, last = [], 0
        for m in INLINE_MATH.finditer(part):
            mathml = inline_math(to_latex(m.group(0)))
            if mathml:  # a formula and the punctuation after it never break apart: "π_θ," stays one
                end = m.end() + len(re.match(r"[,.;:)]*", part[m.end():]).group(0))
                pieces += [html.escape(part[last:m.start()]),
                           f'<span class="nowrap">{mathml}{html.escape(part[m.end():end])}</span>']
                last = end
        out.append("".join(pieces) + html.escape(part[last:]))
    return "".join(out)


def math(latex: str) -> str:
    """LaTeX -> MathML; a formula that fails, or leaves an unknown command as text, is an error."""
    try:
        mathml = typeset(latex, display="block")
    except Exception as error:
        raise ValueError(f"formula does not convert: {latex} ({type(error).__name__})") from error
    if "merror" in mathml or re.search(r">\\[A-Za-z]", mathml):
        raise ValueError(f"formula does not convert: {latex}")
    return mathml


def notes_html(lines: list[str], name: str | None = None, first: int = 0) -> str:
    """A comment block -> paragraphs, headings and equations; given the script's `name` and the
    block's `first` line, each equation with its link to derivations.html."""
    parts, paragraph = [], []

    def flush():
        if paragraph:
            parts.append(f"<p>{prose(' '.join(paragraph))}</p>")
            paragraph.clear()

    for number, line in enumerate(lines, first):
        text = line.strip()
        if m := MATH.match(text):
            flush()
            parts.append(math(m.group(1)) if name is None else derivations.backlink(name, number, m[1], math(m[1])))
        elif m := BANNER.match(text):
            flush()
            anchor = "" if name is None else f' id="line-{number}"'  # where the pseudocode links a section
            parts.append(f"<h3{anchor}>{prose(m.group(1))}</h3>")
        else:
            paragraph.append(text[1:].strip())
    flush()
    return "\n".join(parts)


def docstring_html(doc: str, source: str | None = None) -> tuple[str, set[int]]:
    """The module docstring: indented lines are commands (pre), the rest prose paragraphs; given
    the script's `source`, its pseudocode typeset as a list whose names link to their lines. Also
    the lines that those links land on."""
    blocks, targets = [], set()
    for block in doc.strip().split("\n\n"):
        lines = block.split("\n")
        if source is not None and is_pseudocode(lines):
            box, landed = pseudocode_html(lines, source)
            blocks.append(box)
            targets |= landed
        elif all(line.startswith("    ") for line in lines):
            blocks.append(f"<pre>{html.escape(chr(10).join(line[4:] for line in lines))}</pre>")
        else:
            blocks.append(prose_block(lines))
    return "\n".join(blocks), targets


def prose_block(lines: list[str]) -> str:
    """Lines of prose -> paragraphs, where a run of lines that start with "- " (each continued by
    lines indented two spaces) becomes a bulleted list."""
    parts, paragraph, items = [], [], []

    def flush():
        if paragraph:
            parts.append(f"<p>{prose(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            parts.append("<ul>" + "".join(f"<li>{prose(item)}</li>" for item in items) + "</ul>")
            items.clear()

    for line in lines:
        if line.startswith("- "):
            if paragraph:
                flush()
            items.append(line[2:].strip())
        elif items and line.startswith("  "):
            items[-1] += " " + line.strip()
        else:
            if items:
                flush()
            paragraph.append(line.strip())
    flush()
    return "\n".join(parts)


# The algorithm as numbered steps, which opens each script's module docstring (indented, so that
# help() keeps its lines): a heading line that ends with ":", then "1. ...", "2. ...", a step
# going on over lines indented further. Each name in backquotes says where the step is done.
STEP = re.compile(r"    (\d+)\. (.*)$")


def is_pseudocode(lines: list[str]) -> bool:
    return len(lines) > 1 and lines[0].startswith("    ") and lines[0].endswith(":") and bool(STEP.match(lines[1]))


def pseudocode_html(lines: list[str], source: str) -> tuple[str, set[int]]:
    """A script's pseudocode as a box: its heading, then its steps as a numbered list, with the
    formulas typeset as in the prose and each name in backquotes linked to the line that does it
    (`code_target`). Also the lines that the links land on."""
    steps = []  # the text of each step
    for line in lines[1:]:
        if m := STEP.match(line):
            if int(m[1]) != len(steps) + 1:
                raise ValueError(f"pseudocode: step {m[1]} comes after step {len(steps)}")
            steps.append(m[2].strip())
        elif line.startswith("     ") and steps:
            steps[-1] += " " + line.strip()
        else:
            raise ValueError(f"pseudocode: {line.strip()!r} is neither a numbered step nor a step's next line")
    targets = set()

    def linked(text: str, where: str) -> str:
        out = []
        for part in re.split(r"(`[^`]+`)", text):
            if len(part) > 1 and part.startswith("`") and part.endswith("`"):
                number = code_target(source, part[1:-1], where)
                targets.add(number)
                out.append(f'<a href="#line-{number}"><code>{html.escape(part[1:-1])}</code></a>')
            else:
                out.append(prose(part))
        return "".join(out)

    items = "".join(f"<li>{linked(text, f'step {k}')}</li>" for k, text in enumerate(steps, 1))
    return (f'<div class="pseudocode"><p>{linked(lines[0].strip(), "its heading")}</p><ol>{items}</ol></div>',
            targets)


def code_target(source: str, name: str, where: str = "") -> int:
    """The line that a name in backquotes in a script's pseudocode stands for: a banner
    `--- rollout ---`, the line `# --- rollout: ... ---` inside `train`; a function or class
    `compute_gae`, or a method `Agent.unroll`, its `def` or `class` line; a flag `--target-kl`,
    the first line of `train` that reads args.target_kl; any other name, the first line of `train`
    that assigns it. A name that stands for no line is an error: a link must not die when a
    function is renamed."""
    tree, lines = ast.parse(source), source.split("\n")
    train = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    found = []
    if m := re.fullmatch(r"--- (.+) ---", name):  # a banner of train: its name, or the words before its colon
        found = [n for n in range(train.lineno, train.end_lineno + 1) if (banner := BANNER.match(lines[n - 1].strip()))
                 and (banner[1] == m[1] or banner[1].startswith(m[1] + ":"))]
    elif name.startswith("--"):
        field = name[2:].replace("-", "_")
        found = sorted(node.lineno for node in ast.walk(train) if isinstance(node, ast.Attribute)
                       and node.attr == field and isinstance(node.value, ast.Name) and node.value.id == "args")
    elif re.fullmatch(r"\w+(\.\w+)?", name):
        nodes, definition = tree.body, None
        for part in name.split("."):
            definition = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part),
                              None)
            nodes = definition.body if definition else []
        if definition:
            found = [definition.lineno]
        elif "." not in name:
            found = sorted(node.lineno for node in ast.walk(train) if isinstance(node, ast.Name)
                           and node.id == name and isinstance(node.ctx, ast.Store))
    if not found:
        raise ValueError(f"pseudocode, {where}: `{name}` stands for no line of the script (no definition, no "
                         f"banner of train, no flag that train reads, no name that train assigns)")
    return found[0]


def docstring_equation(line: str) -> str:
    """A formula indented inside a definition's docstring, typeset (block MathML). A wide gap
    inside the line starts a new row, so that the formula fits beside the code."""
    rows = re.sub(r"\s{3,}=\s{3,}", "   = ", line.strip()).split("   ")
    rows = [to_latex(row) for row in map(str.strip, rows) if row]
    return math(rows[0] if len(rows) == 1 else r"\begin{array}{l} " + r" \\ ".join(rows) + r" \end{array}")


def definition_docstring(node: ast.AST, several: bool) -> str:
    """A definition's docstring as notes: its prose in paragraphs, with short formulas typeset, and
    the formulas indented in it as equations (GAE's δ_t and A_t, the rewards-to-go). The element
    names the docstring's lines, which the code column leaves out; where one section holds the
    docstrings of `several` definitions, each is headed by its definition's name."""
    doc = node.body[0]
    parts = [f"<h4><code>{node.name}</code></h4>"] if several else []
    for block in (ast.get_docstring(node, clean=True) or "").split("\n\n"):
        paragraph = []
        for line in block.split("\n"):
            if line.startswith("    ") and "=" in line:
                if paragraph:
                    parts.append(f"<p>{prose(' '.join(paragraph))}</p>")
                    paragraph = []
                parts.append(docstring_equation(line))
            else:
                paragraph.append(line.strip())
        if paragraph:
            parts.append(f"<p>{prose(' '.join(paragraph))}</p>")
    return (f'<div class="docstring" data-def="{node.lineno}" data-lines="{doc.lineno}-{doc.end_lineno}">'
            f'{"".join(parts)}</div>')


def docstring_lines(node: ast.AST) -> range:
    """The lines of a definition's docstring; empty if it has none."""
    if ast.get_docstring(node) is None:
        return range(0)
    return range(node.body[0].lineno, node.body[0].end_lineno + 1)


def flags_html(lines: list[str], code: list[int], spans: bool = True,
               notes: dict[int, str] | None = None) -> tuple[str, set[int]]:
    """The notes beside a part of `Args` (or of tooling.py's `RunFlags`): each flag of those lines
    with its meaning, as --help shows it, and below it the notes on its field's line (`notes`: line
    number -> html); and the lines of those meanings (the fields' docstrings), which the code column
    leaves out. Each row names them (data-lines) where `spans`."""
    rows, number, numbers, docs = [], 0, list(code), set()
    while number < len(numbers):
        line = lines[numbers[number] - 1]
        m = re.match(r"    (\w+): .*?= (.*)$", line)
        if not m:
            number += 1
            continue
        field, doc, number = numbers[number], [], number + 1
        # its docstring: the lines after it, up to the next field or the end of the class
        while number < len(numbers) and not re.match(r"    \w+: |\S", lines[numbers[number] - 1]):
            if lines[numbers[number] - 1].strip():
                doc.append(numbers[number])
            number += 1
        docs.update(doc)
        flag = "--" + m.group(1).replace("_", "-")
        meaning = " ".join(lines[n - 1].strip().strip('"') for n in doc)
        span = f' data-lines="{f"{doc[0]}-{doc[-1]}" if doc else ""}"' if spans else ""
        rows.append(f'<tr{span}><td><code>{flag}</code></td><td>{prose(meaning)}</td></tr>')
        if field in (notes or {}):
            rows.append(f'<tr class="flag-note"><td colspan="2">{notes[field]}</td></tr>')
    return (f"<table>{''.join(rows)}</table>" if rows else ""), docs


def split_sections(source: str, lines: list[str], first: int) -> list[tuple[list[str], list[int], int]]:
    """(comment lines, code line numbers, line of the first comment) of each section, from line
    `first` on. A definition whose body opens with a comment block moves to that block's section,
    with its decorators: then its first lines (signature, docstring) come before the comments."""
    comments = comment_lines(source)
    tree = ast.parse(source)
    heads = {min([n.lineno] + [d.lineno for d in n.decorator_list])  # top-level definitions
             for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    starts = {}  # first line of a body -> first line of its definition (decorators included)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            statements = node.body[1:] if ast.get_docstring(node) is not None else node.body
            head = min([node.lineno] + [d.lineno for d in node.decorator_list])
            for n in range(node.lineno + 1, statements[0].lineno if statements else node.end_lineno + 1):
                starts.setdefault(n, head)  # a comment between the signature (or docstring) and the body
    sections, notes, code, moved = [], [], [], 0  # moved: lines of code that came before the notes
    start = 0  # the line of the section's first comment
    for number in range(first, len(lines) + 1):
        if number in comments:
            if len(code) > moved:  # a new comment block closes the section before it
                head = starts.get(number)
                carried = [n for n in code if head is not None and n >= head]
                code = [n for n in code if n not in carried]
                if code or notes:
                    sections.append((notes, code, start))
                notes, code, moved = [], carried, len(carried)
            start = start if notes else number
            notes.append(lines[number - 1])
        else:
            if number in heads and any(lines[n - 1].strip() for n in code[moved:]):
                sections.append((notes, code, start))  # a top-level definition opens a section of its own
                notes, code, moved, start = [], [], 0, 0
            code.append(number)
    sections.append((notes, code, start))
    return sections


def render(name: str, source: str | None = None) -> str:
    """A script's page, or tooling.py's (TOOLING); from `source` in place of the file's text,
    where one is given."""
    source = (ROOT / f"{name}.py").read_text() if source is None else source
    lines = source.split("\n")
    if lines[-1] == "":
        lines.pop()
    # The module docstring opens the page as its introduction, the algorithm's steps first.
    doc_end = next(i for i, line in enumerate(lines[1:], 1) if line.strip().endswith('"""'))
    try:
        intro, targets = docstring_html("\n".join(lines[: doc_end + 1]).strip('"'), source)
    except ValueError as error:
        raise ValueError(f"{name}.py: {error}") from error
    if not targets and name != TOOLING:
        raise ValueError(f"{name}.py: its docstring does not open with the algorithm's numbered steps")
    # The notes of docs/notes/<name>.md: the introduction's after the docstring, each other one
    # beside the section that holds its line.
    page_notes = side_notes.load(name, source)
    intro += "".join(side_notes.html(n, prose_block, math) for n in page_notes if n.line == 0)
    placed = {id(n) for n in page_notes if n.line == 0}
    if name != TOOLING:
        intro += ('<p class="tooling-link">The tooling that the <code>__main__</code> hands the script to, where '
                  "tooling.py is importable (input checks, run folders, checkpoints and <code>--resume</code>, "
                  'guard rails, evaluation): <a href="tooling.html">tooling.html</a>.</p>')
    highlighted = highlight(source, PythonLexer(), HtmlFormatter(nowrap=True)).split("\n")
    tree = ast.parse(source)
    definitions = {node.lineno: node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    # A script's Args, and tooling.py's RunFlags: their flags are listed in the notes.
    flag_classes = [(min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno) for n in tree.body
                    if isinstance(n, ast.ClassDef) and n.name in ("Args", "RunFlags")]
    # the last line of a script's Args, whose notes list the tooling's flags after its own
    args_end = next((n.end_lineno for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args"
                     and name != TOOLING), None)
    # the first line of each top-level definition, its decorators included (`@dataclass` of Args)
    top_level = {min([node.lineno] + [d.lineno for d in node.decorator_list]): node for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    import_lines = {n for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                    for n in range(node.lineno, node.end_lineno + 1)}

    body, nl = [], "\n"
    for notes, code, notes_start in split_sections(source, lines, doc_end + 2):
        while code and not lines[code[-1] - 1].strip():  # trailing blank lines add nothing
            code.pop()
        while code and not lines[code[0] - 1].strip():  # and leading ones
            code.pop(0)
        if not code and not notes:
            continue
        # The docstrings of the definitions in this section are read in the notes, typeset, and
        # left out of the code column, where one line says where they went.
        documented = [definitions[n] for n in code if n in definitions and ast.get_docstring(definitions[n])]
        docs = {n: node for node in documented for n in docstring_lines(node)}
        # in the order of the file: a docstring above the comments (a definition whose body opens
        # with them) comes before their notes, one below them after
        held = set(code) | set(range(notes_start, notes_start + len(notes)) if notes else ())
        beside = [n for n in page_notes if n.line in held and id(n) not in placed]
        placed |= {id(n) for n in beside}
        # a definition's own notes follow its docstring; the others come after the section's notes
        with_notes = {d.lineno: definition_docstring(d, len(documented) > 1) + "".join(
            side_notes.html(n, prose_block, math) for n in beside if n.line == d.lineno) for d in documented}
        beside = [n for n in beside if n.line not in with_notes]
        in_flags = code and any(first <= code[0] <= last for first, last in flag_classes)
        # a note on a field's line goes below that flag's row
        field_notes = {n.line: side_notes.html(n, prose_block, math) for n in beside
                       if in_flags and re.match(r"    \w+: ", lines[n.line - 1])}
        beside = [n for n in beside if n.line not in field_notes]
        flags, field_docs = (flags_html(lines, code, notes=field_notes) if in_flags else ("", set()))
        if args_end in code:
            flags += tooling_flags_html()
        shown = [n for n in code if n not in field_docs and (n not in docs or n == docs[n].body[0].lineno)]
        # The imports that open a section are folded, and the lines after them (the script's name
        # and spaces) are not.
        folded = list(itertools.takewhile(lambda n: n in import_lines or not lines[n - 1].strip(), shown))
        folded = folded if any(n in import_lines for n in folded) else []
        rest = shown[len(folded):]
        code_html = f"<pre>{nl.join(code_row(n, highlighted, docs) for n in rest)}</pre>" if rest or not folded else ""
        if folded:
            imports = [n for n in folded if n in import_lines]
            code_html = (f'<details class="imports"><summary>imports, lines {imports[0]}–{imports[-1]}</summary>'
                         f"<pre>{nl.join(code_row(n, highlighted, docs) for n in folded)}</pre></details>{code_html}")
        inner = bool(code) and not any(n in top_level for n in code[:1]) and not notes_starts_part(notes)
        anchor = f"L{code[0]}" if code else f"N{len(body)}"  # link to a section by its first line: page.html#L120
        # By the line each explains: the docstrings with their notes, the section's comments with
        # the flags they introduce, and the notes anchored to one line.
        items = [(d.lineno, 0, with_notes[d.lineno]) for d in documented]
        items += [(notes_start, 1, notes_html(notes, name, notes_start) + flags)]
        items += [(n.line, 2, side_notes.html(n, prose_block, math)) for n in beside]
        cell = "".join(text for *_, text in sorted(items, key=lambda item: item[:2]))
        cell += derivations.code_backlinks(name, set(code), cell)  # the equations this code computes
        body.append(f'<div class="section{" inner" if inner else ""}" id="{anchor}">'
                    f'<div class="notes">{cell}</div>'
                    f'<div class="code">{code_html}</div></div>')
    body.append('<div class="end"></div>')  # (below the notes of the last section, however long)
    if unplaced := [n for n in page_notes if id(n) not in placed]:  # a line the page does not show
        raise ValueError(f"docs/notes/{name}.md: the note '## {unplaced[0].anchor}' names line "
                         f"{unplaced[0].line}, which the page does not show")
    shown = set(map(int, re.findall(r'id="line-(\d+)"', "".join(body))))
    if targets - shown:  # a line left out of the page: a docstring's, or a flag's meaning
        raise ValueError(f"{name}.py: the pseudocode links lines {sorted(targets - shown)}, which the page does not show")
    header = html.escape(SCRIPTS.get(name, TOOLING_TEXT))
    return page(f"{name}.py", f"<header><h1>{name}.py</h1><p><a href=\"index.html\">pgref</a> · {header}</p></header>\n"
                f"{page_nav(name)}\n<div class=\"intro\">{intro}</div>\n"
                '<div class="sections">' + "\n".join(body) + "</div>\n" + page_nav(name))


def tooling_flags_html() -> str:
    """The notes that a script page shows after its Args' flags: the flags that tooling.py adds
    (its `RunFlags`), which `--help` lists after them, under a heading that links them on
    tooling.html."""
    source = (ROOT / f"{TOOLING}.py").read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "RunFlags")
    table, _ = flags_html(source.split("\n"), list(range(node.lineno, node.end_lineno + 1)), spans=False)
    return (f'<h3>the tooling\'s flags, with tooling.py (<a href="{TOOLING}.html#line-{node.lineno}">'
            f"<code>RunFlags</code></a>)</h3><p>Where the script finds tooling.py, <code>--help</code> lists "
            f"these after the flags above. The script alone takes only those.</p>{table}")


def code_row(number: int, highlighted: list[str], docs: dict[int, ast.AST]) -> str:
    """One line of the code column, with its number; a docstring's first line stands for the
    docstring, which is in the notes."""
    if number not in docs:
        # (each line an anchor, page.html#line-120, which derivations.html links to)
        return f'<span class="line" id="line-{number}"><span class="ln">{number}</span>{highlighted[number - 1]}</span>'
    doc = docs[number].body[0]
    indent = " " * doc.col_offset
    where = f"line {doc.lineno}" if doc.lineno == doc.end_lineno else f"lines {doc.lineno}–{doc.end_lineno}"
    return f'<span class="ln"></span>{indent}<span class="docref">"""…"""  ← the docstring ({where}), in the notes</span>'


def notes_starts_part(notes: list[str]) -> bool:
    return any(BANNER.match(line.strip()) for line in notes[:1])


def page_nav(name: str) -> str:
    """Links to the previous and next page in the reading order, with the step pages between; a
    branch's page links back to the step page from the script it changes, and tooling.html to the
    index and the first script."""
    if name == TOOLING:
        return (f'<nav class="pages"><a href="index.html">← all scripts</a><a href="{ORDER[0]}.html">the first '
                f"script, {ORDER[0]}.py →</a></nav>")
    if name in BRANCHES:
        return (f'<nav class="pages"><a href="{BRANCHES[name]}-to-{name}.html">← what changed from '
                f'{BRANCHES[name]}.py</a><a href="index.html">all scripts →</a></nav>')
    i = ORDER.index(name)
    back = (f'<a href="{ORDER[i - 1]}-to-{name}.html">← what changed from {ORDER[i - 1]}.py</a>' if i
            else '<a href="index.html">← all scripts</a>')
    ahead = (f'<a href="{name}-to-{ORDER[i + 1]}.html">what changes in {ORDER[i + 1]}.py →</a>' if i + 1 < len(ORDER)
             else '<a href="index.html">all scripts →</a>')
    return f'<nav class="pages">{back}{ahead}</nav>'


def source_of(name: str) -> str:
    """The text of a script, or of a sub-step file in steps/."""
    return (ROOT / f"{name}.py" if name in SCRIPTS else ROOT / "steps" / f"{name}.py").read_text()


def file_of(name: str) -> str:
    return f"{name}.py" if name in SCRIPTS else f"steps/{name}.py"


def definitions(source: str, part: str) -> dict[str, tuple[int, list[str]]]:
    """(first line number, lines) of each top-level part of a script or of a file in steps/, by
    its name. `part`: "algorithm", each definition (with its decorators); "rest", what a step page
    shows after them: the imports, then each other statement (the lines that name the script and
    its spaces, ppo_recurrent.py's registrations, the `__main__`), named by what it assigns or by
    its first line. The module docstring is in neither: a step page shows its paragraph on the
    step."""
    lines = source.split("\n")
    tree = ast.parse(source)
    parts = {}
    if part == "rest":
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        parts["imports"] = (imports[0].lineno, lines[imports[0].lineno - 1:imports[-1].end_lineno])
    for k, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if part == "algorithm":
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                parts[node.name] = (start, lines[start - 1:node.end_lineno])
        elif part == "rest" and not isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                k == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            first = lines[node.lineno - 1]
            name = first.split(" = ", 1)[0] if isinstance(node, (ast.Assign, ast.AnnAssign)) else first.rstrip(":")
            parts[name] = (node.lineno, lines[node.lineno - 1:node.end_lineno])
    return parts


def words(lines: list[str]) -> list[str]:
    """The words of some lines with comment marks and line breaks taken out: two versions with the
    same words differ only in how the text is wrapped."""
    return " ".join(line.strip().removeprefix("#").removeprefix(" math:") for line in lines).split()


def changes(old: list[str], new: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes of two versions of a definition, with every change that only re-wraps
    the same words (a comment or docstring re-flowed, a call split differently) counted as equal."""
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    return [("equal" if tag != "equal" and words(old[i1:i2]) == words(new[j1:j2]) else tag, i1, i2, j1, j2)
            for tag, i1, i2, j1, j2 in ops]


def code_line(line: str, highlighted: str) -> str:
    """One line of a step page: highlighted code, or a `# math:` comment with its equation typeset."""
    if m := MATH.match(line.strip()):
        indent = line[:len(line) - len(line.lstrip())]
        return f'{indent}<span class="c1"># </span>{typeset(m.group(1))}'
    return highlighted


def diff_html(old: tuple[int, list[str]], new: tuple[int, list[str]], old_hl: list[str], new_hl: list[str]) -> str:
    """The lines that changed, with two lines of context, each with its line number in the old file
    and in the new one, highlighted, and `# math:` lines typeset; a gap between hunks is shown as ⋯,
    and a gap of one line is shown instead (a ⋯ would take its place and cut the text around it)."""
    (old_start, old_lines), (new_start, new_lines) = old, new
    rows, shown = [], set()
    ops = changes(old_lines, new_lines)
    for tag, i1, i2, j1, j2 in ops:
        if tag != "equal":
            shown.update(("old", i) for i in range(max(i1 - 2, 0), min(i2 + 2, len(old_lines))))
            shown.update(("new", j) for j in range(max(j1 - 2, 0), min(j2 + 2, len(new_lines))))
    equal = [(i, j) for tag, i1, i2, j1, j2 in ops if tag == "equal"
             for i, j in zip(range(i1, i2), range(j1, j2), strict=False)]  # a re-wrap may differ in length
    seen = [("old", i) in shown or ("new", j) in shown for i, j in equal]
    for k in range(1, len(equal) - 1):  # a lone hidden line between two shown ones
        if not seen[k] and seen[k - 1] and seen[k + 1]:
            shown.add(("old", equal[k][0]))
    gap = False
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=False):
                if ("old", i) in shown or ("new", j) in shown:
                    if gap and rows:
                        rows.append('<span class="hunk">⋯</span>')
                    gap = False
                    n_old, n_new = old_start + i, new_start + j
                    rows.append(f'<span class="same"><span class="ln">{n_old}</span><span class="ln">{n_new}</span>'
                                f"  {code_line(new_lines[j], new_hl[n_new - 1])}</span>")
                else:
                    gap = True
            continue
        if gap and rows:
            rows.append('<span class="hunk">⋯</span>')
        gap = False
        for i in range(i1, i2):
            n = old_start + i
            rows.append(f'<span class="del"><span class="ln">{n}</span><span class="ln"></span>'
                        f"− {code_line(old_lines[i], old_hl[n - 1])}</span>")
        for j in range(j1, j2):
            n = new_start + j
            rows.append(f'<span class="add"><span class="ln"></span><span class="ln">{n}</span>'
                        f"+ {code_line(new_lines[j], new_hl[n - 1])}</span>")
    return "<pre>" + "".join(rows) + "</pre>"  # one block per line: no newline between them


# The order in which a step page shows the algorithm's changed definitions: the new objective
# first, then what feeds it, then the networks and the loop that use them.
ALGORITHM_FIRST = ["reinforce_loss", "vpg_loss", "surrogate", "ppo_loss", "trpo_step", "mean_kl",
                   "fisher_vector_product", "conjugate_gradient", "line_search", "flat_grad", "value_loss",
                   "compute_returns", "compute_gae", "RunningMeanStd", "RewardScaler", "encoder", "Agent", "train", "head", "mlp",
                   "layer_init", "zero_entries", "make_no_velocity_env"]


def step_idea(old_name: str, new_name: str, doc: str) -> tuple[str, bool]:
    """What a step brings, which the newer file's docstring names in a paragraph "What changes
    from X.py, one idea: Y." or "What changes from X.py: one idea, Y." (then (Y, True)) or, for a
    step that is not one idea, "What changes from X.py: Y." (then (Y, False)): the page's heading
    says it too, so that the course reads as a list of ideas."""
    for paragraph in doc.split("\n\n"):
        idea = re.match(rf"What changes from {re.escape(old_name)}\.py(, one idea: |: one idea, |: )(.*?)\.(?: |$)",
                        " ".join(paragraph.split()))
        if idea:
            return idea[2], idea[1] != ": "
    raise ValueError(f"{file_of(new_name)}: no paragraph 'What changes from {old_name}.py' names its idea")


def prose_lines(source: str) -> set[int]:
    """The lines of a file that are comments or docstrings, not code: the whole-line comments and
    every line of each docstring (of the module, a class or a function)."""
    lines = comment_lines(source)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node) is not None:
            lines.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    return lines


def changed_blocks(old_name: str, new_name: str, part: str) -> tuple[list[str], int, int]:
    """The diff of each part that changed from one file to the next, in `part` (see `definitions`),
    the algorithm's in the order of ALGORITHM_FIRST; and the number of lines of
    code, then of comments and docstrings, removed or added in all of them (a blank line counts in
    neither, and a change that only re-wraps the same words counts none)."""
    sources = [source_of(n) for n in (old_name, new_name)]
    old, new = (definitions(source, part) for source in sources)
    old_hl, new_hl = (highlight(source, PythonLexer(), HtmlFormatter(nowrap=True)).split("\n") for source in sources)
    old_prose, new_prose = (prose_lines(source) for source in sources)
    replaced = {name: next((b for b in REPLACES.get(name, []) if b in old), name) if name not in old else name
                for name in new}
    blocks, code, comments = [], 0, 0  # blocks: (rank, html)

    def kinds(numbered: list[tuple[int, str]], prose: set[int]) -> tuple[int, int]:
        """(lines of code, lines of comments) among some (line number, line)."""
        written = [n for n, line in numbered if line.strip()]
        return sum(n not in prose for n in written), sum(n in prose for n in written)

    for name in new:
        before = replaced[name]
        old_part = old.get(before, (1, []))
        ops = changes(old_part[1], new[name][1])
        if all(tag == "equal" for tag, *_ in ops):
            continue  # the same, or only re-wrapped
        removed = [(old_part[0] + i, old_part[1][i]) for tag, i1, i2, *_ in ops if tag != "equal" for i in range(i1, i2)]
        added = [(new[name][0] + j, new[name][1][j]) for tag, _, _, j1, j2 in ops if tag != "equal"
                 for j in range(j1, j2)]
        counts = [a + b for a, b in zip(kinds(removed, old_prose), kinds(added, new_prose), strict=True)]
        code, comments = code + counts[0], comments + counts[1]
        title = (f"<code>{name}</code>" + (f" (was <code>{before}</code>)" if before != name else "")
                 + (" (new)" if before not in old else "") + ("" if counts[0] else ": comments only"))
        rank = ALGORITHM_FIRST.index(name) if name in ALGORITHM_FIRST else len(ALGORITHM_FIRST)
        rank += 0 if counts[0] else 1000  # a change of comments alone after every change of code
        blocks.append((rank, f"<h3>{title}</h3>" + diff_html(old_part, new[name], old_hl, new_hl)))
    for name in [n for n in old if n not in new and n not in replaced.values()]:
        start, gone = old[name]
        counts = kinds(list(enumerate(gone, start)), old_prose)
        code, comments = code + counts[0], comments + counts[1]
        rank = ALGORITHM_FIRST.index(name) if name in ALGORITHM_FIRST else len(ALGORITHM_FIRST)
        blocks.append((rank, f"<h3><code>{name}</code> (gone)</h3>" + diff_html(old[name], (1, []), old_hl, new_hl)))
    if part == "algorithm":
        blocks.sort(key=lambda b: b[0])
    return [b for _, b in blocks], code, comments


def course(old_name: str, new_name: str) -> list[tuple[str, str, str, bool, str]]:
    """The sub-steps from one script to the next: (from, to, idea, one idea?, the newer file's
    paragraph that names it) of each."""
    chain = [old_name, *SUBSTEPS.get((old_name, new_name), []), new_name]
    hops = []
    for a, b in itertools.pairwise(chain):
        doc = ast.get_docstring(ast.parse(source_of(b))) or ""
        idea, one = step_idea(a, b, doc)
        blocks = doc.split("\n\n")
        first = next(i for i, p in enumerate(blocks) if p.startswith(f"What changes from {a}.py"))
        text = [blocks[first]]  # with the equations indented after it and the prose that goes on from them
        for block in blocks[first + 1:]:
            if not (block.startswith("    ") or text[-1].startswith("    ")) or block.startswith(STOPS):
                break
            text.append(block)
        hops.append((a, b, idea, one, "\n\n".join(text)))
    return hops


# Paragraphs of a module docstring that speak of the whole file, not of one step.
STOPS = ("What changes from", "Lines starting with", "Defaults follow", "Details are cited")


def step_text(text: str) -> str:
    """A step's paragraphs from its file's docstring: prose, and each indented formula typeset."""
    out = []
    for block in text.split("\n\n"):
        if block.startswith("    "):
            out += [docstring_equation(line) for line in block.split("\n") if line.strip()]
            continue
        # prose, and a list: a line "- item" opens an item, and a line indented by two spaces goes on with it
        runs = []  # ("p" or "li", lines)
        for line in block.split("\n"):
            if line.startswith("- "):
                runs.append(("li", [line[2:]]))
            elif line.startswith("  ") and runs and runs[-1][0] == "li":
                runs[-1][1].append(line)
            elif runs and runs[-1][0] == "p":
                runs[-1][1].append(line)
            else:
                runs.append(("p", [line]))
        kinds = [kind for kind, _ in runs]
        for k, (kind, lines) in enumerate(runs):
            item = prose(" ".join(" ".join(lines).split()))
            if kind == "p":
                out.append(f"<p>{item}</p>")
            else:  # the items next to each other are one list
                out.append(("<ul>" if k == 0 or kinds[k - 1] != "li" else "") + f"<li>{item}</li>"
                           + ("</ul>" if k + 1 == len(runs) or kinds[k + 1] != "li" else ""))
    return "".join(out)


def counted(code: int, comments: int) -> str:
    """A step's size as a reader weighs it: its lines of code, and apart from them its comments."""
    return (f"{code} line{'s' * (code != 1)} of code removed or added, and {comments} line{'s' * (comments != 1)} "
            f"of comments and docstrings")


def step_figure(old_name: str, new_name: str) -> str:
    """The page's figure and its caption, from docs/figures/steps.json. A page without its figure
    stops the build."""
    entry = json.loads((FIGURES / "steps.json").read_text()).get(f"{old_name}-to-{new_name}")
    if not entry or not (FIGURES / entry["image"]).is_file():
        raise FileNotFoundError(f"no figure of {old_name}-to-{new_name} in docs/figures/: run python benchmarks/report.py")
    return (f'<figure class="step-figure"><img src="figures/{entry["image"]}" width="{entry["width"]}" '
            f'height="{entry["height"]}" alt="{html.escape(entry["alt"])}">'
            f"<figcaption>{''.join(f'<p>{prose(text)}</p>' for text in entry['caption'].split(chr(10) * 2))}"
            "</figcaption></figure>")


def step_notes(name: str) -> str:
    """The notes of a sub-step file (docs/notes/steps/<name>.md), each headed by the line it names;
    of a script, only its note on the step (`## step`): the others are on its page."""
    lines = source_of(name).split("\n")
    out = []
    for note in side_notes.load(name if name in SCRIPTS else f"steps/{name}", source_of(name)):
        if name in SCRIPTS and note.anchor != "step":
            continue
        where = ("the whole file" if note.line == 0 else
                 f"line {note.line}: <code>{html.escape(lines[note.line - 1].strip())}</code>")
        out.append(f'<div class="notes step-note"><p class="where">Note on {where}</p>'
                   f"{side_notes.html(note, prose_block, math)}</div>")
    return "".join(out)


def step_page(old_name: str, new_name: str) -> str:
    hops = course(old_name, new_name)
    sections, items = [], []
    for k, (a, b, idea, one, paragraph) in enumerate(hops, 1):
        blocks, code, comments = changed_blocks(a, b, "algorithm")
        name = f"step {k} of {len(hops)}: " if len(hops) > 1 else ""
        kind = "one idea" if one else "not one idea"
        items.append(f'<li><a href="#step-{k}">{file_of(a)} → {file_of(b)}</a>: {prose(idea)} '
                     f"({kind}; {counted(code, comments)})</li>")
        sections.append(f'<h2 id="step-{k}">{name.capitalize()}{file_of(a)} → {file_of(b)}: {prose(idea)}</h2>'
                        f'<p class="count">{counted(code, comments)}, in the algorithm (its functions and '
                        f"classes; blank lines count in neither, and a change that only re-wraps a comment counts "
                        f"none)</p>"
                        f"{step_text(paragraph)}{step_notes(b)}"
                        + ("".join(blocks) or "<p>No difference.</p>"))
    rest, *_ = changed_blocks(old_name, new_name, "rest")
    if len(hops) > 1:
        files = ", ".join(f"<code>{file_of(b)}</code>" for _, b, *_ in hops[:-1])
        learns = " (on Pendulum-v1 with the flags in its docstring)" if new_name == "ppo_continuous" else ""
        intro = (f"<p>{len(hops)} steps, each from a file to the next, which its heading names. The files "
                 f"between the two scripts ({files}) have the scripts' shape, the algorithm and then a "
                 f"<code>__main__</code>, and each runs and learns{learns}: "
                 f"<code>python {file_of(hops[0][1])}</code>.</p>"
                 f"<ol>{''.join(items)}</ol>")
        title = f"{old_name}.py → {new_name}.py in {len(hops)} steps"
    else:
        intro = f"<ol>{''.join(items)}</ol>"
        title = f"{old_name}.py → {new_name}.py: {prose(hops[0][2])}"
    nav = (f'<nav class="pages"><a href="{old_name}.html">← {old_name}.py</a>'
           f'<a href="{new_name}.html">{new_name}.py →</a></nav>')
    intro += step_figure(old_name, new_name)
    content = (f"<header><h1>{title}</h1><p><a href=\"index.html\">pgref</a> · "
               f"the differences of each definition, step by step, the algorithm's first; changes that only "
               f"re-wrap a comment are left out</p></header>\n{nav}\n"
               f'<div class="intro">{intro}</div>\n<div class="diff">{"".join(sections)}'
               f"<h2>Everything else: imports, the script's names and the command line ({old_name}.py → "
               f"{new_name}.py)</h2>"
               f"{''.join(rest) or '<p>No difference.</p>'}</div>\n{nav}")
    return page(f"{old_name}.py → {new_name}.py", content)


def page(title: str, content: str) -> str:
    style = CSS + HtmlFormatter(style="default").get_style_defs([".code", ".diff"])
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{html.escape(title)}</title>\n"
            f"<style>{style}</style>\n</head>\n<body>\n{content}\n</body>\n</html>\n")


def index() -> str:
    items = []
    for name, text in SCRIPTS.items():
        before = BRANCHES.get(name) or (ORDER[ORDER.index(name) - 1] if ORDER.index(name) else None)
        if before:
            items.append(f'<li class="step"><a href="{before}-to-{name}.html">what changes from '
                         f"{before}.py to {name}.py</a></li>")
        items.append(f'<li><a href="{name}.html"><code>{name}.py</code></a>: {html.escape(text)}</li>')
        if name == "trpo":  # a reader who skips TRPO goes from vpg.py to PPO
            items.append('<li class="step"><a href="vpg-to-ppo_discrete.html">or, skipping TRPO: what changes '
                         "from vpg.py to ppo_discrete.py</a></li>")
    nl = "\n"
    return page("pgref: annotated scripts", f"""<header><h1>pgref: the scripts, annotated</h1></header>
<div class="index"><p>Each page shows one script, cut into sections. On the left are its whole-line
comments and its functions' and classes' docstrings, moved out of the code. The <code># math:</code> lines
are typeset as equations there. On the right is the code they explain, with the file's line numbers and its
end-of-line comments. A moved docstring leaves one line saying where it went. The module docstring opens
the page, and the flags' docstrings become their table. The imports are folded. Each script ends with its
algorithm and a <code>__main__</code>: alone, the script trains and logs; with tooling.py beside it, it hands
itself to <a href="tooling.html">the tooling</a>, which checks its input, checkpoints, resumes and evaluates.
That is one file for all seven scripts, with a page of its own.</p>
<p><a href="derivations.html">The derivations</a> are one page, from the policy gradient of an episode to
the clipped surrogate, then the pieces. Beside each equation that a script computes, they show the lines that
compute it. Each section of a script page that computes an equation links back to it.</p>
<p>Read the scripts in this order. Between two, a step page shows what changes from one to the next. Where
that is more than one idea, it goes in steps through files in <code>steps/</code>. Each is the algorithm alone,
and each runs and learns. Each step brings one idea, but for three, and their pages say so. Two bring the
details of a list: PPO's reference code, and CleanRL's MuJoCo defaults. The branch to the recurrent PPO brings
memory, three pieces of the continuous PPO, RL Zoo's network and RL Zoo's defaults.</p>
<ul>
{nl.join(items)}
<li><a href="tooling.html"><code>tooling.py</code></a>: {html.escape(TOOLING_TEXT)}</li>
</ul>
<p>REINFORCE weights each log-probability by the return that followed. VPG replaces that return by
an advantage measured against a learned critic. TRPO bounds how far one update may move the policy, to a
mean KL of δ. It steps along the natural gradient to the edge of that region. PPO replaces the constraint by
a clip of the probability ratio inside the loss. The loss then stops rewarding a policy that moves further
from the one that collected the data. With first-order steps, PPO reuses each batch for several epochs. The
continuous PPO adds a Gaussian policy and the normalisation MuJoCo needs. The recurrent PPO branches off the
discrete one. An LSTM gives its policy and critic a memory, for envs whose observation leaves out what the
agent must remember.</p></div>""")


def browser(width: int = 1366, height: int = 768):
    """Headless Chromium driven by Selenium, with the system's chromium and chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def screenshot(page: Path, selector: str, path: Path, width: int, block: str = "start") -> None:
    """A screenshot of a page scrolled to the first element that the CSS `selector` finds: at the
    top of the window, or with `block` "end" at its bottom."""
    from selenium.webdriver.common.by import By

    driver = browser(width, 900)
    try:
        driver.get(page.resolve().as_uri())
        driver.execute_script("arguments[0].scrollIntoView({block: arguments[1]})",
                              driver.find_element(By.CSS_SELECTOR, selector), block)
        driver.save_screenshot(str(path))
    finally:
        driver.quit()


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in [*SCRIPTS, TOOLING]:
        path = out / f"{name}.html"
        path.write_text(render(name))
        written.append(path)
    for old_name, new_name in STEPS:
        path = out / f"{old_name}-to-{new_name}.html"
        path.write_text(step_page(old_name, new_name))
        written.append(path)
    (out / "index.html").write_text(index())
    (out / "derivations.html").write_text(derivations.page())
    return written + [out / "index.html", out / "derivations.html"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="folder for the pages (default: docs/)")
    parser.add_argument("--screenshots", type=Path,
                        help="also save here screenshot-{1366,1920}.png of ppo_continuous.html's GAE, "
                             "screenshot-tooling-{1366,1920}.png of tooling.html's run and its hook, "
                             "screenshot-step-{1366,1920}.png of reinforce-to-vpg.html's second step, "
                             "screenshot-step-figure-{1366,1920}.png of its figure, "
                             "screenshot-derivations-{1366,1920}.png of derivations.html's GAE returns "
                             "and screenshot-pseudocode-{1366,1920}.png of vpg.html's pseudocode")
    args = parser.parse_args()
    for path in build(args.out):
        print(f"wrote {path}")
    if args.screenshots:
        gae_line = next(i for i, line in enumerate((ROOT / "ppo_continuous.py").read_text().split("\n"), 1)
                        if line.startswith("def compute_gae"))
        page_html = (args.out / "ppo_continuous.html").read_text()
        # the section that holds the `def compute_gae` line: the last one starting at or before it
        anchor = max(int(n) for n in re.findall(r'id="L(\d+)"', page_html) if int(n) <= gae_line)
        # tooling.html's section that holds `def hook` of Run: what the tooling does after each update
        hook_line = next(i for i, line in enumerate((ROOT / "tooling.py").read_text().split("\n"), 1)
                         if line.startswith("    def hook("))
        tooling_section = max(int(n) for n in re.findall(r'id="L(\d+)"', (args.out / "tooling.html").read_text())
                              if int(n) <= hook_line)
        for width in (1366, 1920):
            path = args.screenshots / f"screenshot-{width}.png"
            screenshot(args.out / "ppo_continuous.html", f"#L{anchor}", path, width)
            print(f"wrote {path}")
            path = args.screenshots / f"screenshot-tooling-{width}.png"  # the tooling: a run and its hook
            screenshot(args.out / "tooling.html", f"#L{tooling_section}", path, width)
            print(f"wrote {path}")
            path = args.screenshots / f"screenshot-step-{width}.png"  # reinforce → vpg: the rollout step
            screenshot(args.out / "reinforce-to-vpg.html", "#step-2", path, width)
            print(f"wrote {path}")
            path = args.screenshots / f"screenshot-step-figure-{width}.png"  # its list of steps and its figure
            screenshot(args.out / "reinforce-to-vpg.html", "figure.step-figure", path, width, block="end")
            print(f"wrote {path}")
            path = args.screenshots / f"screenshot-derivations-{width}.png"  # GAE's ends and returns
            screenshot(args.out / "derivations.html", "#eq-gae-ends", path, width)
            print(f"wrote {path}")
            path = args.screenshots / f"screenshot-pseudocode-{width}.png"  # the algorithm's steps, linked
            screenshot(args.out / "vpg.html", ".intro", path, width)
            print(f"wrote {path}")
