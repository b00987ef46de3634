"""Render each script as an annotated page: its comments and equations beside the code they explain.

    pip install -r docs/requirements.txt
    python docs/build.py                 # writes docs/<script>.html and docs/index.html
    python docs/build.py --out /tmp/docs
    python docs/build.py --screenshot docs/screenshot.png   # needs Debian's chromium and chromium-driver

The scripts are read, never changed. A script is cut into sections at each block of whole-line
comments: the block is the section's notes (left), the code up to the next block its code
(right, highlighted by pygments, with the file's line numbers). A comment line `# math: <LaTeX>`
becomes a typeset equation (MathML from latex2mathml, which browsers render natively); a banner
`# --- name ---` becomes a heading; other comment lines are prose. Pages are self-contained
static HTML: no JavaScript, no network. A formula that does not convert stops the build.
"""

import argparse
import html
import io
import re
import tokenize
from pathlib import Path

from latex2mathml.converter import convert
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {
    "reinforce": "REINFORCE: the Monte-Carlo policy gradient, no critic.",
    "vpg": "Vanilla policy gradient: a learned value baseline, GAE-λ advantages, one step per batch.",
    "ppo_discrete": "PPO-clip for discrete actions: many minibatch steps per batch, kept close by the clipped ratio.",
    "ppo_continuous": "PPO-clip for continuous control (MuJoCo): a Gaussian policy, observation and reward normalisation.",
}
MATH = re.compile(r"^# math: (.*)$")
BANNER = re.compile(r"^# --- (.*) ---$")

CSS = """
body { margin: 0; font: 15px/1.5 system-ui, sans-serif; color: #1d1d1f; background: #fff; }
header, .intro, nav { max-width: 1100px; margin: 0 auto; padding: 0 24px; }
header h1 { font-size: 26px; margin: 24px 0 4px; }
.intro pre, .notes pre { background: #f4f4f6; padding: 8px 12px; border-radius: 4px; overflow-x: auto; }
.section { display: grid; grid-template-columns: minmax(0, 36fr) minmax(0, 64fr); border-top: 1px solid #eee; }
.notes { padding: 8px 20px; background: #fafafa; border-right: 1px solid #eee; }
.notes p { margin: 6px 0; }
.notes h3 { margin: 10px 0 4px; font-size: 15px; text-transform: uppercase; letter-spacing: .04em; color: #5a5a66; }
.notes math[display="block"] { margin: 8px 0; font-size: 110%; overflow-x: auto; }
.code pre { margin: 0; padding: 8px 12px; font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; overflow-x: auto; }
.code .ln { color: #b0b0b8; user-select: none; display: inline-block; width: 3.2em; }
code { font: 90% ui-monospace, Menlo, Consolas, monospace; background: #f0f0f3; padding: 0 3px; border-radius: 3px; }
nav ul { padding-left: 20px; } nav li { margin: 6px 0; }
"""


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


def prose(text: str) -> str:
    """Escape, then show `backticks` as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def math(latex: str) -> str:
    """LaTeX -> MathML; a formula that fails, or leaves an unknown command as text, is an error."""
    try:
        mathml = convert(latex, display="block")
    except Exception as error:
        raise ValueError(f"formula does not convert: {latex} ({type(error).__name__})") from error
    if "merror" in mathml or re.search(r">\\[A-Za-z]", mathml):
        raise ValueError(f"formula does not convert: {latex}")
    return mathml


def notes_html(lines: list[str]) -> str:
    """A comment block -> paragraphs, headings and equations."""
    parts, paragraph = [], []

    def flush():
        if paragraph:
            parts.append(f"<p>{prose(' '.join(paragraph))}</p>")
            paragraph.clear()

    for line in lines:
        text = line.strip()
        if m := MATH.match(text):
            flush()
            parts.append(math(m.group(1)))
        elif m := BANNER.match(text):
            flush()
            parts.append(f"<h3>{prose(m.group(1))}</h3>")
        else:
            paragraph.append(text[1:].strip())
    flush()
    return "\n".join(parts)


def docstring_html(doc: str) -> str:
    """The module docstring: indented lines are commands (pre), the rest prose paragraphs."""
    blocks = []
    for block in doc.strip().split("\n\n"):
        lines = block.split("\n")
        if all(line.startswith("    ") for line in lines):
            blocks.append(f"<pre>{html.escape(chr(10).join(line[4:] for line in lines))}</pre>")
        else:
            blocks.append(f"<p>{prose(' '.join(line.strip() for line in lines))}</p>")
    return "\n".join(blocks)


def render(name: str) -> str:
    source = (ROOT / f"{name}.py").read_text()
    lines = source.split("\n")
    if lines[-1] == "":
        lines.pop()
    # The module docstring opens the page as its introduction.
    doc_end = next(i for i, line in enumerate(lines[1:], 1) if line.strip().endswith('"""'))
    intro = docstring_html("\n".join(lines[: doc_end + 1]).strip('"'))
    highlighted = highlight(source, PythonLexer(), HtmlFormatter(nowrap=True)).split("\n")
    comments = comment_lines(source)

    sections, notes, code = [], [], []  # code: (line number, highlighted html)
    for number in range(doc_end + 2, len(lines) + 1):
        if number in comments:
            if code:  # a new comment block closes the section before it
                sections.append((notes, code))
                notes, code = [], []
            notes.append(lines[number - 1])
        else:
            code.append((number, highlighted[number - 1]))
    sections.append((notes, code))

    body = []
    for notes, code in sections:
        while code and not lines[code[-1][0] - 1].strip():  # trailing blank lines add nothing
            code.pop()
        if not code and not notes:
            continue
        code_html = "\n".join(f'<span class="ln">{n}</span>{h}' for n, h in code)
        anchor = f"L{code[0][0]}" if code else f"N{len(body)}"  # link to a section by its first line: page.html#L120
        body.append(f'<div class="section" id="{anchor}"><div class="notes">{notes_html(notes)}</div>'
                    f'<div class="code"><pre>{code_html}</pre></div></div>')
    return page(f"{name}.py", f"<header><h1>{name}.py</h1><p><a href=\"index.html\">pgref</a> · "
                f"{html.escape(SCRIPTS[name])}</p></header>\n<div class=\"intro\">{intro}</div>\n" + "\n".join(body))


def page(title: str, content: str) -> str:
    style = CSS + HtmlFormatter(style="default").get_style_defs(".code")
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{html.escape(title)}</title>\n"
            f"<style>{style}</style>\n</head>\n<body>\n{content}\n</body>\n</html>\n")


def index() -> str:
    items = "\n".join(f'<li><a href="{name}.html"><code>{name}.py</code></a>: {html.escape(text)}</li>'
                      for name, text in SCRIPTS.items())
    return page("pgref: annotated scripts", f"""<header><h1>pgref: the scripts, annotated</h1></header>
<nav><p>Each page shows one script, unchanged, cut into sections: on the left the comments and the
equations (typeset), on the right the code they explain, with the file's line numbers. Read them
in this order; each file's introduction names what changed from the one before.</p>
<ul>
{items}
</ul>
<p>REINFORCE weights each log-probability by the return that followed; VPG replaces that return by
an advantage measured against a learned critic; PPO reuses each batch for several epochs and
clips the probability ratio so no step strays far from the policy that collected the data; the
continuous PPO adds a Gaussian policy and the normalisation MuJoCo needs.</p></nav>""")


def browser(width: int = 1400, height: int = 1000):
    """Headless Chromium driven by Selenium, with the system's chromium and chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def screenshot(page: Path, anchor: str, path: Path) -> None:
    """A screenshot of one section of a page (the section whose first code line is `anchor`)."""
    from selenium.webdriver.common.by import By

    driver = browser()
    try:
        driver.get(page.resolve().as_uri())
        driver.execute_script("arguments[0].scrollIntoView()", driver.find_element(By.ID, anchor))
        driver.save_screenshot(str(path))
    finally:
        driver.quit()


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCRIPTS:
        path = out / f"{name}.html"
        path.write_text(render(name))
        written.append(path)
    (out / "index.html").write_text(index())
    return written + [out / "index.html"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="folder for the pages (default: docs/)")
    parser.add_argument("--screenshot", type=Path, help="also save a screenshot of ppo_continuous.html's GAE section here")
    args = parser.parse_args()
    for path in build(args.out):
        print(f"wrote {path}")
    if args.screenshot:
        gae_line = next(i for i, line in enumerate((ROOT / "ppo_continuous.py").read_text().split("\n"), 1)
                        if line.startswith("def compute_gae"))
        page_html = (args.out / "ppo_continuous.html").read_text()
        # the section that holds the `def compute_gae` line: the last one starting at or before it
        anchor = max(int(n) for n in re.findall(r'id="L(\d+)"', page_html) if int(n) <= gae_line)
        screenshot(args.out / "ppo_continuous.html", f"L{anchor}", args.screenshot)
        print(f"wrote {args.screenshot}")
