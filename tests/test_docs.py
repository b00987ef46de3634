"""docs/: the committed pages are what docs/build.py makes from the scripts and tooling.py today,
every formula converts, and in a real browser (Debian's headless Chromium) every formula is
typeset."""

import ast
import html
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, _module

sys.path.insert(0, str(ROOT / "docs"))
import build  # noqa: E402

import tooling


def formulas(name: str) -> list[str]:
    return re.findall(r"^\s*# math: (.*)$", (ROOT / f"{name}.py").read_text(), flags=re.M)


def test_committed_pages_match_a_fresh_build(tmp_path):
    build.build(tmp_path)
    for page in sorted(tmp_path.glob("*.html")):
        committed = ROOT / "docs" / page.name
        assert committed.exists() and committed.read_text() == page.read_text(), \
            f"docs/{page.name} is out of date: run python docs/build.py and commit the pages"


@pytest.mark.parametrize("name", list(build.SCRIPTS))
def test_every_formula_converts_and_every_line_is_shown(name):
    page = build.render(name)
    assert len(formulas(name)) >= 4  # every script states its equations
    # each `# math:` line, and each formula indented in a docstring (the rewards-to-go; GAE's δ_t
    # and A_t), typeset as a block
    docstring_formulas = {"reinforce": 1, "vpg": 2, "trpo": 2, "ppo_discrete": 2, "ppo_continuous": 2,
                          "ppo_recurrent": 2, "ppo_atari": 2}[name]
    assert page.count('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"') == \
        len(formulas(name)) + docstring_formulas and "merror" not in page
    assert "# math:" not in page.split('<div class="section"', 1)[1]  # no marker left outside the intro's prose
    # every line after the module docstring is on the page: code with its line number, comments as notes
    # (a docstring is read in the notes, typeset: its element there names its lines, data-lines="a-b")
    lines = (ROOT / f"{name}.py").read_text().split("\n")
    shown = set(map(int, re.findall(r'<span class="ln">(\d+)</span>', page)))
    as_notes = {n for a, b in re.findall(r'data-lines="(\d+)-(\d+)"', page) for n in range(int(a), int(b) + 1)}
    assert not shown & as_notes  # never both
    shown |= as_notes
    after_docstring = range(min(shown), len(lines))
    missing = [n for n in after_docstring if n not in shown and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")]
    assert not missing, missing


def text(fragment: str) -> str:
    """What a reader reads of some HTML: tags out, entities decoded, whitespace made single spaces."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


@pytest.mark.parametrize("name", [*build.SCRIPTS, build.TOOLING])
def test_the_notes_never_repeat_the_code_column(name):
    """No paragraph or table cell of the notes is found word for word in the page's code column
    (its code, comments and docstrings): what the notes say, the code column does not say again."""
    page = build.render(name)
    code = " ".join(text(re.sub(r'<span class="ln">\d*</span>', "", c))
                    for c in re.findall(r'<div class="code">(.*?)</div></div>', page, flags=re.S))
    notes = "".join(re.findall(r'<div class="notes">(.*?)</div><div class="code">', page, flags=re.S))
    cells = [text(cell) for _, cell in re.findall(r"<(p|td)\b[^>]*>(.*?)</\1>", notes, flags=re.S)]
    # (a floor, so that the check cannot pass on an empty page: since 0.5.0 a script ends with its
    # algorithm, without the tooling, and reinforce.py's code column is about 9,000 characters)
    assert len(cells) > 50 and len(code) > 6_000
    repeated = [cell for cell in cells if len(cell) >= 20 and cell in code]
    assert not repeated, repeated[:3]


def numbers(fragment: str) -> list[int]:
    """The line numbers of the code column in some HTML of a page."""
    return [int(n) for n in re.findall(r'<span class="ln">(\d+)</span>', fragment)]


@pytest.mark.parametrize("name", list(build.SCRIPTS))
def test_script_pages_fold_nothing_but_imports_end_with_main_and_link_the_tooling(name):
    """Since 0.5.0 a script ends with its algorithm and its `__main__`, and the tooling is
    tooling.py: the page folds only the imports, its last section shows the `__main__` to the
    file's last line, and the page links tooling.html."""
    page = build.render(name)
    lines = (ROOT / f"{name}.py").read_text().split("\n")
    assert "<details" in page and not re.findall(r'<details(?! class="imports")', page)
    assert "# --- tooling" not in "\n".join(lines)
    main = next(n for n, line in enumerate(lines, 1) if line.startswith('if __name__ == "__main__":'))
    last = max(n for n, line in enumerate(lines, 1) if line.strip())
    sections = re.split(r'(?=<div class="section)', page.split('<div class="sections">', 1)[1])
    assert main in numbers(sections[-1]) and max(numbers(page)) == last
    intro = page.split('<div class="sections">', 1)[0]
    assert '<a href="tooling.html">tooling.html</a>' in intro


def test_the_tooling_page_shows_every_line_of_tooling_py_once_with_its_notes_beside_them():
    """tooling.html renders tooling.py as a script page is rendered, without a pseudocode box: every
    line after its docstring once (code with its number, a docstring or a flag's meaning in the
    notes), the flags of RunFlags in a table, and each note of docs/notes/tooling.md beside the line
    it names. The index and every script page link it."""
    page = build.render(build.TOOLING)
    source = (ROOT / "tooling.py").read_text()
    lines = source.split("\n")
    assert '<div class="pseudocode">' not in page and "<h1>tooling.py</h1>" in page
    shown = numbers(page)
    as_notes = [n for a, b in re.findall(r'data-lines="(\d+)-(\d+)"', page) for n in range(int(a), int(b) + 1)]
    assert len(shown) == len(set(shown)) and len(as_notes) == len(set(as_notes)) and not set(shown) & set(as_notes)
    docstring_end = ast.parse(source).body[0].end_lineno
    missing = [n for n in range(docstring_end + 1, len(lines) + 1) if n not in set(shown) | set(as_notes)
               and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")]
    assert not missing, missing
    assert max(shown) == max(n for n, line in enumerate(lines, 1) if line.strip())
    flags = re.findall(r"<td><code>(--[\w-]+)</code></td>", page)
    assert flags == ["--" + f.replace("_", "-") for f in tooling.RunFlags.__dataclass_fields__]
    notes = build.side_notes.load(build.TOOLING, source)
    assert len(notes) >= 10 and any(note.line == 0 for note in notes)
    intro = page.split('<div class="sections">')[0]
    for note in notes:
        shown_note = build.side_notes.html(note, build.prose_block, build.math)
        assert page.count(shown_note) == 1, note.anchor
        assert shown_note in (intro if note.line == 0 else section_of(page, note.line).split('<div class="code">')[0]), \
            note.anchor
    assert '<a href="tooling.html">' in build.index()


def test_script_pages_list_every_flag_after_its_heading():
    """A script page lists the flags of `--help` in its order: Args' (under each banner of Args,
    such as "the run"), then the tooling's (tooling.py's RunFlags) under a heading of their own that
    links them on tooling.html."""
    for name in build.SCRIPTS:
        module = _module(name)
        page = build.render(name)
        flags = re.findall(r"<td><code>(--[\w-]+)</code></td>", page)
        assert flags == ["--" + f.replace("_", "-") for f in tooling.run_args(module).__dataclass_fields__], name
        # each banner of Args comes before the table of the flags below it
        lines = (ROOT / f"{name}.py").read_text().split("\n")
        args = next(n for n in ast.parse("\n".join(lines)).body if isinstance(n, ast.ClassDef) and n.name == "Args")
        banners = [n for n in range(args.lineno, args.end_lineno + 1) if build.BANNER.match(lines[n - 1].strip())]
        assert banners, f"{name}.py: Args has no banner of its own (# --- the run ---)"
        for n in banners:
            field = next(re.match(r"    (\w+):", line)[1] for line in lines[n:] if re.match(r"    \w+:", line))
            assert page.index(f'<h3 id="line-{n}">') < page.index(f"<td><code>--{field.replace('_', '-')}</code>"), \
                (name, lines[n - 1])
        last = "--" + list(module.Args.__dataclass_fields__)[-1].replace("_", "-")
        assert page.index(f"<td><code>{last}</code>") < page.index("the tooling's flags") \
            < page.index("<td><code>--exp-name")
        assert '<a href="tooling.html#line-' in page.split("the tooling's flags", 1)[1].split("</h3>", 1)[0]


def pseudocode_box(page: str) -> str:
    return page.split('<div class="pseudocode">', 1)[1].split("</div>", 1)[0]


@pytest.mark.parametrize("name", list(build.SCRIPTS))
def test_the_pseudocode_opens_the_page_and_each_step_links_its_code(name):
    """The module docstring's numbered steps are the intro's first list, typeset; every step links
    at least one line, and every link lands on an anchor of the page whose line holds what the link
    names: a `def`/`class`, a banner of `train`, a flag that `train` reads, or a name it assigns."""
    page = (ROOT / "docs" / f"{name}.html").read_text()
    lines = (ROOT / f"{name}.py").read_text().split("\n")
    tree = ast.parse("\n".join(lines))
    intro = page.split('<div class="intro">', 1)[1].split('<div class="sections">', 1)[0]
    assert intro.index('<div class="pseudocode">') < intro.index("<pre>")  # the shape before the commands
    box = pseudocode_box(page)
    assert box.count("<ol>") == 1 and box.endswith("</ol>")
    steps = re.findall(r"<li>(.*?)</li>", box)
    written = re.findall(r"^    (\d+)\. ", "\n".join(lines[:40]), flags=re.M)
    assert len(steps) == len(written) >= 5 and "<pre>" not in box
    assert "<math" in box and "_θ" not in text(box)  # π_θ and its kin typeset, as in the notes
    ids = set(re.findall(r'id="(line-\d+)"', page))
    for k, step in enumerate(steps, 1):
        links = re.findall(r'<a href="#(line-(\d+))"><code>(.*?)</code></a>', step)
        assert links, f"{name}.html: step {k} links no code"
        for anchor, number, shown in links:
            named, line = html.unescape(shown), lines[int(number) - 1]
            assert anchor in ids, f"{name}.html, step {k}: #{anchor} is no anchor of the page"
            if m := re.fullmatch(r"--- (.+) ---", named):
                expected = rf"# --- {re.escape(m[1])}(:| ---)"
            elif named.startswith("--"):
                expected = rf"args\.{named[2:].replace('-', '_')}\b"
            elif named[0].isupper() or "." in named or f"def {named}(" in "\n".join(lines):
                expected = rf"^\s*(def|class) {re.escape(named.rsplit('.', 1)[-1])}\b"
            else:  # a name that train assigns, on that line (of a statement that may run on over more)
                assert any(isinstance(node, ast.Name) and node.id == named and isinstance(node.ctx, ast.Store)
                           and node.lineno == int(number) for node in ast.walk(tree)), (name, k, named, line)
                continue
            assert re.search(expected, line), f"{name}.html, step {k}: `{named}` links line {number}: {line!r}"


@pytest.mark.parametrize("wrong", ["(`compute_gae`)", "(`--- rollout ---`)", "(`vpg_loss`)"])
def test_a_pseudocode_name_that_stands_for_no_line_stops_the_build(wrong):
    """A renamed function, banner or flag cannot leave a dead link: the build stops and names it."""
    source = (ROOT / "vpg.py").read_text()
    made_up = wrong.replace("compute_gae", "compute_gea").replace("rollout", "rollouts").replace("vpg_loss", "--vpg-loss")
    assert wrong in source.split('"""', 2)[1]
    with pytest.raises(ValueError, match=re.escape(made_up[1:-1])):
        build.render("vpg", source.replace(wrong, made_up, 1))
    build.render("vpg", source)  # the file itself builds


def test_step_pages_leave_out_rewraps_and_typeset_equations():
    old = ["    # The quick brown fox", "    # jumps over the dog.", "    x = 1"]
    rewrapped = ["    # The quick brown", "    # fox jumps over the dog.", "    x = 1"]
    assert {tag for tag, *_ in build.changes(old, rewrapped)} == {"equal"}
    assert {tag for tag, *_ in build.changes(old, old[:2] + ["    x = 2"])} != {"equal"}
    page = build.step_page("trpo", "ppo_discrete")
    diff = page.split('<div class="diff">', 1)[1]
    assert '<span class="c1"># math:' not in diff and "<math" in diff  # every `# math:` line typeset
    assert '<span class="k">def</span>' in diff  # highlighted
    assert re.search(r'<span class="ln">\d+</span>', diff)  # with line numbers
    first, second = diff.split('<h2 id="step-2">')
    second, rest = second.split("<h2>Everything else")
    # in each step, the algorithm's change first: the new loss before the networks and the loop
    # (the headings of the differences: a sub-step's notes, above them, may name any definition)
    assert first.index("<h3><code>surrogate</code>") < first.index("<h3><code>train</code>")
    assert second.index("<h3><code>ppo_loss</code> (new)") < second.index("<h3><code>Agent</code>")
    # TRPO's surrogate becomes the clipped one, in place, and its trust-region machinery goes in
    # the first step; the critic's own loss goes in the second, where actor and critic share one
    assert "<h3><code>surrogate</code></h3>" in first and "<code>trpo_step</code> (gone)" in first
    assert "<code>value_loss</code> (gone)" in second and "<code>value_loss</code>" not in first
    # after the steps, everything else: the lines that name the script and its spaces
    assert "<h3><code>ALGORITHM, RELEASE</code></h3>" in rest and "<h3><code>SPACES</code></h3>" in rest
    assert "Everything else: imports, the script's names and the command line" in page
    diff = build.step_page("vpg", "trpo").split('<div class="diff">', 1)[1]
    assert diff.index("<code>surrogate</code> (was <code>vpg_loss</code>)") < diff.index("<code>trpo_step</code> (new)")


def test_a_step_page_hides_no_single_context_line():
    """Between two changes, two lines of context each: a gap of one line is shown, not replaced by
    a ⋯ that would cut a sentence there; a gap of two lines is folded."""
    def rows(gap):
        old = ["a = 0"] + [f"x{k} = {k}" for k in range(4 + gap)] + ["b = 0"]
        new = ["a = 1"] + old[1:-1] + ["b = 1"]
        hl = [html.escape(line) for line in old + new]
        out = build.diff_html((1, old), (1, new), hl, hl)
        return out.count("⋯"), len(re.findall(r'class="same"', out))
    assert rows(1) == (0, 5) and rows(2) == (1, 4) and rows(0) == (0, 4)


TITLES = {("reinforce", "vpg"): "reinforce.py → vpg.py in 5 steps", ("vpg", "trpo"): "vpg.py → trpo.py: a bounded step",
          ("trpo", "ppo_discrete"): "trpo.py → ppo_discrete.py in 2 steps",
          ("vpg", "ppo_discrete"): "vpg.py → ppo_discrete.py in 2 steps",
          ("ppo_discrete", "ppo_continuous"): "ppo_discrete.py → ppo_continuous.py in 4 steps",
          ("ppo_discrete", "ppo_recurrent"): "ppo_discrete.py → ppo_recurrent.py: memory",
          ("ppo_discrete", "ppo_atari"): "ppo_discrete.py → ppo_atari.py in 2 steps"}


@pytest.mark.parametrize("old,new", TITLES)
def test_each_step_page_names_its_steps_and_links_its_real_predecessor(old, new):
    page = build.step_page(old, new)
    heading = page.split("<h1>", 1)[1].split("</h1>", 1)[0]
    assert heading == html.escape(TITLES[old, new], quote=False) or heading.startswith(TITLES[old, new]), heading
    intro = page.split('<div class="intro">', 1)[1].split("</div>", 1)[0]
    assert intro.count("<li>") == len(build.SUBSTEPS.get((old, new), [])) + 1
    assert f'<a href="{old}.html">← {old}.py</a>' in page and f'<a href="{new}.html">{new}.py →</a>' in page
    assert set(TITLES) == set(build.STEPS)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG, from its header."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_every_step_page_shows_its_figure_made_from_committed_runs(tmp_path):
    """Each step page shows its figure, docs/figures/step-<from>-to-<to>.png, at the size it is
    drawn, with alt text and its caption. The runs it names are finished and committed, with the
    seeds its caption states. benchmarks/report.py, run on the committed runs, draws the same
    figures and writes the same captions."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import report
    import run

    assert set(report.STEP_FIGURES) == set(build.STEPS)
    entries = json.loads((build.FIGURES / "steps.json").read_text())
    assert set(entries) == {f"{old}-to-{new}" for old, new in build.STEPS}
    for old, new in build.STEPS:
        entry, page = entries[f"{old}-to-{new}"], (ROOT / "docs" / f"{old}-to-{new}.html").read_text()
        figure = re.search(r'<figure class="step-figure"><img src="figures/([^"]+)" width="(\d+)" height="(\d+)" '
                           r'alt="([^"]+)"><figcaption>(.+?)</figcaption></figure>', page)
        assert figure, f"docs/{old}-to-{new}.html shows no figure"
        image, width, height, alt, caption = figure.groups()
        assert image == entry["image"] == f"step-{old}-to-{new}.png" and alt == html.escape(entry["alt"])
        assert png_size(build.FIGURES / image) == (int(width), int(height)) == (480, 300)
        assert caption.count("<p>") == 3 and "bootstrap interval" in caption and "benchmarks/results/runs/" in caption
        seeds = re.search(r"seeds (\d+)-(\d+)\.", entry["caption"])
        for run_id in entry["runs"]:
            result = ROOT / "benchmarks" / "results" / "runs" / run_id / "result.json"
            assert result.is_file(), f"{old}-to-{new}: no committed run {run_id}"
            r = json.loads(result.read_text())
            assert r["status"] == "ok" and int(seeds[1]) <= r["seed"] <= int(seeds[2]), (run_id, seeds[0])
            assert re.sub(r"seed\d+$", "seed*", run_id) in entry["caption"]
        lines, _, *games = report.STEP_FIGURES[old, new]
        assert len(entry["runs"]) == sum(len(cell[-1]) for cell in lines) * (len(games[0]) if games else 1)
        assert all(list(cell[-1]) == list(range(int(seeds[1]), int(seeds[2]) + 1)) for cell in lines)
    fresh = report.step_figures(run.load_results(run.DEFAULT_OUT), tmp_path)
    assert fresh == entries, "docs/figures/ is out of date: run python benchmarks/report.py"
    for entry in fresh.values():
        assert png_size(tmp_path / entry["image"]) == png_size(build.FIGURES / entry["image"])


def test_a_step_figure_needs_its_runs(tmp_path, monkeypatch):
    """A figure whose runs have not finished stops report.py, and a page without its figure stops
    the build."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import report
    import run

    (lines, note), *_ = report.STEP_FIGURES.values()
    monkeypatch.setattr(report, "STEP_FIGURES", {("reinforce", "vpg"): ([(*lines[0][:3], "no-such-variant", [1])], note)})
    with pytest.raises(FileNotFoundError, match="no-such-variant"):
        report.step_figures(run.load_results(run.DEFAULT_OUT), tmp_path)
    (tmp_path / "steps.json").write_text("{}")
    monkeypatch.setattr(build, "FIGURES", tmp_path)
    with pytest.raises(FileNotFoundError, match="run python benchmarks/report.py"):
        build.step_page("reinforce", "vpg")


def test_a_step_whose_docstring_names_no_idea_stops_the_build():
    doc = "Title.\n\nWhat changes from vpg.py, one idea: a bounded step. More.\n\nEnd."
    assert build.step_idea("vpg", "trpo", doc) == ("a bounded step", True)
    assert build.step_idea("vpg", "trpo", "What changes from vpg.py: details. More.") == ("details", False)
    for wrong in ("What changes: a bounded step.", "What changes from reinforce.py, one idea: x."):
        with pytest.raises(ValueError, match="names its idea"):
            build.step_idea("vpg", "trpo", wrong)


# Lines changed by each step of the reading order (`diff A B | grep -c '^[<>]'`): the course's
# targets are 300 / 250 / 300 / 200; where a step is still above its target, its limit is what it
# changes today, so that it can only fall. Each script's loop state (`state()` in `train`) names
# its own objects (2 lines per step); ppo_discrete.py alone refuses Discrete(n, start=k) with the
# wrapper that fixes it (3 lines more than ppo_continuous.py's refusal of non-Box actions). Claims
# made true (Adam's step, the damped natural gradient, the KL over states, the
# share of clipped actions, VPG's bias and scale, PPO's normalisation) take 5 to 11 comment
# lines more per step. The newer file's docstring names the step's sub-steps, each a file in steps/,
# with their ideas: 10 to 20 lines more; tests/test_steps.py counts each sub-step's own lines.
# Each Agent's `greedy_action`, the one method the tooling calls, is its own (the mode of a
# Categorical, a mean, a normalised mean: 6 to 12 lines where the heads differ), and `train` reads
# its state back by name, each name on its own (2 to 4 lines).
STEP_LIMITS = {("reinforce", "vpg"): 338, ("vpg", "trpo"): 282, ("trpo", "ppo_discrete"): 509,
               ("ppo_discrete", "ppo_continuous"): 243}


@pytest.mark.parametrize("old,new", STEP_LIMITS)
def test_each_step_of_the_reading_order_changes_few_lines(old, new):
    diff = subprocess.run(["diff", f"{old}.py", f"{new}.py"], capture_output=True, text=True, cwd=ROOT).stdout
    changed = sum(line[:1] in "<>" for line in diff.splitlines() if line)
    assert changed <= STEP_LIMITS[old, new], f"{old}.py -> {new}.py changes {changed} lines"


@pytest.mark.parametrize("latex", [r"\frac{1}{", r"\nosuchcommand{x}"])
def test_a_formula_that_does_not_convert_stops_the_build(latex):
    with pytest.raises(ValueError, match="does not convert"):
        build.notes_html([f"# math: {latex}"])


PAGES = ([f"{name}.html" for name in build.SCRIPTS] + [f"{a}-to-{b}.html" for a, b in build.STEPS]
         + [f"{build.TOOLING}.html", "index.html"])
# What a reader sees, measured by the browser: elements wider than their box (a scrollbar, or text
# cut off or spilling over), and text whose case CSS changes (a heading that shows θ as Θ).
OVERFLOWING = """return Array.from(document.querySelectorAll('body *')).filter(e => e.clientWidth > 0
    && e.scrollWidth > e.clientWidth + 1).map(e => e.tagName + ' in ' + ((e.closest('[id]') || {}).id || '?')
    + ': ' + e.scrollWidth + ' > ' + e.clientWidth)"""
TRANSFORMED = """return Array.from(document.querySelectorAll('body *')).filter(e =>
    !e.closest('math') && getComputedStyle(e).textTransform != 'none').map(e => e.tagName + ': ' + e.textContent.slice(0, 40))"""
# The sections of a page that a reader sees, of all, with every fold closed: none is folded away.
SEEN = """const s = Array.from(document.querySelectorAll('.section'));
    return [s.filter(e => e.checkVisibility()).length, s.length]"""
# The central docstrings, read in the notes beside their definition with their formulas typeset.
CENTRAL = {"reinforce": ["compute_returns", "reinforce_loss"], "vpg": ["compute_gae", "vpg_loss"],
           "trpo": ["surrogate", "fisher_vector_product", "conjugate_gradient", "trpo_step"],
           "ppo_discrete": ["surrogate", "ppo_loss"], "ppo_continuous": ["surrogate", "ppo_loss"],
           "ppo_recurrent": ["surrogate", "ppo_loss"], "ppo_atari": ["surrogate", "ppo_loss"]}
# The section whose code holds `def <name>(`: the height of its notes' docstring, the sizes of the
# formulas in its notes, how many docstring lines its code column shows (pygments' class "sd").
BESIDE = """const s = Array.from(document.querySelectorAll('.section')).find(e =>
        e.querySelector('.code').textContent.includes('def ' + arguments[0] + '('));
    const doc = s.querySelector('.notes .docstring');
    return [doc ? doc.getBoundingClientRect().height : 0,
            Array.from(s.querySelectorAll('.notes math')).map(m => m.getBoundingClientRect().height),
            s.querySelectorAll('.code .sd').length]"""
# Each fraction in a step page's code lines: its height and the font size of its numerator, in px.
FRACTIONS = """return Array.from(document.querySelectorAll('.diff mfrac')).map(f =>
    [f.getBoundingClientRect().height, parseFloat(getComputedStyle(f.firstElementChild).fontSize)])"""
# Two formulas on neighbouring code lines of a step page that come closer than 3 px: (the first
# line's text, the gap in px). Stacked fractions that touch read as one.
TOUCHING = """const rows = Array.from(document.querySelectorAll('.diff pre > span')), out = [];
    for (let i = 0; i + 1 < rows.length; i++) {
        const a = rows[i].querySelector('math'), b = rows[i + 1].querySelector('math');
        if (!a || !b) continue;
        const gap = b.getBoundingClientRect().top - a.getBoundingClientRect().bottom;
        if (gap < 3) out.push([rows[i].textContent.slice(0, 50), gap]); }
    return out"""
# Each hat over a single capital letter: where its centre is across the letter's box (0 its left
# edge, 1 its right edge). An italic capital's top is right of its box's centre.
HATS = """return Array.from(document.querySelectorAll('mover')).filter(m => m.lastElementChild.textContent == '\u02c6'
    && /^[A-Z]$/.test(m.firstElementChild.textContent)).map(m => {
    const b = m.firstElementChild.getBoundingClientRect(), h = m.lastElementChild.getBoundingClientRect();
    return [m.firstElementChild.textContent, (h.left + h.width / 2 - b.left) / b.width]; })"""


@pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver")),
                    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")
@pytest.mark.parametrize("width", [1366, 1920])
def test_what_a_reader_sees_in_a_real_browser(width, tmp_path):
    """At a laptop's 1366 x 768 and at 1920 px: every formula typeset (a box of real size), nothing
    scrolls sideways or is cut off, no heading's case changed, the step pages load and link on; on
    a script page and on tooling.html every section in view, none folded away; on a script page
    the central docstrings in the notes beside their code, typeset, not in the code column, and a
    link that opens tooling.html; a step page's fractions as large as its code."""
    from selenium.webdriver.common.by import By

    driver = build.browser(width, 768 if width == 1366 else 1080)
    hatted = []  # the capitals seen with a hat
    try:
        for name in PAGES:
            driver.get((ROOT / "docs" / name).resolve().as_uri())
            if name[:-5] in [*build.SCRIPTS, build.TOOLING]:
                drawn, sections = driver.execute_script(SEEN)
                assert drawn == sections >= 10 and not driver.find_elements(By.CSS_SELECTOR, "details.tooling"), \
                    (name, width, drawn, sections)
            if name[:-5] in build.SCRIPTS:
                for definition in CENTRAL[name[:-5]]:
                    docstring, maths, raw = driver.execute_script(BESIDE, definition)
                    assert docstring > 40 and maths and min(maths) > 8, (name, width, definition, docstring, maths)
                    assert raw == 0, (name, width, definition, "docstring in the code column")
                assert not driver.find_elements(By.CSS_SELECTOR, ".code .sd"), name  # no docstring left there
                link = driver.find_element(By.CSS_SELECTOR, '.intro a[href="tooling.html"]')
                assert link.is_displayed() and link.size["height"] >= 10, (name, width)
            if "-to-" in name:  # fractions as readable as the code: numerator and denominator at its size
                fractions = driver.execute_script(FRACTIONS)
                code_px = float(driver.find_element(By.CSS_SELECTOR, ".diff pre").value_of_css_property("font-size")[:-2])
                # (a step whose lines of math are unchanged, as to ppo_atari.py, shows no fraction)
                assert fractions or "<mfrac" not in driver.page_source, (name, width)
                assert all(h >= 24 and px >= code_px for h, px in fractions), (name, width, fractions)
                assert driver.execute_script(TOUCHING) == [], (name, width)  # no formula touches another
            hats = driver.execute_script(HATS)
            hatted += [letter for letter, _ in hats]
            assert all(0.55 <= x <= 0.8 for _, x in hats), (name, width, [h for h in hats if not 0.55 <= h[1] <= 0.8])
            maths = driver.find_elements(By.TAG_NAME, "math")
            if name[:-5] in build.SCRIPTS:
                blocks = driver.find_elements(By.CSS_SELECTOR, 'math[display="block"]')
                assert len(blocks) >= len(formulas(name[:-5])) >= 4
            for element in maths:
                assert element.size["width"] > 5 and element.size["height"] > 8, (name, element.get_attribute("outerHTML")[:200])
            assert driver.execute_script(OVERFLOWING) == [], (name, width)
            assert driver.execute_script("return document.documentElement.scrollWidth") <= width
            assert driver.execute_script(TRANSFORMED) == [], name
            visible = driver.find_element(By.TAG_NAME, "body").text
            sections = "\n".join(section.text for section in driver.find_elements(By.CLASS_NAME, "section"))
            if name[:-5] in build.SCRIPTS:  # (a step page shows the source's lines as they are)
                assert "# math:" not in sections and "\\frac" not in visible
            if "-to-" in name:  # a step page: the change named first, then the differences, algorithm first
                headings = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
                assert "→" in headings[0] and headings[-1].startswith("Everything else"), headings
                assert "What changes from" in visible
                assert "\\frac" not in visible  # equations typeset
                assert driver.find_elements(By.CSS_SELECTOR, ".diff math") and driver.find_elements(By.CSS_SELECTOR, ".diff .ln")
                assert driver.find_elements(By.CSS_SELECTOR, ".diff .add") and driver.find_elements(By.CSS_SELECTOR, ".diff .del")
            # notes at a readable measure on every screen: about 90 characters a line at most
            widest = driver.execute_script("return Math.max(0, ...Array.from(document.querySelectorAll('.notes p'))"
                                           ".map(e => e.clientWidth / parseFloat(getComputedStyle(e).fontSize)))")
            assert widest <= 46, (name, width, widest)  # in em: 44 em of this font hold about 90 characters
            if name != "index.html":
                assert len(driver.find_elements(By.CSS_SELECTOR, "nav.pages a")) >= 2
        assert {"A", "R"} <= set(hatted), set(hatted)
        driver.save_screenshot(str(tmp_path / "index.png"))
        assert Path(tmp_path / "index.png").stat().st_size > 5_000
    finally:
        driver.quit()


# Every glyph of a formula drawn smaller than 9 px, with every fold opened: (its text, its size,
# the formula). A script of a script (π_{θ_old}, 𝔼_{a∼π_old}) would be half the text's size.
SMALL_GLYPHS = """document.querySelectorAll('details').forEach(d => d.open = true);
    return Array.from(document.querySelectorAll('math mi, math mn, math mo, math mtext')).filter(e =>
        e.getClientRects().length && parseFloat(getComputedStyle(e).fontSize) < 9).map(e =>
        [e.textContent, getComputedStyle(e).fontSize, e.closest('math').textContent.slice(0, 40)])"""
# The words that a formula's letters spell, in italic and upright: each run of italic single
# letters (the browser's math-auto), and each run of upright ones (text, or letters set upright).
WORDS = """const runs = {italic: [], upright: []};
    for (const m of document.querySelectorAll('math')) {
        let kind = null, word = '';
        for (const e of m.querySelectorAll('mi, mn, mo, mtext')) {
            const k = e.tagName == 'mi' || e.tagName == 'mtext'
                ? (getComputedStyle(e).textTransform == 'math-auto' && e.textContent.length == 1 ? 'italic' : 'upright')
                : null;
            if (k != kind && word) { runs[kind].push(word); word = ''; }
            kind = k;
            if (k) word += e.textContent;
        }
        if (word) runs[kind].push(word);
    }
    return runs"""
# Each formula outside a code line whose font size is not that of the text around it: (the
# formula, its size, the text's).
MATH_SIZES = """return Array.from(document.querySelectorAll('math')).filter(m => !m.closest('pre')).map(m =>
    [m.textContent.slice(0, 40), getComputedStyle(m).fontSize, getComputedStyle(m.parentElement).fontSize])
    .filter(([, own, around]) => own != around)"""
# The height of an x in the formulas' font and in the prose's, set at 100 px.
X_HEIGHTS = """const c = document.createElement('canvas').getContext('2d'), m = document.querySelector('p math');
    const x = family => { c.font = '100px ' + family; return c.measureText('x').actualBoundingBoxAscent; };
    return [x(getComputedStyle(m).fontFamily), x(getComputedStyle(m.closest('p')).fontFamily)]"""
# Each section of a script page, with every fold opened: its id, whether it goes on with the
# definition before it (class "inner"), the top and bottom of its lines of code (the folded
# imports and the lines after them, where a section holds both), and its notes' top and bottom
# (null if it has none), in px.
FLOW = """document.querySelectorAll('details').forEach(d => d.open = true);
    return Array.from(document.querySelectorAll('.section')).map(s => {
        const code = s.querySelector('.code'), n = s.querySelector('.notes').getBoundingClientRect();
        const top = code.firstElementChild.getBoundingClientRect().top;
        const bottom = code.lastElementChild.getBoundingClientRect().bottom;
        return [s.id, s.classList.contains('inner'), top, bottom, n.height ? n.top : null, n.bottom]; })"""


@pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver")),
                    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")
@pytest.mark.parametrize("width", [1366, 1920])
def test_formulas_read_at_the_size_of_the_text_and_code_flows_on(width):
    """At 1366 and 1920 px, on every page: no glyph of a formula under 9 px; the names in formulas
    (old, new, clip, CLIP) upright, as the prose sets them; each formula outside a code line at the
    size of the text around it; every formula typeset (no δ_t or 0.8^k left as text). On a script
    page the code of a definition flows on without a gap, and each section's notes start level
    with its code or below the notes before them, never above their code or over other notes."""
    driver = build.browser(width, 768 if width == 1366 else 1080)
    italic, upright = [], []
    try:
        for name in PAGES + ["derivations.html"]:
            driver.get((ROOT / "docs" / name).resolve().as_uri())
            assert driver.execute_script(SMALL_GLYPHS) == [], (name, width)
            words = driver.execute_script(WORDS)
            italic += words["italic"]
            upright += words["upright"]
            assert driver.execute_script(MATH_SIZES) == [], (name, width)
            if name[:-5] not in [*build.SCRIPTS, build.TOOLING]:
                continue
            sections = driver.execute_script(FLOW)
            for (_, _, _, bottom, *_), (anchor, inner, top, _, _, _) in itertools.pairwise(sections):
                assert not inner or abs(top - bottom) <= 1, (name, width, anchor, top - bottom)
            notes = [(anchor, code_top, top, bottom) for anchor, _, code_top, _, top, bottom in sections if top is not None]
            for (_, _, _, above), (anchor, code_top, top, _) in itertools.pairwise(notes):
                assert top >= code_top - 1 and top >= above - 1, (name, width, anchor, code_top, top, above)
    finally:
        driver.quit()
    spelled = [word for word in italic if re.search("old|new|clip|CLIP", word)]
    assert not spelled, spelled[:5]
    assert {"old", "new", "clip", "CLIP"} <= {w for word in upright for w in re.findall("old|new|clip|CLIP", word)}


@pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver") and shutil.which("fc-list")
                         and "DejaVu Math TeX Gyre" in subprocess.run(["fc-list", ":", "family"], capture_output=True,
                                                                      text=True).stdout),
                    reason="needs chromium, chromium-driver and fonts-dejavu-extra (.ci/run installs them)")
def test_formulas_are_set_in_a_font_as_large_as_the_prose():
    """The formulas' font draws an x within a tenth of the height of the prose's x: at the same
    font size a formula reads as large as the sentence around it (Liberation Serif, the browser's
    fallback, draws it a sixth smaller)."""
    driver = build.browser(1366, 768)
    try:
        driver.get((ROOT / "docs" / "ppo_discrete.html").resolve().as_uri())
        formula, prose = driver.execute_script(X_HEIGHTS)
    finally:
        driver.quit()
    assert 0.9 <= formula / prose <= 1.1, (formula, prose)


def test_every_formula_in_the_prose_is_typeset():
    """No formula is left as text outside code: a letter, R̂ or a number followed by _ or ^."""
    written = re.compile(r"(?<![\w.])(?:[A-Za-zα-ωΑ-Ω]\u0302?|\d+(?:\.\d+)?)[_^][\w{(]")
    for page in sorted((ROOT / "docs").glob("*.html")):
        shown = re.sub(r"<(style|math|code|pre|summary)\b.*?</\1>", "", page.read_text(), flags=re.S)
        left = written.findall(text(shown))
        assert not left, (page.name, left[:5])


@pytest.mark.parametrize("name", build.SCRIPTS)
def test_a_list_in_the_module_docstring_is_a_list_on_the_page(name):
    """Each "- " line of a module docstring (a list item, continued by lines indented two spaces)
    is an item of a bulleted list on the page, not text run into the paragraph before it."""
    doc = ast.get_docstring(ast.parse((ROOT / f"{name}.py").read_text()))
    items = [line[2:] for line in doc.split("\n") if line.startswith("- ")]
    page = build.render(name)
    for item in items:
        first_words = html.escape(" ".join(item.split()[:3]))
        assert f"<li>{first_words}" in page, f"{name}.py: '- {item[:40]}…' is not a list item"
    assert page.count("<li>") >= len(items)


def section_of(page: str, line: int) -> str:
    """The HTML of the section of a script page whose code column shows `line`, or, for a line of
    a comment block (in the notes) or of a docstring, the first line shown after it: the code that
    the comment or docstring opens, in the same section."""
    sections = re.split(r'(?=<div class="section)', page)
    shown = next(n for n in itertools.count(line) if f'id="line-{n}"' in page)
    return next(s for s in sections if f'id="line-{shown}"' in s)


@pytest.mark.parametrize("name", build.SCRIPTS)
def test_every_note_of_a_script_is_beside_the_line_it_names(name):
    """Each note of docs/notes/<name>.md is on the page once: the introduction's in the
    introduction, each other one in the notes of the section that shows its line."""
    source = (ROOT / f"{name}.py").read_text()
    notes = build.side_notes.load(name, source)
    assert notes, f"docs/notes/{name}.md holds no note"
    page = build.render(name)
    intro = page.split('<div class="sections">')[0]
    for note in notes:
        shown = build.side_notes.html(note, build.prose_block, build.math)
        assert page.count(shown) == 1, (name, note.anchor)
        assert shown in (intro if note.line == 0 else section_of(page, note.line).split('<div class="code">')[0]), \
            (name, note.anchor)


@pytest.mark.parametrize("anchor,edit", [
    ("Agent.get_action_and_value", ("def get_action_and_value", "def get_action_value")),
    ("Args.gamma", ("    gamma: float", "    discount: float")),
    ("--- bootstrap and advantages ---", ("# --- bootstrap and advantages", "# --- advantages")),
    ("`next_values = torch.where(`", ("next_values = torch.where(", "next_values = torch.where (")),
])
def test_a_note_whose_anchor_no_longer_matches_stops_the_build(anchor, edit, tmp_path, monkeypatch):
    """A note names its code by a definition, a field, a banner or a line's text. When that code is
    renamed, the build stops and names the note; the script as it is builds with it."""
    (tmp_path / "ppo_discrete.md").write_text(f"# notes\n\n## {anchor}\nA note on this line.\n")
    monkeypatch.setattr(build.side_notes, "NOTES", tmp_path)
    source = (ROOT / "ppo_discrete.py").read_text()
    assert "A note on this line." in build.render("ppo_discrete", source)
    assert edit[0] in source
    with pytest.raises(ValueError, match=re.escape(f"the note '## {anchor}' names no line of ppo_discrete.py")):
        build.render("ppo_discrete", source.replace(edit[0], edit[1]))


def test_a_note_on_a_text_of_two_lines_stops_the_build(tmp_path, monkeypatch):
    (tmp_path / "ppo_discrete.md").write_text("## `torch.no_grad()`\nWhich one?\n")
    monkeypatch.setattr(build.side_notes, "NOTES", tmp_path)
    with pytest.raises(ValueError, match="lines, not one"):
        build.render("ppo_discrete")


def test_the_notes_of_each_sub_step_are_on_its_step_page_with_their_line():
    """The notes of a file in steps/ (docs/notes/steps/<file>.md) are under that sub-step on the
    step page, each headed by the line of the file it names."""
    for old, new in build.STEPS:
        page = build.step_page(old, new)
        for name in build.SUBSTEPS.get((old, new), []):
            source = build.source_of(name)
            for note in build.side_notes.load(f"steps/{name}", source):
                shown = build.side_notes.html(note, build.prose_block, build.math)
                heading = source.split("\n")[note.line - 1].strip() if note.line else "the whole file"
                assert shown in page and html.escape(heading) in page.split(shown)[0].rsplit("Note on", 1)[1], \
                    (old, new, name, note.anchor)


def test_each_ppo_file_keys_the_details_it_cites_before_it_cites_them():
    """A copied file is read alone: "core detail N" is decoded in the file, above its first use
    (issue 72, item 8)."""
    key = "item N of Huang et al. 2022's lists of PPO's details"
    for path in sorted(ROOT.glob("ppo_*.py")):
        lines = path.read_text().splitlines()
        keyed = [i for i, line in enumerate(lines) if key in line]
        cited = [i for i, line in enumerate(lines) if re.search(r"(core|continuous) detail \d", line)]
        assert keyed and cited and keyed[0] < cited[0], path.name


def _content_words(text: str) -> set[str]:
    stop = {"a", "an", "the", "of", "to", "in", "on", "and", "or", "is", "are", "be", "by", "it", "its", "as", "at",
            "for", "with", "from", "this", "that", "these"}
    return {w for w in re.findall(r"[\w'’]+", text.lower()) if w not in stop}


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?:])\s+", " ".join(text.split())) if s]


@pytest.mark.parametrize("name", [*build.SCRIPTS, build.TOOLING])
def test_no_note_repeats_a_comment_or_docstring_of_its_script(name):
    """A note says what the script does not: no sentence of docs/notes/<script>.md (of 4 words or
    more, short words aside) has 85% or more of its words in one sentence of the script's comments
    or docstrings (issue 72, item 7: trpo.md repeated trpo.py almost word for word)."""
    import io
    import tokenize

    source, sentences, block = (ROOT / f"{name}.py").read_text(), [], []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            block.append(token.string.lstrip("# "))
        elif token.type == tokenize.STRING and token.string.startswith('"""'):
            sentences += _sentences(token.string.strip('"'))
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and block:
            sentences, block = sentences + _sentences(" ".join(block)), []
    script = [_content_words(s) for s in sentences]
    repeats = []
    for note in build.side_notes.parse(build.side_notes.path_of(name).read_text()):
        for sentence in _sentences(" ".join(note.body)):
            words = _content_words(sentence)
            if len(words) >= 4 and max(len(words & s) for s in script) >= 0.85 * len(words):
                repeats.append(f"{note.anchor}: {sentence}")
    assert not repeats, repeats


@pytest.mark.parametrize("name", [*build.SCRIPTS, build.TOOLING])
def test_the_notes_of_a_section_follow_the_order_of_the_lines_they_explain(name):
    """Within a section, each docstring and each note anchored to a line comes in the order of
    its line (issue 72, item 6: the note on `torch.full((act_dim,), -0.5)` came after
    greedy_action's docstring)."""
    page = build.render(name)
    for section in re.findall(r'<div class="notes">(.*?)</div><div class="code">', page, re.S):
        lines = [int(m[0] or m[1]) for m in re.findall(r'data-anchor="(\d+)"|data-def="(\d+)"', section)]
        lines = [n for n in lines if n]  # (0: the introduction's notes)
        assert lines == sorted(lines), (name, lines)


def shown_twice(page: str) -> list[str]:
    """The added lines of a step page that it shows more than once: the same line of the same
    file twice, or a line of the algorithm's sections again under "Everything else"."""
    def added(fragment):
        rows = re.findall(r'<span class="add"><span class="ln"></span><span class="ln">(\d+)</span>\+ (.*?)</span>'
                          r'(?=<span class="(?:add|del|same|hunk)"|</pre>)', fragment)
        return [(int(n), " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())) for n, text in rows]

    body, _, rest = page.partition("<h2>Everything else")
    twice = []
    for section in re.split(r'<h2 id="step-\d+">', body)[1:]:  # one file's lines each
        numbers = [n for n, _ in added(section)]
        twice += [f"line {n} twice" for n in sorted({n for n in numbers if numbers.count(n) > 1})]
    algorithm = {text for _, text in added(body) if len(text) > 12}  # not `)` or `return x`
    return twice + [f"again under 'Everything else': {text}" for _, text in added(rest) if text in algorithm]


@pytest.mark.parametrize("old,new", TITLES)
def test_a_step_page_shows_each_added_line_once(old, new):
    """The step's sections show each change of the algorithm once, and "Everything else" only
    what they do not show. At 6ad8e2b the tooling's block repeated the algorithm's whole diff."""
    assert shown_twice(build.step_page(old, new)) == []


def test_a_page_that_shows_an_added_line_twice_is_caught():
    page = build.step_page("ppo_discrete", "ppo_atari")
    first = re.search(r'<span class="add">.*?</span></span>(?=<span)', page).group(0)
    assert shown_twice(page.replace(first, first * 2))
    old = subprocess.run(["git", "-C", str(ROOT), "show", "6ad8e2b:docs/ppo_discrete-to-ppo_atari.html"],
                         capture_output=True, text=True)
    if old.returncode == 0:  # a clone with the history: the page as it was
        assert len(shown_twice(old.stdout)) > 100


@pytest.mark.parametrize("name", list(build.SCRIPTS))
def test_each_note_on_a_flag_sits_below_that_flags_row(name):
    """A note on a field of Args is the row below its flag in the table of flags, not after the
    whole table (on ppo_atari.html, up to about 900 px from its field)."""
    lines = (ROOT / f"{name}.py").read_text().split("\n")
    page = (ROOT / "docs" / f"{name}.html").read_text()
    fields = [n for n, line in enumerate(lines, 1) if re.match(r"    \w+: .*= ", line)]
    anchors = [int(a) for a in re.findall(r'<div class="note" data-anchor="(\d+)"', page)]
    on_fields = [a for a in anchors if a in fields and "class Args" in "\n".join(lines[:a])]
    for anchor in on_fields:
        row = re.search(rf'<tr data-lines="{anchor + 1}-\d+"><td><code>--[\w-]+</code></td><td>.*?</td></tr>'
                        rf'<tr class="flag-note"><td colspan="2"><div class="note" data-anchor="{anchor}">', page)
        assert row, f"{name}.html: the note on line {anchor} ({lines[anchor - 1].strip()}) is not below its flag"
    if name == "ppo_atari":
        assert len(on_fields) >= 8
