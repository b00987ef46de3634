"""benchmarks/: the smoke suite end to end (runner, then report), resuming, failures, and the
aggregation behind the tables and plots on synthetic curves."""

import ast
import csv
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

import numpy as np
import pytest
from conftest import ROOT, kill_after_first_checkpoint

import tooling

sys.path.insert(0, str(ROOT / "benchmarks"))
import profile_lines  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import speed  # noqa: E402


def run_suite(out, *flags):
    return subprocess.run([sys.executable, "benchmarks/run.py", "--suite", "smoke", "--out", str(out), *flags],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def local_smoke(tmp_path_factory):
    """The smoke suite, run once with the local backend: (results folder, the runner's output)."""
    out = tmp_path_factory.mktemp("smoke")
    return out, run_suite(out, "--workers", "2")


def test_smoke_suite_runs_end_to_end_and_resumes(local_smoke):
    tmp_path, first = local_smoke
    assert first.returncode == 0, first.stdout + first.stderr
    assert "[5/5]" in first.stdout and "done: 5 finished, 0 failed" in first.stdout
    with open(tmp_path / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["algo"] for r in rows} == {"ppo_discrete", "ppo_continuous", "vpg", "reinforce", "trpo"}
    assert set(run.SUMMARY_COLUMNS) <= set(rows[0])
    for row in rows:
        assert float(row["wall_seconds"]) > 0 and float(row["sps"]) > 0 and int(row["total_timesteps"]) >= 1024
    again = run_suite(tmp_path)
    assert "5 already finished, 0 to run" in again.stdout
    for spec in run.matrix("smoke"):  # each run records every field of its script's Args, and the script's commit
        result = json.loads((tmp_path / "runs" / spec["id"] / "result.json").read_text())
        fields = {f.name for f in dataclasses.fields(tooling.run_args(importlib.import_module(spec["algo"])))}
        assert set(result["flags"]) == fields and result["flags"]["seed"] == 1 and result["flags"]["eval_episodes"] == 1
        assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", result["script_commit"])

    made = subprocess.run([sys.executable, "benchmarks/report.py", "--out", str(tmp_path), "--results-md",
                           str(tmp_path / "RESULTS.md")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "RESULTS.md").read_text()
    assert "## CartPole-v1" in text and "## Pendulum-v1" in text and "| `reinforce` | 1 |" in text
    assert "python vpg.py --env-id CartPole-v1 --seed 1" in text
    assert (tmp_path / "CartPole-v1.png").stat().st_size > 10_000


def test_a_killed_run_goes_on_from_its_checkpoint_to_the_curve_of_a_run_never_stopped(tmp_path):
    spec = {**run.matrix("smoke")[0], "flags": ["--total-timesteps", "4096", "--eval-episodes", "1",
                                                "--checkpoint-every", "1"]}
    killed = tmp_path / "out" / "tensorboard" / spec["id"]
    kill_after_first_checkpoint(f"{spec['algo']}.py", run.command(spec)[2:], killed)  # as run.py runs it
    result = run.execute(spec, tmp_path / "out")
    assert result["status"] == "ok" and result["resumed"]
    whole = run.perform(spec, ROOT, tmp_path / "whole")
    assert not whole["resumed"]
    assert all(whole["curve"][key] == result["curve"][key] for key in ("step", "return", "length"))
    assert whole["eval_returns"] == result["eval_returns"] and whole["final_return"] == result["final_return"]


def test_failed_run_is_recorded_and_retried_and_half_written_result_is_not_finished(tmp_path):
    bad = {"id": "vpg__CartPole-v1__seed1", "suite": "smoke", "algo": "vpg", "env_id": "CartPole-v1", "seed": 1,
           "flags": ["--num-envs", "0"]}
    result = run.execute(bad, tmp_path)
    assert result["status"] == "failed" and "--num-envs" in result["error"] and "must be finite and positive" in result["error"]
    assert not run.is_finished(bad, tmp_path)  # recorded, and run again next time
    other = dict(bad, id="vpg__CartPole-v1__seed2")
    (tmp_path / "runs" / other["id"]).mkdir(parents=True)
    (tmp_path / "runs" / other["id"] / "result.tmp").write_text('{"status": "ok"')  # killed mid-write
    assert not run.is_finished(other, tmp_path)


def test_refresh_eval_reads_the_events_or_reruns_and_records_only_a_rerun_that_reproduces_the_curve(local_smoke, tmp_path):
    """--refresh-eval: a run recorded without its evaluation gets the one in its events; with the
    events gone, a rerun must give the recorded curve exactly, or nothing is recorded."""
    import shutil

    spec = run.matrix("smoke")[0]
    shutil.copytree(local_smoke[0] / "runs" / spec["id"], tmp_path / "runs" / spec["id"])
    shutil.copytree(local_smoke[0] / "tensorboard" / spec["id"], tmp_path / "tensorboard" / spec["id"])
    path = tmp_path / "runs" / spec["id"] / "result.json"
    recorded = json.loads(path.read_text())

    def strip(**changes):
        path.write_text(json.dumps({**{k: v for k, v in recorded.items() if k != "eval_returns"}, **changes}))

    strip()
    assert "read from its events" in run.refresh_eval(spec, tmp_path)
    assert json.loads(path.read_text()) == recorded
    assert run.refresh_eval(spec, tmp_path) == "has its evaluation"
    shutil.rmtree(tmp_path / "tensorboard" / spec["id"])
    strip()
    assert "same curve" in run.refresh_eval(spec, tmp_path)
    assert json.loads(path.read_text()) == recorded  # the rerun's evaluation is the original one
    shutil.rmtree(tmp_path / "tensorboard" / spec["id"])
    strip(curve={**recorded["curve"], "return": [r + 1 for r in recorded["curve"]["return"]]})
    assert "DIFFERS" in run.refresh_eval(spec, tmp_path)
    assert "eval_returns" not in json.loads(path.read_text())


def test_final_return_is_mean_of_last_100_episodes():
    assert run.final_return(list(range(1000))) == pytest.approx(np.mean(range(900, 1000)))
    assert run.final_return([3.0, 5.0]) == 4.0  # fewer than 100 episodes: all of them


def test_curve_on_grid_is_mean_of_last_episodes_finished_by_each_step():
    steps, returns = [10, 20, 30, 40], [1.0, 2.0, 3.0, 10.0]
    values = report.curve_on_grid(steps, returns, np.array([5, 10, 25, 40, 100]), window=2)
    np.testing.assert_allclose(values, [np.nan, 1.0, 1.5, 6.5, 6.5])


def test_bootstrap_band_brackets_the_mean_and_collapses_when_seeds_agree():
    same = np.tile(np.linspace(0, 1, 5), (4, 1))
    mean, low, high = report.bootstrap_band(same)
    np.testing.assert_allclose(mean, same[0])
    np.testing.assert_allclose(low, same[0])
    np.testing.assert_allclose(high, same[0])
    rng = np.random.default_rng(1)
    spread = rng.normal(100, 10, size=(5, 50))
    mean, low, high = report.bootstrap_band(spread)
    assert np.all(low <= mean) and np.all(mean <= high)
    assert np.all(low >= spread.min(0)) and np.all(high <= spread.max(0))
    # the band's width is about that of a 95% interval of a mean of 5 seeds: ±1.96·σ/√5 ≈ ±8.8
    assert 8 < np.mean(high - low) < 25


def test_difference_interval_brackets_the_difference_and_has_the_width_of_a_95_percent_interval():
    diff, low, high = report.difference_interval([5.0, 5.0, 5.0], [2.0, 2.0])  # seeds agree: no spread
    assert (diff, low, high) == (3.0, 3.0, 3.0)
    rng = np.random.default_rng(2)
    without, with_ = rng.normal(10, 4, 60), rng.normal(0, 3, 40)
    diff, low, high = report.difference_interval(without, with_)
    assert low < diff < high and diff == pytest.approx(without.mean() - with_.mean())
    # a normal-theory 95% interval: ±1.96·√(σ₁²/n₁ + σ₂²/n₂) ≈ ±1.8
    half = 1.96 * np.sqrt(without.var() / 60 + with_.var() / 40)
    assert (high - low) / 2 == pytest.approx(half, rel=0.15)


# --- the Ray backend (a local Ray instance on loopback) and --print-commands ---


def test_smoke_suite_through_ray_gives_the_local_backend_results(local_smoke, tmp_path):
    local, through_ray = local_smoke[0], tmp_path
    proc = run_suite(through_ray, "--workers", "2", "--backend", "ray")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = [(out / "summary.csv").read_text().count("\n") for out in (local, through_ray)]
    assert lines == [6, 6]  # a header and the 5 runs
    for run_spec in run.matrix("smoke"):
        a, b = (json.loads((out / "runs" / run_spec["id"] / "result.json").read_text()) for out in (local, through_ray))
        assert a.keys() == b.keys()  # the same format ...
        assert a["curve"] == {**b["curve"], "sps": a["curve"]["sps"]}  # ... and the same run, step for step
        assert a["final_return"] == b["final_return"] and a["command"] == b["command"]
        assert a["eval_returns"] == b["eval_returns"] and len(a["eval_returns"]) == 1  # --eval-episodes 1


def test_ray_records_a_failing_task_and_finishes_the_others(tmp_path):
    good = run.matrix("smoke")[0]
    bad_run = dict(good, id="bad__run", flags=["--num-envs", "0"])  # the script refuses it
    broken_task = dict(good, id="broken__task", flags=None)  # the task itself raises (TypeError)
    finished, failed = run.run_matrix([good, bad_run, broken_task], tmp_path, workers=2, backend="ray")
    assert (finished, failed) == (1, 2)
    ids = (good["id"], "bad__run", "broken__task")
    results = {r: json.loads((tmp_path / "runs" / r / "result.json").read_text()) for r in ids}
    assert results[good["id"]]["status"] == "ok"
    assert "must be finite and positive" in results["bad__run"]["error"]
    assert results["broken__task"]["status"] == "failed" and "TypeError" in results["broken__task"]["error"]
    # rerunning completes only what is missing
    assert not run.is_finished(bad_run, tmp_path) and run.is_finished(good, tmp_path)


def test_printed_commands_run_as_they_are(tmp_path):
    printed = run_suite(tmp_path, "--print-commands")
    lines = printed.stdout.strip().splitlines()
    assert lines[0] == f"# run from {ROOT}" and len(lines) == 1 + len(run.matrix("smoke"))
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])  # `python` = this venv
    proc = subprocess.run(lines[1], shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    first = run.matrix("smoke")[0]
    curve = run.read_curve(str(tmp_path / "tensorboard" / first["id"]))
    assert curve["return"] and curve["global_step"] >= 1024


def test_trpo_normalized_logs_the_envs_own_returns_and_skips_a_finished_run(tmp_path):
    """benchmarks/trpo_normalized.py: rewards are normalised for learning, but the returns it records are
    Pendulum's own (a random policy scores about −1200, a normalised reward about −1 per step at most)."""
    out = tmp_path / "run.json"
    cmd = [sys.executable, "benchmarks/trpo_normalized.py", "--env-id", "Pendulum-v1", "--total-timesteps", "4000",
           "--out", str(out)]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    record = json.loads(out.read_text())
    assert len(record["curve"]["return"]) == 20 and record["final_return"] < -500  # 4 envs × 1000 steps, 200 each
    assert "--env-id Pendulum-v1 --seed 1" in record["command"] and not out.with_suffix(".tmp").exists()
    assert record["flags"]["total_timesteps"] == 4000 and record["flags"]["vf_iters"] == 80 and record["script_commit"]
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "skipped" in again.stdout


def test_speed_counts_only_the_steps_after_the_warm_up():
    # (wall time, steps) at the end of each update: 100 steps per update; update 1 ends at 10 s
    # (start-up included), update 2 takes 1 s, update 3 2 s, update 4 1 s
    points = [(10.0, 100), (11.0, 200), (13.0, 300), (14.0, 400)]
    assert speed.sps_after_warmup(points, warmup_updates=1) == pytest.approx(300 / 4)
    assert speed.sps_after_warmup(points, warmup_updates=2) == pytest.approx(200 / 3)
    assert speed.median([3.0, 1.0, 2.0]) == 2.0 and speed.median([4.0, 1.0, 2.0, 3.0]) == 2.5


def test_speed_reads_the_sps_points_of_a_runs_events(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    for step in (100, 200, 300):
        writer.add_scalar("charts/SPS", 50, step, walltime=10.0 + step / 100)
        writer.add_scalar("charts/other", 1, step)
    writer.close()
    assert speed.sps_points(str(tmp_path)) == [(11.0, 100), (12.0, 200), (13.0, 300)]


def test_speed_report_gives_ratios_floors_and_the_time_budget(tmp_path):
    profile = {"act": 20.0, "update": 30.0}
    results = {"command": "python benchmarks/speed.py", "date": "2026-01-01", "minutes": 1.0, "runs": 3,
               "sb3_version": "2.9.2", "machine": run.machine(), "our_commands": [{"command": "python ppo_discrete.py"}],
               "tasks": {"cartpole": {"floor": {"ours": 51_200.0, "sb3": 60_000.0}, "profile": profile,
                                      "threads": {"1": {"ours": [5120.0, 4000.0, 6000.0], "sb3": [2000.0, 2560.0, 3000.0]}}},
                         "halfcheetah": {"floor": {"ours": 5000.0, "sb3": 4000.0}, "profile": profile,
                                         "line_profile": "| 416 | `action = act()` | 300.0 | 30.0% |",
                                         "threads": {"default": {"ours": [1000.0] * 3, "sb3": [800.0] * 3}}}}}
    speed.write_report(results, tmp_path / "SPEED.md")
    text = (tmp_path / "SPEED.md").read_text()
    assert "| CartPole-v1 | 1 | 5,120 | 2,560 | **2.00×** | 10% | 4% |" in text
    assert "| HalfCheetah-v4 | default | 1,000 | 800 | **1.25×** |" in text
    assert "## Line by line" in text and "| 416 | `action = act()` | 300.0 | 30.0% |" in text
    assert (ROOT / "benchmarks" / "speed_notes.md").read_text().strip() in text
    # 512 steps at 5,120 SPS: 100 ms; the env at 51,200 SPS takes 10 ms; act 20, update 30, the rest 40
    assert "| env steps (+ normalisation), at the floor's speed | 10 | 10% |" in text
    assert "| the rest | 40 | 40% |" in text
    assert "RecurrentPPO" not in text  # no recurrent figures: no recurrent table


def test_speed_report_adds_the_recurrent_table_when_the_figures_have_one(tmp_path):
    results = {"command": "python benchmarks/speed.py", "date": "2026-01-01", "minutes": 1.0, "runs": 3,
               "sb3_version": "2.9.2", "machine": run.machine(), "our_commands": [], "tasks": {},
               "recurrent": {"command": "python benchmarks/speed.py --recurrent", "date": "2026-01-02",
                             "minutes": 2.0, "sb3_contrib_version": "2.9.2", "runs": 3,
                             "our_command": "python ppo_recurrent.py",
                             "threads": {"1": {"ours": [1000.0, 3000.0, 2000.0], "sb3": [400.0, 500.0, 600.0]}}}}
    speed.write_report(results, tmp_path / "SPEED.md")
    text = (tmp_path / "SPEED.md").read_text()
    assert "| 1 | 2,000 | 500 | **4.00×** | 1,000, 3,000, 2,000 | 400, 500, 600 |" in text
    assert "`python benchmarks/speed.py --recurrent` on 2026-01-02" in text


def test_speed_atari_report_gives_each_side_its_cpu_time_load_and_the_vector_envs(tmp_path):
    """--atari's section: every program at 1 thread and at its default, ours at 2, with CPU time
    per 1,000 steps, the load before each run and the other processes' cores; the ratios to the
    faster peer; ppo_atari.py on each vector env with its gain over today's."""
    def runs(*sps):
        return [{"sps": x, "cpu_per_1k": 2.0, "load": 1.0, "others": 0.01, "steal": 0.0} for x in sps]

    atari = {"command": "python benchmarks/speed.py --atari", "date": "2026-01-03", "minutes": 60.0, "runs": 3,
             "sb3_version": "2.9.2", "commands": {"ours 1": "python ppo_atari.py"},
             "sides": {"ours 1": runs(300.0, 290.0, 310.0), "cleanrl 1": runs(200.0, 200.0, 200.0),
                       "sb3 1": runs(250.0, 240.0, 260.0), "ours 2": runs(400.0, 400.0, 400.0),
                       "cleanrl default": runs(320.0, 320.0, 320.0), "sb3 default": runs(330.0, 330.0, 330.0)},
             "vector": {"sync": runs(300.0, 300.0, 300.0), "ale": runs(330.0, 330.0, 330.0),
                        "envpool": runs(339.0, 339.0, 339.0)},
             "vector_alone": {"sync": {"sps": 2000.0}, "ale": {"sps": 3000.0}, "envpool": {"sps": 4000.0}},
             "profile": {"act": 100.0}}
    results = {"command": "python benchmarks/speed.py", "date": "2026-01-01", "minutes": 1.0, "runs": 3,
               "sb3_version": "2.9.2", "machine": run.machine(), "our_commands": [], "tasks": {}, "atari": atari}
    speed.write_report(results, tmp_path / "SPEED.md")
    text = (tmp_path / "SPEED.md").read_text()
    assert "| ours | 1 | 300 | 2.0 |  | 1.00, 1.00, 1.00 | 0.01 | 300, 290, 310 |" in text
    assert "| CleanRL | 1 | 200 | 2.0 | 1.50× |" in text and "| ours | 2 | 400 | 2.0 |  |" in text
    assert "| SB3 | default | 330 | 2.0 | 1.21× |" in text  # ours at 2 threads against SB3's default of 2
    assert "ours is 1.20× at one thread each and 1.21× at two threads each" in text  # 300/250, 400/330
    assert "At each program's default (ours one thread, the peers two) it is 0.91×" in text
    assert "| ale-py's AtariVectorEnv (C++ threads) | 330 | +10% | 3,000 |" in text
    assert "| EnvPool 1.2.5 (C++ threads) | 339 | +13% | 4,000 |" in text
    assert "Neither is adopted: the better, EnvPool 1.2.5, gains 13% on a whole run" in text
    assert "on a shared node" in text.lower() and "1.33× here with two" in text  # 400 / 300


def test_speed_timed_counts_the_childs_cpu_and_the_other_processes():
    """timed(): a child that burns about 0.3 s of CPU is counted as such (per 1,000 steps), while
    nothing else runs; its load before is the 1-minute load average."""
    burn = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"]
    r = speed.timed(lambda: {"sps": 1.0} if subprocess.run(burn).returncode == 0 else {}, steps=1000)
    assert r["sps"] == 1.0 and 0.3 <= r["cpu_per_1k"] < 1.0 and r["load"] >= 0 and 0 <= r["others"] < 2


def fake_result(out, run_spec: dict, final: float, evaluation: list[float] | None = None) -> None:
    """A finished run as run.py records it, with a flat learning curve at `final` (and, if given,
    the returns of its greedy evaluation)."""
    curve = {"step": [1000 * i for i in range(1, 101)], "return": [final] * 100, "length": [200] * 100, "sps": 1000.0}
    run.record(out, run_spec, {**{k: run_spec[k] for k in ("algo", "env_id", "seed", "suite", "variant")},
                               "status": "ok", "final_return": final, "total_timesteps": 100_000, "sps": 1000,
                               "wall_seconds": 100.0, "workers": 1, "command": " ".join(run.command(run_spec)),
                               "machine": run.machine(), "curve": curve,
                               **({"eval_returns": evaluation} if evaluation else {})})


def test_ablation_runs_never_collide_with_default_runs_and_reuse_them():
    """A variant is in the run id, so an ablation never overwrites a default run of the same
    seed; the suite's default cells are the very runs (id and command) of the classic and mujoco
    suites; and each variant's command is its default's plus one switch."""
    ablations = run.matrix("ablations")
    assert len({r["id"] for r in ablations}) == len(ablations)
    others = {r["id"]: r for suite in ("classic", "mujoco") for r in run.matrix(suite)}
    for r in ablations:
        if r["variant"] is None and r["env_id"] != "Pendulum-v1":
            assert run.command(others[r["id"]]) == run.command(r)
        elif r["variant"] is not None:
            default = next(d for d in ablations if d["variant"] is None and (d["algo"], d["env_id"], d["seed"]) ==
                           (r["algo"], r["env_id"], r["seed"]))
            assert run.command(r) == run.command(default) + [f"--{r['variant']}"]


def test_report_puts_ablations_in_their_own_page_with_a_bootstrap_interval(tmp_path):
    """ABLATIONS.md gets a row per finished ablation cell (difference and interval, verdict),
    marks an unfinished one, and RESULTS.md keeps the default runs only."""
    finals = {None: [-200.0, -180.0, -190.0, -170.0, -210.0],
              "no-bootstrap-truncation": [-900.0, -950.0, -1000.0, -980.0, -920.0],
              "no-norm-obs": [-300.0, -100.0, -250.0, -150.0, -190.0]}
    for spec in run.matrix("ablations"):
        if spec["env_id"] == "Pendulum-v1" and spec["variant"] in finals:
            fake_result(tmp_path, spec, finals[spec["variant"]][spec["seed"] - 1])
    made = subprocess.run([sys.executable, "benchmarks/report.py", "--out", str(tmp_path), "--results-md",
                           str(tmp_path / "RESULTS.md"), "--ablations-md", str(tmp_path / "ABLATIONS.md")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "ABLATIONS.md").read_text()
    rows = {line.split("|")[1].strip() + " " + line.split("|")[2].strip(): line for line in text.splitlines()
            if line.startswith("| `--")}
    truncation = rows["`--no-bootstrap-truncation` (ppo_continuous) Pendulum-v1"]
    diff, low, high = report.difference_interval(finals["no-bootstrap-truncation"], finals[None])
    assert f"| -190.0 ± 14.1 | -950.0 ± 36.9 | {diff:+.1f} [{low:+.1f}, {high:+.1f}] |" in truncation
    assert truncation.rstrip(" |").endswith("helps")
    assert rows["`--no-norm-obs` (ppo_continuous) Pendulum-v1"].rstrip(" |").endswith("cannot tell")
    assert "not yet run" in rows["`--no-norm-reward` (ppo_continuous) Pendulum-v1"]
    assert "not yet run" in rows["`--no-bootstrap-truncation` (ppo_continuous) Hopper-v4"]
    assert not (tmp_path / "ablations-Hopper-v4.png").exists()  # nothing to compare yet
    assert (tmp_path / "ablations-Pendulum-v1.png").stat().st_size > 10_000
    assert "python ppo_continuous.py --env-id Pendulum-v1 --seed 1 --total-timesteps 300000 --no-norm-obs" in text
    results = (tmp_path / "RESULTS.md").read_text()
    assert "## Pendulum-v1" in results and "no-norm-obs" not in results and "no-bootstrap" not in results


def test_compare_alternates_the_checkouts_and_measures_each_from_its_own_root(monkeypatch, capsys, tmp_path):
    """speed.py --compare: A B A B ..., each run of our command started in its own checkout."""
    calls = []

    def fake_ours(task, threads, extra, root):
        calls.append((task["script"], root))
        return {"sps": 100.0 * (len(calls) + 1) if root.name == "after" else 100.0}

    monkeypatch.setattr(speed, "ours", fake_ours)
    before, after = tmp_path / "before", tmp_path / "after"
    sps = speed.compare([before, after], {**speed.TASKS["cartpole"], "script": "vpg.py"}, runs=2)
    assert calls == [("vpg.py", before), ("vpg.py", after)] * 2
    assert sps == {before: [100.0, 100.0], after: [300.0, 500.0]}
    assert "median 400 SPS (+300.0%)" in capsys.readouterr().out


FAKE_TRAIN = """import time

def train(args):
    out = []
    for iteration in range(3):
        time.sleep(0.01)
        if iteration == 1:
            continue
        for i in [time.sleep(0.002), 7]:
            time.sleep(0.003)
            out.append(i)
    return out
"""


def test_line_timer_times_each_statement_of_the_training_loop_and_keeps_its_meaning(tmp_path):
    """The timer of benchmarks/profile_lines.py: each statement of the loop gets the time it ran,
    a `for` header the time of its iterable, and the loop its whole time (key 0); the program
    computes what it did before, `continue` included."""
    script = tmp_path / "fake.py"
    script.write_text(FAKE_TRAIN)
    tree = profile_lines.instrument(ast.parse(FAKE_TRAIN), profile_lines.loop_lines(script))
    line_ns = defaultdict(int)
    module = {"_clock": time.perf_counter_ns, "_line_ns": line_ns}
    exec(compile(tree, str(script), "exec"), module)
    assert module["train"](None) == [None, 7, None, 7]
    lines = FAKE_TRAIN.splitlines()
    sleep, for_header, inner_sleep = (lines.index(code) + 1 for code in (
        "        time.sleep(0.01)", "        for i in [time.sleep(0.002), 7]:", "            time.sleep(0.003)"))
    assert line_ns[sleep] >= 30e6  # 3 × 10 ms
    assert line_ns[inner_sleep] >= 12e6  # 4 × 3 ms
    assert 4e6 <= line_ns[for_header] < line_ns[inner_sleep]  # 2 × 2 ms: only the iterable is its own
    assert sum(ns for line, ns in line_ns.items() if line) <= line_ns[0]  # nothing counted twice


def test_line_profile_charges_each_sample_to_the_running_line_of_the_training_loop():
    """py-spy's raw stacks: a sample counts for the line of `train` inside the loop that was
    running (with whatever it called) and for the script's innermost function; samples outside
    the loop (imports, setup) are left out."""
    first, last = profile_lines.loop_lines(ROOT / "ppo_continuous.py")
    inside, before = first + 5, first - 3
    raw = [
        f"<module> (ppo_continuous.py:900);train (ppo_continuous.py:{inside});"
        f"Agent.get_value (ppo_continuous.py:180);forward (torch/nn/modules/linear.py:125) 7",
        f"<module> (ppo_continuous.py:900);train (ppo_continuous.py:{inside});step (gymnasium/core.py:10) 3",
        f"<module> (ppo_continuous.py:900);train (ppo_continuous.py:{before});__init__ (torch/optim/adam.py:1) 50",
        "<module> (ppo_continuous.py:30);_find_and_load (<frozen importlib._bootstrap>:1176) 40",
    ]
    by_line, by_helper, total = profile_lines.attribute(raw, "ppo_continuous.py", (first, last))
    assert total == 10 and by_line == {inside: 10}
    assert by_helper == {"Agent.get_value": 7, "train": 3}
    assert first < last


def test_report_redraws_figure3_with_both_tables_and_the_verdict_against_cleanrl(tmp_path):
    """The figure3 section: final returns per script and env (mean ± std over seeds, unfinished
    seeds counted), greedy evaluations, and ppo_continuous against CleanRL's published v4 mean."""
    finals = {"reinforce": [100.0, 200.0, 300.0], "vpg": [0.0, 10.0, 20.0], "trpo": [800.0, 800.0, 800.0],
              "ppo_continuous": [1400.0, 1500.0, 1600.0]}
    for spec in run.matrix("figure3"):
        if spec["env_id"] == "HalfCheetah-v4":
            final = finals[spec["algo"]][spec["seed"] - 1]
            fake_result(tmp_path, spec, final, [final * 2, final * 2 + 10])
        elif spec["env_id"] == "Hopper-v4" and spec["algo"] == "ppo_continuous":
            fake_result(tmp_path, spec, 1000.0 + spec["seed"])  # below CleanRL's 2382.86 − 271.74
        elif spec["env_id"] == "Swimmer-v4" and spec["algo"] == "vpg" and spec["seed"] == 1:
            fake_result(tmp_path, spec, 40.0)
        elif spec["env_id"] == "Pusher-v4" and spec["seed"] == 1:  # made in a venv with mujoco<3
            fake_result(tmp_path, spec, -30.0)
            path = tmp_path / "runs" / spec["id"] / "result.json"
            result = json.loads(path.read_text())
            result["machine"]["versions"]["mujoco"] = "2.3.7"
            path.write_text(json.dumps(result))
    made = subprocess.run([sys.executable, "benchmarks/report.py", "--out", str(tmp_path), "--results-md",
                           str(tmp_path / "RESULTS.md")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "RESULTS.md").read_text()
    section = text[text.index("## Figure 3"):text.index("## HalfCheetah-v4")]
    rows = [line for line in section.splitlines() if line.startswith("| HalfCheetah-v4 |")]
    assert rows[0] == "| HalfCheetah-v4 | 200.0 ± 81.6 | 10.0 ± 8.2 | 800.0 ± 0.0 | 1500.0 ± 81.6 | 1442.64 ± 46.03 |"
    assert rows[1] == "| HalfCheetah-v4 | 200.0 | 10.0 | 800.0 | 1500.0 | ~1800 | ~0 | ~1000 |"  # flat curves: best = mean
    assert rows[2] == "| HalfCheetah-v4 | 405.0 ± 163.3 | 25.0 ± 16.3 | 1605.0 ± 0.0 | 3005.0 ± 163.3 |"
    assert rows[3].endswith("| 3005.0 ± 163.3 | 1442.64 ± 46.03 | above its mean |")
    assert "| 1400.0 / 1500.0 / 1600.0 |" in rows[3]
    assert "| 40.0 ± 0.0 (1 of 3 seeds) |" in section and "not recorded yet" in section
    assert "more than one std below" in next(line for line in section.splitlines() if line.startswith("| Hopper-v4 | 1002"))
    assert "python trpo.py --env-id ENV --seed SEED --total-timesteps 1000000" in section
    assert (tmp_path / "figure3.png").stat().st_size > 30_000
    common = run.machine()["versions"]["mujoco"]  # the machine line names the versions most runs had
    assert f"mujoco {common} (Pusher-v4 ran on mujoco 2.3.7, see its section)." in text
    pusher = text[text.index("## Pusher-v4"):]
    assert "These runs used mujoco 2.3.7, not the version on the machine line above." in pusher
    assert text.count("These runs used") == 1


def test_report_compares_the_mujoco2_runs_and_the_cg_stop_runs_with_their_counterparts(tmp_path):
    """The mujoco 2.3.7 cells beside the mujoco 4 runs of the same seeds and CleanRL's figure, with
    the verdict taken on mujoco 2.3.7; the trpo-cg-stop cells beside the runs made before the stop,
    counting the identical curves; each with the difference's bootstrap interval."""
    for spec in run.matrix("figure3") + run.matrix("cleanrl-mujoco2") + run.matrix("classic") + run.matrix("trpo-cg-stop"):
        if spec["algo"] == "ppo_continuous" and spec["env_id"] == "HalfCheetah-v4":
            fake_result(tmp_path, spec, (1000.0 if spec["variant"] else 4000.0) + 10 * spec["seed"])
        elif spec["algo"] == "trpo" and spec["env_id"] == "CartPole-v1":
            fake_result(tmp_path, spec, 500.0 - (spec["seed"] if spec["variant"] and spec["seed"] > 3 else 0))
    made = subprocess.run([sys.executable, "benchmarks/report.py", "--out", str(tmp_path), "--results-md",
                           str(tmp_path / "RESULTS.md"), "--ablations-md", str(tmp_path / "ABLATIONS.md")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "RESULTS.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| HalfCheetah-v4 | 4020.0 ± 8.2 | 1020.0"))
    assert row.startswith("| HalfCheetah-v4 | 4020.0 ± 8.2 | 1020.0 ± 8.2 | 1010.0 / 1020.0 / 1030.0 | 1442.64 ± 46.03 | "
                          "more than one std below | -3000.0 [")
    assert row.endswith("| lower |")
    assert "| Walker2d-v4 | not yet run | not yet run |" in text
    row = next(line for line in text.splitlines() if line.startswith("| CartPole-v1 | 5 of 5 |"))
    assert row.startswith("| CartPole-v1 | 5 of 5 | 500.0 ± 0.0 | 498.2 ± 2.2 | 3 | -1.8 [")
    assert "ddof 0" in text[:text.index("## Figure 3")]  # ± defined once, at the top


def test_the_side_by_side_suite_runs_cleanrl_only_from_its_pinned_file(tmp_path, monkeypatch):
    """CleanRL's script is not in this repository: run.py takes the file the user provides only if
    its SHA-256 is that of the pinned commit's, and runs it from its own folder, with seeds 1-10
    on both sides, seed by seed."""
    bogus = tmp_path / "ppo_continuous_action.py"
    bogus.write_text("print('not CleanRL')\n")
    monkeypatch.setenv("CLEANRL_SOURCE", str(bogus))
    with pytest.raises(SystemExit, match="is not CleanRL's cleanrl/ppo_continuous_action.py at 016ca33"):
        run.cleanrl_script()
    runs = run.matrix("side-by-side")
    cleanrl = [r for r in runs if r["algo"] == run.CLEANRL]
    ours = [r for r in runs if r["algo"] == "ppo_continuous" and not r["variant"]]
    assert {(r["env_id"], r["seed"]) for r in cleanrl} == {(r["env_id"], r["seed"]) for r in ours}
    assert {r["seed"] for r in cleanrl} == set(range(1, 11)) and len(cleanrl) == 30
    assert [r["seed"] for r in runs[:6]] == [1] * 6  # seed by seed: a suite cut short is balanced
    assert run.command(cleanrl[0])[:2] == ["python", "ppo_continuous_action.py"]


def test_the_recurrent_section_shows_memory_beside_the_feed_forward_script(tmp_path):
    def result(algo, env_id, seed, final, evals, flags=""):
        curve = {"step": [1000, 50_000, 99_840], "return": [20.0, final / 2, final], "length": [20, 100, 300]}
        return {"suite": "recurrent", "status": "ok", "algo": algo, "env_id": env_id, "seed": seed,
                "final_return": final, "eval_returns": evals, "total_timesteps": 99_840, "curve": curve,
                "command": f"python {algo}.py --env-id {env_id} --seed {seed}{flags}"}

    lines = report.recurrent_section([result("ppo_recurrent", "CartPoleNoVel-v1", 1, 300.0, [500.0]),
                                      result("ppo_discrete", "ppo_recurrent:CartPoleNoVel-v1", 1, 40.0, [30.0],
                                             " --total-timesteps 99840")], tmp_path, tmp_path / "RESULTS.md")
    assert (tmp_path / "recurrent-CartPoleNoVel-v1.png").stat().st_size > 0  # both curves, one plot
    assert "![CartPoleNoVel-v1: ppo_recurrent and the feed-forward script](recurrent-CartPoleNoVel-v1.png)" in lines
    rows = [line for line in lines if line.startswith("| CartPoleNoVel-v1")]
    assert rows[0].startswith("| CartPoleNoVel-v1 | `ppo_recurrent` | 1 | 99,840 | 300.0 ± 0.0 | 500.0 ± 0.0 | 500.0")
    assert rows[1].startswith("| CartPoleNoVel-v1 | `ppo_discrete` | 1 | 99,840 | 40.0 ± 0.0 | 30.0 ± 0.0 |")
    assert "- CartPoleNoVel-v1, `ppo_discrete`: `--total-timesteps 99840`" in lines
    assert "- CartPoleNoVel-v1, `ppo_recurrent`: its defaults" in lines


def test_the_statistics_of_the_side_by_side_comparison():
    """benchmarks/stats.py on inputs worked out by hand, each value as rliable defines it."""
    import stats

    assert stats.iqm([1, 2, 3, 4, 100, -100, 5, 6]) == pytest.approx(3.5)  # 2 cut from each end of 8
    assert stats.iqm([1.0, 2.0, 3.0]) == pytest.approx(2.0)  # floor(3/4) = 0: the plain mean
    assert stats.probability_of_improvement([3, 1], [2, 2]) == pytest.approx(0.5)
    assert stats.probability_of_improvement([2], [2]) == pytest.approx(0.5)  # a tie counts one half
    assert stats.probability_of_improvement([5, 6], [1, 2, 3]) == 1.0
    low, high = stats.bootstrap_interval([10.0] * 5, [1.0] * 5, stats.difference_of_means, reps=200)
    assert low == high == pytest.approx(9.0)  # no spread, no width
    low, high = stats.bootstrap_interval([0.0, 10.0], [5.0, 5.0], stats.difference_of_means, reps=2000)
    assert -5 <= low < 0 < high <= 5 and stats.verdict(low, high) == "cannot tell apart"
    assert stats.verdict(1, 2) == "higher" and stats.verdict(-2, -1) == "lower"
    steps, returns = [10, 20, 30, 40], [0, 10, 20, 30]
    assert stats.steps_to(steps, returns, 15, window=2) == 30  # mean of 10 and 20
    assert stats.steps_to(steps, returns, 100, window=2) == float("inf")
    assert list(stats.performance_profile([0.1, 0.5, 0.9], [0.0, 0.5, 1.0])) == pytest.approx([1.0, 1 / 3, 0.0])
    assert stats.median_interval([7.0]) == (7.0, 7.0)  # one run: no spread
    assert stats.median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (1.0, 5.0)  # both ends are medians of samples
    low, high = stats.median_interval([1e5, 2e5, float("inf"), float("inf")])  # two runs never reach it
    assert low == 1e5 and high == float("inf")  # an end, not nan
    low, high = stats.profile_interval([[0.2, 0.2], [0.8, 0.8]], [0.0, 0.5, 1.0])  # no spread in an env
    assert list(low) == list(high) == [1.0, 0.5, 0.0]
    low, high = stats.profile_interval([[0.2, 0.8], [0.8, 0.8]], [0.5], reps=2000)  # each env redrawn alone, the first varies
    assert low[0] == pytest.approx(0.5) and high[0] == pytest.approx(1.0)  # 2 to 4 of the 4 runs above 0.5


def test_the_statistics_agree_with_rliable():
    """benchmarks/stats.py against rliable's own values on fixed inputs (tests/data/, written by
    tests/make_rliable_reference.py). The IQM and the probability of improvement agree to rounding,
    the profile exactly. The stratified bootstrap's 95% intervals agree to within 2% of their width
    (plus 0.02 for the probability), a margin for two different random draws. For the profile's
    band the margin is one step of the profile (1/n) at a τ, and 0.02 on average."""
    import stats

    reference = json.loads((ROOT / "tests" / "data" / "rliable_reference.json").read_text())
    for name, case in reference["cases"].items():
        x, y = case["x"], case["y"]
        assert stats.iqm(x) == pytest.approx(case["iqm_x"]), name
        assert stats.probability_of_improvement(x, y) == pytest.approx(case["probability_of_improvement"]), name
        assert list(stats.performance_profile(x, reference["taus"])) == case["profile_x"], name
        band, theirs = np.array(stats.profile_interval([x], reference["taus"])), np.array(case["profile_x_interval"])
        assert np.abs(band - theirs).max() <= 1 / len(x) + 1e-9, name  # a step of the profile at most
        assert np.abs(band - theirs).mean() <= 0.02, name
        for statistic, key, slack in ((stats.probability_of_improvement, "probability_of_improvement_interval", 0.02),
                                      (stats.difference_of_means, "difference_of_means_interval", 0.0)):
            ours, theirs = stats.bootstrap_interval(x, y, statistic), case[key]
            tolerance = slack + 0.02 * (theirs[1] - theirs[0]) + 1e-9  # 2% of the width
            assert ours == pytest.approx(theirs, abs=tolerance), (name, key, ours, theirs)


def side_by_side_run(algo, env_id, seed, final, jump, variant=None):
    """A finished run of the side-by-side suite whose episodes return 0 before step jump and 2000
    from it on (None: never), and whose final return is final (each episode 1000 steps long)."""
    step, ret = list(range(1000, 101_000, 1000)), [0.0] * 100
    if jump is not None:
        ret = [0.0 if s < jump else 2000.0 for s in step]
    return {"algo": algo, "env_id": env_id, "seed": seed, "variant": variant, "status": "ok",
            "suite": "side-by-side", "total_timesteps": 1_000_000, "final_return": final,
            "curve": {"step": step, "return": ret}}


def test_report_writes_the_side_by_side_tables_and_profile(tmp_path):
    """report.side_by_side_section on made-up runs: the row's intervals from stats.py, the steps
    to CleanRL's median with ∞ for a run that never gets there, the seeds still missing, the
    truncation bootstrap's table and the profile figure."""
    import stats

    ours = [side_by_side_run("ppo_continuous", "HalfCheetah-v4", s, f, t)
            for s, f, t in ((1, 3000.0, 20_000), (2, 2000.0, 40_000), (3, 1000.0, 60_000))]
    peer = [side_by_side_run("cleanrl_ppo_continuous_action", "HalfCheetah-v4", s, f, t)
            for s, f, t in ((1, 1500.0, 50_000), (2, 1000.0, None))]
    without = [side_by_side_run("ppo_continuous", "HalfCheetah-v4", 1, 500.0, None, "no-bootstrap-truncation")]
    lines = report.side_by_side_section(ours + peer + without, tmp_path, tmp_path / "RESULTS.md")
    row = next(line for line in lines if line.startswith("| HalfCheetah-v4 | 3 / 2 "))
    low, high = stats.bootstrap_interval([3000, 2000, 1000], [1500, 1000], stats.difference_of_means)
    p_low, p_high = stats.bootstrap_interval([3000, 2000, 1000], [1500, 1000], stats.probability_of_improvement)
    # CleanRL's median final return is 1250. A last-20 mean of 1250 needs 13 of the 20 episodes at
    # 2000: the jump's step + 12,000 (20,000 -> 32,000). CleanRL's seed 1 gets there at 62,000, its
    # seed 2 never.
    steps_ours = [32_000, 52_000, 72_000]
    s_low, s_high = stats.median_interval(steps_ours)
    assert row == (f"| HalfCheetah-v4 | 3 / 2 | 2000.0 ± 816.5, 2000.0 | 1250.0 ± 250.0, 1250.0 | +750.0 "
                   f"[{low:+.1f}, {high:+.1f}] | 0.75 [{p_low:.2f}, {p_high:.2f}] | "
                   f"{stats.verdict(low, high)} | 52,000 [{s_low:,.0f}, {s_high:,.0f}] | ∞ [62,000, ∞] |")
    assert any(line.startswith("Not all 10 seeds have run yet on both sides: HalfCheetah-v4 (3 / 2)") for line in lines)
    bootstrap = [line for line in lines if line.startswith("| HalfCheetah-v4 | 3 / 1 ")]
    assert len(bootstrap) == 1 and bootstrap[0].endswith("|  | |")
    assert "![performance profile](side-by-side-profile.png)" in lines
    assert (tmp_path / "side-by-side-profile.png").stat().st_size > 0


def test_the_minatar_5m_section_states_the_goal_and_each_shortfall(tmp_path, monkeypatch):
    """Per game: the mean and IQM with intervals, both evaluations, and "at or above" the better of
    the MinAtar paper's two readings at 5M, or "short by" how much; then how many games reach it."""
    monkeypatch.setattr(report, "made_at", lambda runs: "ppo_atari.py at abc1234")

    def result(game, seed, final):
        curve = {"step": [1000, 2_500_000, 5_000_000], "return": [0.0, final / 2, final], "length": [10, 10, 10]}
        return {"suite": "minatar-5m", "status": "ok", "algo": "ppo_atari", "env_id": f"MinAtar/{game}-v1",
                "seed": seed, "final_return": final, "eval_returns": [final + 1], "eval_sampled_returns": [final - 1],
                "total_timesteps": 5_000_000, "curve": curve, "variant": "5m"}

    finals = {"Asterix": 20.0, "Breakout": 10.0, "Freeway": 60.0, "Seaquest": 30.0}  # paper: 19, 18, 50, 20
    runs = [result(game, seed, final + seed / 10) for game, final in finals.items() for seed in range(1, 11)]
    lines = report.minatar_5m_section(runs, tmp_path, tmp_path / "RESULTS.md")
    rows = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| ") and "-v1 |" in line}
    assert "at or above (20.6 ≥ 19)" in rows["Asterix-v1"] and "| 10 of 10 |" in rows["Asterix-v1"]
    assert "short by 7.4 (41% of 18)" in rows["Breakout-v1"]  # 18 − 10.55
    assert "| 21.6 | 19.6 |" in rows["Asterix-v1"]  # greedy, then sampled evaluation
    assert "not yet run" in rows["SpaceInvaders-v1"]
    text = "\n".join(lines)
    assert "Reached on 3 (Asterix, Freeway, Seaquest); short on Breakout" in text
    assert "The suite is not complete: 40 of 50 runs so far" in text
    assert (tmp_path / "minatar-5m-Asterix-v1.png").stat().st_size > 0
