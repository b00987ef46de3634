"""Give every committed result.json that lacks them its resolved flags and its script's commit.

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


def main() -> None:
    committed = set(git("ls-files", str(DEFAULT_OUT / "runs")).splitlines())
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((DEFAULT_OUT / "runs").glob("*/result.json")):
            relative = str(path.relative_to(ROOT))
            result = json.loads(path.read_text())
            if relative not in committed or result.get("status") != "ok" or "flags" in result:
                continue
            added = git("log", "--diff-filter=A", "--format=%H", "--", relative).splitlines()[-1]
            script = f"{result['algo']}.py"
            commit = git("log", "-1", "--format=%H", added, "--", script)
            old = Path(tmp) / f"{commit[:12]}_{script}"
            if not old.exists():
                old.write_text(git("show", f"{commit}:{script}") + "\n")
            flags = resolved_flags(old, shlex.split(result["command"])[2:])
            write_json_atomically(path, {**result, "flags": flags, "script_commit": commit,
                                         "flags_from": f"{script} at {added[:12]}, the commit that added this result"})
            print(f"{relative}: {script} of {commit[:12]}")


if __name__ == "__main__":
    main()
