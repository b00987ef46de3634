"""The algorithm stands alone: each script cut at its tooling banner, with one line added to run
`train`, is a complete training script that trains and writes its TensorBoard logs; and `train`
calls nothing defined below the banner."""

import ast
import glob
import re
import subprocess
import sys

import pytest
from conftest import ROOT, SCRIPTS, SHORT_RUNS
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

BANNER = "# --- tooling:"


def cut(name: str) -> str:
    """The script's text above its tooling banner, and the line that runs `train` from it."""
    source = (ROOT / f"{name}.py").read_text()
    assert source.count(BANNER) == 1, "one tooling banner"
    above = source[:source.index(BANNER)]
    return above + 'if __name__ == "__main__":\n    train(tyro.cli(Args))\n'


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_script_cut_at_its_banner_trains_and_logs(name, tmp_path):
    (tmp_path / f"{name}.py").write_text(cut(name))
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in SHORT_RUNS[name].items()
             if key != "eval_episodes"]  # a tooling flag: the cut script has none
    out = subprocess.run([sys.executable, f"{name}.py", *flags], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (folder,) = glob.glob(f"{tmp_path}/runs/*/")
    events = EventAccumulator(folder, size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "charts/episodic_return" in tags and "losses/entropy" in tags, tags
    assert len(events.Scalars("charts/episodic_return")) > 5


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_cut_script_is_clean(name, tmp_path):
    """Cut at its banner, a script has no unused import or other finding of ruff (its settings are
    the project's), and its docstring's commands use no flag that it lacks but where they say
    that the flag comes from the tooling."""
    (tmp_path / f"{name}.py").write_text(cut(name))
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(ROOT / "pyproject.toml"),
                          f"{name}.py"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    namespace = {"__file__": str(tmp_path / f"{name}.py")}
    exec(compile(cut(name).replace('if __name__ == "__main__":', "if False:"), name, "exec"), namespace)
    flags = {"help"} | {field.replace("_", "-") for field in namespace["Args"].__dataclass_fields__}
    flags |= {"no-" + flag for flag in flags}
    for line in ast.get_docstring(ast.parse(cut(name))).splitlines():
        if line.lstrip().startswith(f"python {name}.py") and "(tooling)" not in line:
            assert set(re.findall(r"--([a-z-]+)", line)) <= flags, line


@pytest.mark.parametrize("name", SCRIPTS)
def test_train_calls_nothing_below_the_banner(name):
    """No name that `train` (or anything above the banner) uses is defined below the banner."""
    source = (ROOT / f"{name}.py").read_text()
    at = source.index(BANNER)
    above, below = ast.parse(source[:at]), ast.parse(source[at:])
    defined_below = {node.name for node in below.body if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    defined_below |= {target.id for node in below.body if isinstance(node, ast.Assign)
                      for target in node.targets if isinstance(target, ast.Name)}
    used_above = {node.id for node in ast.walk(above) if isinstance(node, ast.Name)}
    assert defined_below and not used_above & defined_below, used_above & defined_below
