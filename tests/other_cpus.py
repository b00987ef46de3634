"""Run the tests under the kernels of other CPUs: a result that holds on one CPU only goes red here.

    python tests/other_cpus.py              # the kernel-dependent tests, under each of 4 settings
    python tests/other_cpus.py --all        # the whole suite under each setting
    python tests/other_cpus.py --grader     # also grade the reference solution of the 13 exercises
    python tests/other_cpus.py --grader-only --no-learning   # only grade it (grade.py's flags after)
    python tests/other_cpus.py --only sse41 -k replay   # one setting (its key below), a selection

torch picks its CPU kernels when it loads, by what the CPU can do. ATen's vectorised ops run on
AVX-512, AVX2 or no vector unit. oneDNN runs the LSTM, from AVX-512 down to SSE4.1. MKL runs the
float32 matrix products, on a path of its own choosing. Two kernels may sum the same numbers in
another order, and may compute tanh or a sigmoid otherwise. So the last bits of a result can
depend on the CPU. Each setting below caps one library, so that one machine stands for others. A
cap at or above what the CPU has changes nothing (AVX2 on a CPU without AVX-512): such a setting
is skipped, since the plain `pytest` covers it. Each run first prints the kernels torch reports.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "onednn-avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "sse41": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},  # MKL's matrix products on its SSE2 path
}
# The tests that compare numbers computed by torch: formulas against references, two code paths,
# a seed against itself, a resume against a run never stopped. The rest (the command line, the
# docs, the benchmarks' statistics, lint) run the same on every CPU.
KERNEL_TESTS = [
    "tests/test_math.py", "tests/test_exact_gradient.py", "tests/test_reinforce_vpg.py", "tests/test_trpo.py",
    "tests/test_truncation.py", "tests/test_rollout_storage.py", "tests/test_ppo_discrete.py",
    "tests/test_ppo_continuous.py", "tests/test_ppo_recurrent.py", "tests/test_guard_rails.py",
    "tests/test_resume.py", "tests/test_extension_points.py", "tests/test_ppo_atari.py",
]
# What torch reports: ATen's capability, oneDNN's ISA from its verbose line when an LSTM runs, and
# MKL's code path from its verbose line when a matrix product runs.
PROBE = ("import torch; torch.nn.LSTM(2, 2)(torch.zeros(1, 1, 2)); torch.ones(64, 64) @ torch.ones(64, 64); "
         "print('ATen:', torch.backends.cpu.get_cpu_capability())")


def kernels(env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE], env={**env, "ONEDNN_VERBOSE": "1", "MKL_VERBOSE": "1"},
                         capture_output=True, text=True, check=True).stdout
    isa = next((line.split("isa:")[1].split(",")[0] for line in out.splitlines() if "isa:" in line), "?")
    mkl = next((line.split("CNR:")[1].split()[0] for line in out.splitlines() if "CNR:" in line), "?")
    aten = next(line for line in out.splitlines() if line.startswith("ATen:"))
    return f"{aten}, oneDNN: {isa}, MKL's conditional numerical reproducibility (CNR): {mkl}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="the whole suite, not only KERNEL_TESTS")
    parser.add_argument("--grader", action="store_true", help="also grade the reference (exercises/grade.py)")
    parser.add_argument("--grader-only", action="store_true",
                        help="only grade the reference, without pytest; the other arguments go to grade.py")
    parser.add_argument("--only", choices=SETTINGS, help="one setting")
    args, pytest_args = parser.parse_known_args()  # the rest goes to pytest (say, -k replay)
    failed, native = [], kernels(dict(os.environ))
    print(f"this CPU: {native}", flush=True)
    for name, caps in SETTINGS.items():
        if args.only and name != args.only:
            continue
        env = {**os.environ, **caps}
        setting = f"{name} ({' '.join(f'{k}={v}' for k, v in caps.items())})"
        if kernels(env) == native:
            print(f"== {setting}: the same kernels as this CPU's, which plain pytest runs: skipped", flush=True)
            continue
        print(f"== {setting}: {kernels(env)}", flush=True)
        commands = [] if args.grader_only else [
            [sys.executable, "-m", "pytest", "-q", *([] if args.all else KERNEL_TESTS), *pytest_args]]
        if args.grader or args.grader_only:
            commands.append([sys.executable, "exercises/grade.py", ".", *(pytest_args if args.grader_only else [])])
        for command in commands:
            start = time.time()
            code = subprocess.run(command, cwd=ROOT, env=env).returncode
            what = "pytest" if "pytest" in command else "grade.py"
            print(f"-- {name}: {what} exited {code} after {time.time() - start:.0f} s", flush=True)
            if code:
                failed.append(f"{name}: {what}")
    print("all passed" if not failed else "failed: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
