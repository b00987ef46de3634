"""Give every committed result.json that lacks them its resolved flags and its script's commit.
(benchmarks/results/trpo_normalized/*.json too: trpo.py's flags as trpo_normalized.py sets them.)

    python benchmarks/backfill_flags.py            # rewrites the result.json files in place

run.py records both for every run it finishes (`flags`: every field of the script's Args as the
run's command line set them, defaults included; `script_commit`: the last commit that changed the
script). Runs committed before it did get them here, from the script as it was at the commit
that added the run's result.json, and a `flags_from` note that says so. A result.json that is not
committed yet (a run still being recorded) is left alone.
"""

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import DEFAULT_OUT, ROOT, resolved_flags, write_json_atomically  # noqa: E402


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def trpo_normalized_argv(command: str) -> list[str]:
    """The trpo.py flags that benchmarks/trpo_normalized.py gives for its command line."""
    argv = shlex.split(command)[2:]
    zoo = ["--num-envs", "2", "--num-steps", "1024", "--gae-lambda", "0.95"] if "--zoo-batch" in argv else []
    return ([a for a in argv if a != "--zoo-batch"] + ["--total-timesteps", "1000000", "--eval-episodes", "0",
                                                        "--log-dir", "/tmp/trpo_normalized_runs"] + zoo)


def main() -> None:
    committed = set(git("ls-files", str(DEFAULT_OUT)).splitlines())
    paths = sorted((DEFAULT_OUT / "runs").glob("*/result.json")) + sorted((DEFAULT_OUT / "trpo_normalized").glob("*.json"))
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            relative = str(path.relative_to(ROOT))
            result = json.loads(path.read_text())
            normalized = path.parent.name == "trpo_normalized"  # trpo.py behind Gymnasium's normalisers
            if normalized:
                result = {**result, "algo": "trpo"}
            if relative not in committed or result.get("status", "ok") != "ok" or "flags" in result:
                continue
            added = git("log", "--diff-filter=A", "--format=%H", "--", relative).splitlines()[-1]
            script = f"{result['algo']}.py"
            commit = git("log", "-1", "--format=%H", added, "--", script)
            old = Path(tmp) / f"{commit[:12]}_{script}"
            if not old.exists():
                old.write_text(git("show", f"{commit}:{script}") + "\n")
            argv = trpo_normalized_argv(result["command"]) if normalized else shlex.split(result["command"])[2:]
            flags = resolved_flags(old, argv)
            if normalized:
                del result["algo"]
            write_json_atomically(path, {**result, "flags": flags, "script_commit": commit,
                                         "flags_from": f"{script} at {added[:12]}, the commit that added this result"})
            print(f"{relative}: {script} of {commit[:12]}")


if __name__ == "__main__":
    main()
