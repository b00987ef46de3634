"""README.md sends each reader to the right place: it stays short, its first screen says where the
student, the user and the researcher start and holds the two quick-start commands (the test
command exactly as .ci/run runs it), and every link of README.md, docs/*.md and tests/README.md
leads to a file, or a heading, that exists."""

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()
FIRST_SCREEN = "\n".join(README.split("\n")[:45])  # what a 1080-pixel screen shows, about
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "tests" / "README.md"]


def test_readme_is_short():
    assert len(README.split()) < 3000


def test_first_screen_names_each_reader_and_holds_the_quick_start():
    for reader in ("Students", "Users", "Researchers"):
        item = next(item for item in FIRST_SCREEN.split("\n- ") if item.startswith(f"**{reader}:**"))
        assert "](" in item.split("\n\n")[0], f"the {reader} item links where to start"
    ci = (ROOT / ".ci" / "run").read_text().strip().split("\n")[-1]
    assert ci in FIRST_SCREEN, "the test command of .ci/run, word for word"
    assert "pip install -r requirements.txt && python ppo_discrete.py" in FIRST_SCREEN


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_leads_somewhere():
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.relative_to(ROOT)}: {target} does not exist"
            if anchor:
                headings = re.findall(r"^#+ (.*)$", file.read_text(), flags=re.M)
                assert anchor in map(slug, headings), f"{page.relative_to(ROOT)}: no heading #{anchor}"


def test_the_minatar_command_of_readme_has_the_suites_settings():
    """README's MinAtar command carries benchmarks/presets.py's MINATAR, flag for flag."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from presets import MINATAR

    command = re.search(r"python ppo_atari\.py --env-id MinAtar/\S+ (.*?)--total-timesteps", README, flags=re.S)
    assert command and command.group(1).replace("\\\n", " ").split() == MINATAR
