"""The algorithm stands alone, and tooling.py adds the rest from outside. Each script copied alone
into an empty folder trains and logs, with one note line that says what it runs without. Nothing
above its `__main__` imports tooling.py. A script and tooling.py copied together into a project,
the script extended with a flag and loop state of one's own, resume exactly after SIGKILL. A
script and a tooling.py of different releases are refused in one line that names both."""

import ast
import glob
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SCRIPTS, SHORT_RUNS, read_saved
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import tooling

NOTE = ("note: training without input checks, checkpoints, --resume or evaluation: tooling.py beside "
        "this file adds them")


def flags_of(name: str, tooling_flags: bool = False) -> list[str]:
    return [f"--{key.replace('_', '-')}={value}" for key, value in SHORT_RUNS[name].items()
            if tooling_flags or key != "eval_episodes"]  # eval_episodes: a flag of the tooling


def run(folder, script: str, *flags: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python <script> <flags>` in `folder`, with no PYTHONPATH: Python finds the folder's files."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, script, *flags], cwd=folder, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_alone_in_an_empty_folder_trains_and_logs_with_its_one_note(name, tmp_path):
    shutil.copy(ROOT / f"{name}.py", tmp_path)
    out = run(tmp_path, f"{name}.py", *flags_of(name))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == NOTE, out.stdout[:500]
    (folder,) = glob.glob(f"{tmp_path}/runs/*/")
    events = EventAccumulator(folder, size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "charts/episodic_return" in tags and "losses/entropy" in tags, tags
    assert len(events.Scalars("charts/episodic_return")) > 5


@pytest.mark.parametrize("name", SCRIPTS)
def test_nothing_above_main_imports_tooling_and_main_is_short(name):
    """The script's `__main__` is its last statement, of at most 10 lines, and the only place
    that names tooling."""
    tree = ast.parse((ROOT / f"{name}.py").read_text())
    *above, main = tree.body
    assert isinstance(main, ast.If) and ast.unparse(main.test) == "__name__ == '__main__'"
    assert main.end_lineno - main.lineno + 1 <= 10
    names = {n.id for node in above for n in ast.walk(node) if isinstance(n, ast.Name)}
    imports = {a.name for node in above for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)
               for a in n.names}
    assert "tooling" not in names | imports


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_script_alone_is_clean(name, tmp_path):
    """A script has no finding of ruff (its settings are the project's), and its docstring's
    commands use no flag that it lacks but where they say that the flag comes from the tooling."""
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(ROOT / "pyproject.toml"),
                          str(ROOT / f"{name}.py")], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    module = __import__(name)
    flags = {"help"} | {field.replace("_", "-") for field in module.Args.__dataclass_fields__}
    flags |= {"no-" + flag for flag in flags}
    for line in ast.get_docstring(ast.parse((ROOT / f"{name}.py").read_text())).splitlines():
        if line.lstrip().startswith(f"python {name}.py") and "(tooling)" not in line:
            assert set(re.findall(r"--([a-z-]+)", line)) <= flags, line


# A copy of ppo_discrete.py in a project of one's own, extended as a researcher extends it: a
# flag, and loop state (an entropy coefficient that decays by the flag after each update) that
# state() names and train reads back. Each edit: (the code it replaces, the new code).
EXTENSION = [
    ('    ent_coef: float = 0.01\n',
     '    ent_coef: float = 0.01\n    ent_decay: float = 0.9\n    """factor of the entropy coefficient after each update"""\n'),
    ('    def state() -> dict:\n', '    ent_scale = 1.0\n\n    def state() -> dict:\n'),
    ('"rng": torch.get_rng_state()}', '"rng": torch.get_rng_state(), "ent_scale": ent_scale}'),
    ('        episodic_returns = loop["episodic_returns"]\n',
     '        episodic_returns, ent_scale = loop["episodic_returns"], loop["ent_scale"]\n'),
    ('args.clip_vloss, args.ent_coef, args.vf_coef)', 'args.clip_vloss, args.ent_coef * ent_scale, args.vf_coef)'),
    ('        # --- log: ', '        ent_scale *= args.ent_decay\n        # --- log: '),
]


def weights(folder) -> str:
    model = read_saved(f"{folder}/model.pt")["model"]
    return hashlib.sha1(b"".join(t.numpy().tobytes() for t in model.values())).hexdigest()


def test_a_copy_with_tooling_extended_with_a_flag_and_loop_state_resumes_exactly_after_sigkill(tmp_path, monkeypatch):
    source = (ROOT / "ppo_discrete.py").read_text()
    for old, new in EXTENSION:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    (tmp_path / "my_ppo.py").write_text(source)
    shutil.copy(ROOT / "tooling.py", tmp_path)
    flags = ["--total-timesteps=6144", "--ent-decay=0.5", "--eval-episodes=2", "--save-model", "--checkpoint-every=1"]
    whole = run(tmp_path, "my_ppo.py", *flags, "--log-dir=whole")
    assert whole.returncode == 0 and "note:" not in whole.stdout + whole.stderr, whole.stderr
    proc = subprocess.Popen([sys.executable, "my_ppo.py", *flags, "--log-dir=killed"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not glob.glob(f"{tmp_path}/killed/*/checkpoint.pt") and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run ended before it could be killed mid-run"
    (folder,) = glob.glob(f"{tmp_path}/killed/*/")
    resumed = run(tmp_path, "my_ppo.py", f"--resume={folder}checkpoint.pt")
    assert resumed.returncode == 0, resumed.stderr
    (whole_folder,) = glob.glob(f"{tmp_path}/whole/*/")
    assert weights(folder) == weights(whole_folder)
    monkeypatch.syspath_prepend(str(tmp_path))  # the checkpoints pickle my_ppo's classes
    states = [read_saved(f"{f}checkpoint.pt", weights_only=False)["state"] for f in (folder, whole_folder)]
    assert states[0]["ent_scale"] == states[1]["ent_scale"] == 0.5 ** 12  # 12 updates of 4 × 128 steps
    assert resumed.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1]  # the evaluation's line
    # the flag and the loop state matter: without the decay, the run ends elsewhere
    run(tmp_path, "my_ppo.py", *flags[:1], "--ent-decay=1", *flags[2:], "--log-dir=other")
    assert weights(glob.glob(f"{tmp_path}/other/*/")[0]) != weights(whole_folder)


def test_a_script_and_tooling_of_different_releases_are_refused_in_one_line(tmp_path):
    source = (ROOT / "reinforce.py").read_text()
    assert source.count(f'"reinforce", "{tooling.RELEASE}"') == 1
    (tmp_path / "reinforce.py").write_text(source.replace(f'"reinforce", "{tooling.RELEASE}"', '"reinforce", "0.4.9"'))
    shutil.copy(ROOT / "tooling.py", tmp_path)
    out = run(tmp_path, "reinforce.py", "--total-timesteps=5000")
    assert out.returncode == 1 and out.stderr.strip() == (
        f"reinforce.py: error: reinforce.py is of pgref 0.4.9 and tooling.py of pgref {tooling.RELEASE}: use the "
        "tooling.py of the script's release (CHANGELOG.md names each release's commit)"), out.stderr
    assert not (tmp_path / "runs").exists()
