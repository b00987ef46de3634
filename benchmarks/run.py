"""Run a benchmark suite: every (script, env, seed) of benchmarks/presets.py as its own process.

    python benchmarks/run.py --suite classic              # all cores, results in benchmarks/results/
    python benchmarks/run.py --suite smoke --workers 1 --out /tmp/smoke
    python benchmarks/run.py --suite mujoco --print-commands

Resumable: a run whose result.json exists is skipped, so rerunning the same command completes
only what is missing (failed runs are retried). Each result is written to a temporary file and
renamed into place, so a run cut short is never mistaken for a finished one; a run that was
killed goes on from its last checkpoint (the scripts' --resume) and ends with the curve it would
have had uncut (benchmarks/RESULTS.md's runs predate this: none was resumed). A failed run is
recorded with its error and does not stop the others. After every run, results/summary.csv is
rewritten from all finished runs.

Each run's learning curve, and the returns of the greedy evaluation that every script plays after
training, are read back from its own TensorBoard events with tensorboard's reader.

    python benchmarks/run.py --suite figure3 --refresh-eval

gives the finished runs recorded without an evaluation (before run.py kept it) their evaluation:
read from the run's TensorBoard events where they are still there, or else by running the run
again. The rerun must reproduce the recorded learning curve exactly (CPU runs are deterministic),
or its evaluation is not recorded.
"""

import argparse
import csv
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from presets import SUITES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results"
SUMMARY_COLUMNS = ["algo", "env_id", "variant", "seed", "total_timesteps", "final_return", "wall_seconds", "sps", "command"]


def run_id(script: str, env_id: str, seed: int, variant: str | None = None) -> str:
    env_id = env_id.rpartition(":")[2].replace("/", "-")  # module:EnvId: the id alone, one folder
    script = script.replace("/", "-")  # a file of the course's steps: steps-<name>
    return f"{script}__{env_id}__{variant}__seed{seed}" if variant else f"{script}__{env_id}__seed{seed}"


def matrix(suite: str) -> list[dict]:
    """The runs of a suite, in the presets' order: one dict per (script, env, seed). A cell may
    name a variant as its fifth item (the ablations), which the run id and the result carry."""
    runs = []
    for script, env_id, flags, seeds, *variant in SUITES[suite]:
        variant = variant[0] if variant else None
        runs += [{"id": run_id(script, env_id, seed, variant), "suite": suite, "algo": script, "env_id": env_id,
                  "seed": seed, "flags": flags, "variant": variant} for seed in seeds]
    return runs


# A peer's script that a suite may run beside ours (the side-by-side suite): CleanRL's
# ppo_continuous_action.py at a pinned commit, with reference_runs/'s patch. Its source is not part
# of this repository: give the file at that commit as benchmarks/.cleanrl/ppo_continuous_action.py
# (or in $CLEANRL_SOURCE); run.py checks its digest, patches a copy and runs that.
CLEANRL = "cleanrl_ppo_continuous_action"
CLEANRL_COMMIT = "016ca33aa70f188ef385082524373ccb6dd14e03"
CLEANRL_SHA256 = "417454196e3099d9355374a769753fec8f373ed5c517252729506a28d6749d7f"


def cleanrl_script() -> Path:
    """The patched CleanRL script, made once in benchmarks/.cleanrl/patched/, or exit with what to do."""
    source = Path(os.environ.get("CLEANRL_SOURCE", ROOT / "benchmarks" / ".cleanrl" / "ppo_continuous_action.py"))
    import hashlib

    if not source.is_file() or hashlib.sha256(source.read_bytes()).hexdigest() != CLEANRL_SHA256:
        sys.exit(f"run.py: error: {source} is not CleanRL's cleanrl/ppo_continuous_action.py at {CLEANRL_COMMIT}: "
                 "copy that file there (git show <commit>:cleanrl/ppo_continuous_action.py), or name it in $CLEANRL_SOURCE")
    patched = ROOT / "benchmarks" / ".cleanrl" / "patched" / "cleanrl" / "ppo_continuous_action.py"
    if not patched.exists():
        patched.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, patched)
        patch = ROOT / "benchmarks" / "reference_runs" / "cleanrl_ppo_continuous_action.patch"
        subprocess.run(["patch", "-s", "-p1", "-i", str(patch)], cwd=patched.parent.parent, check=True)
    return patched


# CleanRL's ppo_atari.py, the side-by-side of ppo_atari.py (issue 71): at a pinned commit with the two
# edits of reference_runs/cleanrl_ppo_atari.patch, in a virtual environment of its own on Gymnasium
# 0.29 (benchmarks/.cleanrl/atari-venv, which `python benchmarks/speed.py --atari` makes).
CLEANRL_ATARI = "cleanrl_ppo_atari"


def cleanrl_atari_script() -> tuple[Path, Path]:
    """The Python of CleanRL's Atari environment, and its patched script, or exit with what to do."""
    from speed import CLEANRL_ATARI_COMMIT, cleanrl_atari

    python = ROOT / "benchmarks" / ".cleanrl" / "atari-venv" / "bin" / "python"
    patched = ROOT / "benchmarks" / ".cleanrl" / "atari" / "ppo_atari.py"
    if not (python.exists() and patched.exists()):
        sys.exit(f"run.py: error: CleanRL's ppo_atari.py at {CLEANRL_ATARI_COMMIT} is not set up: copy it to "
                 f"benchmarks/.cleanrl/ppo_atari.py, then run python benchmarks/speed.py --atari once "
                 f"({cleanrl_atari.__doc__.split('.')[0]})")
    return python, patched


def command(run: dict, log_dir: str | None = None) -> list[str]:
    """The exact command of a run (as a user would type it, from the repository root; CleanRL's
    from the folder of its patched script, which logs to ./runs: no --log-dir)."""
    if run["algo"] == CLEANRL:
        return ["python", "ppo_continuous_action.py", "--env-id", run["env_id"], "--seed", str(run["seed"]), *run["flags"]]
    if run["algo"] == CLEANRL_ATARI:
        return ["python", "ppo_atari.py", "--env-id", run["env_id"], "--seed", str(run["seed"]), *run["flags"]]
    cmd = ["python", f"{run['algo']}.py", "--env-id", run["env_id"], "--seed", str(run["seed"]), *run["flags"]]
    return cmd + (["--log-dir", log_dir] if log_dir else [])


def machine() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {name: metadata.version(name) for name in ("torch", "gymnasium", "numpy", "tyro", "tensorboard", "mujoco")}
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "versions": versions}


def read_curve(log_dir: str) -> dict:
    """Episodic returns and lengths, the final SPS and the run's settings, from its TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if os.path.isdir(f"{log_dir}/runs"):  # CleanRL's script logs to ./runs/<run>
        log_dir = f"{log_dir}/runs"
    (events_dir,) = [e.path for e in os.scandir(log_dir) if e.is_dir()]  # the script's one run folder
    events = EventAccumulator(events_dir, size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    returns, lengths = events.Scalars("charts/episodic_return"), events.Scalars("charts/episodic_length")
    tags = events.Tags()["scalars"]
    evaluation, sampled = ([round(e.value, 3) for e in events.Scalars(tag)] if tag in tags else []
                           for tag in ("eval/episodic_return", "eval/sampled_episodic_return"))
    return {"step": [e.step for e in returns], "return": [round(e.value, 3) for e in returns],
            "length": [int(e.value) for e in lengths], "sps": events.Scalars("charts/SPS")[-1].value,
            "global_step": events.Scalars("charts/SPS")[-1].step,  # steps taken by the end of the last update
            "eval": evaluation,  # the greedy policy's episodes after training
            "eval_sampled": sampled}  # with --eval-sampled, as many with actions sampled from π


def final_return(returns: list[float]) -> float:
    """The metric CleanRL publishes: the mean return of the last 100 training episodes."""
    return float(np.mean(returns[-100:]))


def write_json_atomically(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the whole new one


def perform(run: dict, root: Path, log_dir: Path, workers: int = 1) -> dict:
    """Run one (script, env, seed) from the repository at `root`, logging to `log_dir`; return its
    result (status, final return, curve, metadata). Writes nothing else, so that the same
    function serves the local backend and a Ray task on another machine."""
    cmd = command(run)
    # A killed attempt goes on from its checkpoint, in its own folder (the script's --resume);
    # what one left without a checkpoint is cleared, and the run starts again.
    checkpoint = next(log_dir.glob("*/checkpoint.pt"), None)
    if checkpoint is None:
        shutil.rmtree(log_dir, ignore_errors=True)
    result = {"algo": run["algo"], "env_id": run["env_id"], "seed": run["seed"], "suite": run["suite"],
              "variant": run.get("variant"),
              "command": shlex.join(cmd), "machine": machine(), "workers": workers,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "resumed": checkpoint is not None}
    start = time.time()
    resume = ["--resume", str(checkpoint)] if checkpoint else []
    argv, cwd, env = [sys.executable, *command(run, str(log_dir))[1:], *resume], root, dict(os.environ, PYTHONWARNINGS="ignore")
    if run["algo"] == CLEANRL:  # no checkpoints: a killed run starts again; it logs to <cwd>/runs
        log_dir.mkdir(parents=True, exist_ok=True)
        argv[1], cwd = str(cleanrl_script()), log_dir
        env.update(OMP_NUM_THREADS="1")  # one thread per run, as our scripts' --num-threads 1
        result["command"] = "OMP_NUM_THREADS=1 " + result["command"]
    if run["algo"] == CLEANRL_ATARI:  # the same, in its own virtual environment
        log_dir.mkdir(parents=True, exist_ok=True)
        python, patched = cleanrl_atari_script()
        argv[0], argv[1], cwd = str(python), str(patched), log_dir
        env.update(OMP_NUM_THREADS="1")
        result["command"] = "OMP_NUM_THREADS=1 " + result["command"]
    if run["algo"].startswith("steps/"):  # a sub-step file finds tooling.py at the root on the path
        env.update(PYTHONPATH=str(root))
        result["command"] = "PYTHONPATH=. " + result["command"]
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    result["wall_seconds"] = round(time.time() - start, 1)
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"exit code {proc.returncode}: " + " | ".join(proc.stderr.strip().splitlines()[-3:]))
        curve = read_curve(str(log_dir))
        if not curve["return"]:
            raise RuntimeError("the run finished no episode")
        result.update(status="ok", final_return=round(final_return(curve["return"]), 2), sps=round(curve["sps"]),
                      total_timesteps=curve.pop("global_step"), eval_returns=curve.pop("eval"), curve=curve)
        sampled = curve.pop("eval_sampled")
        if sampled:  # only runs with --eval-sampled have it
            result["eval_sampled_returns"] = sampled
    except Exception as error:  # recorded, and the other runs go on
        result.update(status="failed", error=str(error))
    return result


def resolved_flags(script_file: Path, argv: list[str]) -> dict:
    """Every field of the script's Args, defaults included, as the command line `argv` sets them:
    what ran, even after a default changes. `script_file` may be an old version of the script."""
    import importlib.util
    from dataclasses import asdict

    import tyro

    spec = importlib.util.spec_from_file_location(f"_flags_{script_file.stem}", script_file)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # tyro reads its source
    spec.loader.exec_module(module)
    if hasattr(module, "RunArgs"):  # before 0.5.0: Args and the tooling's flags, in the script
        return asdict(tyro.cli(module.RunArgs, args=argv))
    sys.path.insert(0, str(ROOT))
    import tooling

    return asdict(tyro.cli(tooling.run_args(module), args=argv))  # Args and the tooling's flags


def script_commit(script: str, root: Path = ROOT) -> str:
    """The last commit that changed <script>.py, with "+dirty" when the file differs from it."""
    git = ["git", "-C", str(root)]
    commit = subprocess.run([*git, "log", "-1", "--format=%H", "--", f"{script}.py"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", f"{script}.py"]).returncode != 0
    return commit.stdout.strip() + ("+dirty" if dirty else "")


def record(out: Path, run: dict, result: dict) -> None:
    """Write a run's result.json atomically (the one thing that marks a run finished), with the
    run's resolved flags and the commit of the script that ran it."""
    if result.get("status") == "ok" and run["algo"] == CLEANRL:
        result = {**result, "flags": resolved_flags(cleanrl_script(), command(run)[2:]),
                  "script_commit": f"vwxyzjn/cleanrl@{CLEANRL_COMMIT} + reference_runs/cleanrl_ppo_continuous_action.patch"}
    elif result.get("status") == "ok" and run["algo"] == CLEANRL_ATARI:
        from speed import CLEANRL_ATARI_COMMIT

        result = {**result, "flags": {"command": command(run)[2:]},  # its Args import CleanRL's packages
                  "script_commit": f"vwxyzjn/cleanrl@{CLEANRL_ATARI_COMMIT} + reference_runs/cleanrl_ppo_atari.patch"}
    elif result.get("status") == "ok":
        result = {**result, "flags": resolved_flags(ROOT / f"{run['algo']}.py", command(run)[2:]),
                  "script_commit": script_commit(run["algo"])}
    run_dir = out / "runs" / run["id"]
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomically(run_dir / "result.json", result)


def execute(run: dict, out: Path, workers: int = 1) -> dict:
    """The local backend's job: run, then record, keeping the TensorBoard events under <out>/tensorboard."""
    result = perform(run, ROOT, out / "tensorboard" / run["id"], workers)
    record(out, run, result)
    return result


def ray_task(run: dict, workers: int, log_dir: str) -> dict:
    """The body of a Ray task: run in the task's copy of the repository (Ray's working_dir); the
    curve travels back to the driver inside the result. The events and checkpoints go to the
    driver's `log_dir` where the worker sees its folder (a local instance, or a shared
    filesystem), so that a retried task goes on from its checkpoint; else to a temporary folder."""
    import tempfile

    if Path(log_dir).parent.is_dir():
        return perform(run, Path.cwd(), Path(log_dir), workers)
    with tempfile.TemporaryDirectory() as tmp:
        return perform(run, Path.cwd(), Path(tmp), workers)


def is_finished(run: dict, out: Path) -> bool:
    """Finished means a complete result.json that says ok; a failed run is tried again."""
    path = out / "runs" / run["id"] / "result.json"
    return path.exists() and json.loads(path.read_text())["status"] == "ok"


def refresh_eval(run: dict, out: Path) -> str:
    """Give a finished run recorded without its greedy evaluation one (see the module's docstring);
    return what was done, for the progress line."""
    path = out / "runs" / run["id"] / "result.json"
    result = json.loads(path.read_text())
    if result.get("eval_returns"):
        return "has its evaluation"
    log_dir, how = out / "tensorboard" / run["id"], "read from its events"
    try:
        curve = read_curve(str(log_dir))
    except (OSError, ValueError, KeyError):  # no events, or not those of a whole run
        curve = None
    if curve is None or curve["return"] != result["curve"]["return"] or not curve["eval"]:
        shutil.rmtree(log_dir, ignore_errors=True)
        rerun = perform(run, ROOT, log_dir)
        if rerun["status"] != "ok":
            return f"rerun FAILED: {rerun['error']}"
        curve, how = rerun["curve"], f"rerun in {rerun['wall_seconds'] / 60:.0f} min, same curve"
        curve["eval"] = rerun["eval_returns"]
        if curve["return"] != result["curve"]["return"]:
            return f"rerun DIFFERS from the recorded curve (final return {rerun['final_return']}); not recorded"
    write_json_atomically(path, {**result, "eval_returns": curve["eval"]})
    return f"evaluation {np.mean(curve['eval']):.1f} ({how})"


def load_results(out: Path) -> list[dict]:
    results = []
    for path in sorted((out / "runs").glob("*/result.json")):
        results.append(json.loads(path.read_text()))
    return results


def write_summary(out: Path) -> None:
    """summary.csv: one row per finished run, sorted, rewritten atomically."""
    rows = sorted((r for r in load_results(out) if r["status"] == "ok"),
                  key=lambda r: (r["algo"], r["env_id"], r.get("variant") or "", r["seed"]))
    tmp = out / f"summary.csv.{os.getpid()}.tmp"  # two runners on one folder never share a temporary file
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, SUMMARY_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, out / "summary.csv")


def run_matrix(runs: list[dict], out: Path, workers: int, backend: str = "local", address: str | None = None,
               cpus_per_run: float = 1.0) -> tuple[int, int]:
    """Run every run not yet finished; return (finished, failed). Progress is printed as runs end."""
    todo = [r for r in runs if not is_finished(r, out)]
    where = f"Ray at {address}" if address else ("a local Ray instance" if backend == "ray" else f"{workers} local workers")
    print(f"{len(runs)} runs, {len(runs) - len(todo)} already finished, {len(todo)} to run on {where}; "
          f"results in {out}", flush=True)
    lock, done, failed, start = threading.Lock(), 0, 0, time.time()

    def finish(run: dict, result: dict) -> None:
        nonlocal done, failed
        with lock:
            if backend == "ray":  # the driver records what a task returns (the local backend already has)
                record(out, run, result)
            done += 1
            failed += result["status"] != "ok"
            write_summary(out)
            elapsed = time.time() - start
            eta = elapsed / done * (len(todo) - done)
            outcome = f"final return {result['final_return']:.1f}" if result["status"] == "ok" else f"FAILED: {result['error']}"
            print(f"[{done}/{len(todo)}] {run['id']}: {outcome} ({result.get('wall_seconds', 0):.0f} s) | "
                  f"elapsed {elapsed / 60:.1f} min, ETA {eta / 60:.1f} min", flush=True)

    if backend == "local":
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(lambda run: finish(run, execute(run, out, workers)), todo))
    else:
        import ray  # optional: pip install -r benchmarks/requirements-ray.txt

        # The repository travels to every worker as the tasks' working directory (results and
        # virtual environments stay behind); each worker needs the packages of requirements.txt.
        runtime_env = {"working_dir": str(ROOT), "excludes": [".git", ".venv", "benchmarks/results", "runs", "docs"]}
        # Ray runs its workers at nice 15 by default; here the runs are the work, and a niced run on
        # a busy machine would take many times longer (its wall time and SPS would mean little).
        os.environ.setdefault("RAY_worker_niceness", "0")  # read when a local instance starts
        ray.init(address=address, num_cpus=None if address else workers, runtime_env=runtime_env,
                 include_dashboard=False, log_to_driver=False)
        try:
            # A task whose worker dies is retried once by Ray; a run that fails is recorded as failed.
            if ray_task.__module__ != "__main__":  # imported (as by the tests): ship the code, not a module name
                ray.cloudpickle.register_pickle_by_value(sys.modules[ray_task.__module__])
            task = ray.remote(num_cpus=cpus_per_run, max_retries=1)(ray_task)
            (out / "tensorboard").mkdir(parents=True, exist_ok=True)
            pending = {task.remote(run, workers, str((out / "tensorboard" / run["id"]).resolve())): run
                       for run in todo}
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                run = pending.pop(ready[0])
                try:
                    result = ray.get(ready[0])
                except Exception as error:  # the task itself failed: worker lost, out of memory, a bug, ...
                    result = {key: run.get(key) for key in ("algo", "env_id", "seed", "suite", "variant")}
                    result.update(status="failed", error=f"{type(error).__name__}: {str(error).strip().splitlines()[-1]}")
                finish(run, result)
        finally:
            ray.shutdown()
    write_summary(out)
    return done - failed, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", required=True, choices=sorted(SUITES))
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="runs at once (default: the number of cores)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder (default: benchmarks/results)")
    parser.add_argument("--only", default="", help="run only the runs whose id contains this text")
    parser.add_argument("--print-commands", action="store_true", help="print the suite's commands and exit")
    parser.add_argument("--refresh-eval", action="store_true",
                        help="give finished runs recorded without a greedy evaluation one (rerun if needed), and exit")
    parser.add_argument("--backend", choices=["local", "ray"], default="local",
                        help="local processes, or Ray tasks (pip install -r benchmarks/requirements-ray.txt)")
    parser.add_argument("--address", help="with --backend ray: address of an existing Ray cluster (default: start a local one)")
    parser.add_argument("--cpus-per-run", type=float, default=1.0, help="with --backend ray: CPUs Ray reserves for each run")
    args = parser.parse_args()

    runs = [r for r in matrix(args.suite) if args.only in r["id"]]
    wanted = {r["variant"][len("mujoco-"):] for r in runs if (r["variant"] or "").startswith("mujoco-")}
    if wanted and wanted != {metadata.version("mujoco")}:  # a run id that names a version runs on it
        sys.exit(f"run.py: error: suite {args.suite} needs mujoco {' '.join(wanted)}, found {metadata.version('mujoco')}: "
                 f"see RESULTS.md for its venv")
    if args.print_commands:  # for slurm job arrays, GNU parallel, ...: one line per run, from the repository root
        print(f"# run from {ROOT}")
        for run in runs:
            path = "PYTHONPATH=. " if run["algo"].startswith("steps/") else ""  # a sub-step finds tooling.py
            print(path + shlex.join(command(run, str(args.out.resolve() / "tensorboard" / run["id"]))))
        return
    if args.refresh_eval:
        finished = [r for r in runs if is_finished(r, args.out)]
        print(f"suite {args.suite}: {len(finished)} finished runs to check", flush=True)
        for i, run in enumerate(finished, 1):
            print(f"[{i}/{len(finished)}] {run['id']}: {refresh_eval(run, args.out)}", flush=True)
        return
    print(f"suite {args.suite}: ", end="")
    finished, failed = run_matrix(runs, args.out, args.workers, args.backend, args.address, args.cpus_per_run)
    print(f"done: {finished} finished, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
