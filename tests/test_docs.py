"""docs/: the committed pages are what docs/build.py makes from the scripts today, every formula
converts, and in a real browser (Debian's headless Chromium) every formula is typeset."""

import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import build  # noqa: E402


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
    assert page.count("<math ") == len(formulas(name)) and "merror" not in page
    assert "# math:" not in page.split('<div class="section"', 1)[1]  # no marker left outside the intro's prose
    # every line after the module docstring is on the page: code with its line number, comments as notes
    lines = (ROOT / f"{name}.py").read_text().split("\n")
    shown = set(map(int, re.findall(r'<span class="ln">(\d+)</span>', page)))
    after_docstring = range(min(shown), len(lines))
    missing = [n for n in after_docstring if n not in shown and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")]
    assert not missing, missing


@pytest.mark.parametrize("latex", [r"\frac{1}{", r"\nosuchcommand{x}"])
def test_a_formula_that_does_not_convert_stops_the_build(latex):
    with pytest.raises(ValueError, match="does not convert"):
        build.notes_html([f"# math: {latex}"])


@pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver")),
                    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")
def test_math_is_typeset_in_a_real_browser(tmp_path):
    from selenium.webdriver.common.by import By

    driver = build.browser()
    try:
        for name in build.SCRIPTS:
            driver.get((ROOT / "docs" / f"{name}.html").resolve().as_uri())
            maths = driver.find_elements(By.TAG_NAME, "math")
            assert len(maths) == len(formulas(name))
            for element in maths:
                assert element.size["width"] > 20 and element.size["height"] > 8, (name, element.get_attribute("outerHTML")[:200])
            visible = "\n".join(section.text for section in driver.find_elements(By.CLASS_NAME, "section"))
            assert "# math:" not in visible and "$" not in visible and "\\frac" not in visible
        driver.get((ROOT / "docs" / "index.html").resolve().as_uri())
        assert len(driver.find_elements(By.CSS_SELECTOR, "nav a")) == 4
        driver.save_screenshot(str(tmp_path / "index.png"))
        assert Path(tmp_path / "index.png").stat().st_size > 5_000
    finally:
        driver.quit()
