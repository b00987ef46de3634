"""Run the tests under the kernels of other CPUs: a result that holds on one CPU only goes red here.

    python tests/other_cpus.py              # the kernel-dependent tests, under each of 4 settings
    python tests/other_cpus.py --all        # the whole suite under each setting
    python tests/other_cpus.py --grader     # also grade the reference solution of the 13 exercises
    python tests/other_cpus.py --only sse41 # one setting (its key below)

torch picks its CPU kernels when it loads, by what the CPU can do: ATen's vectorised ops (AVX-512,
AVX2 or none) and oneDNN's (its LSTM and matrix products, from AVX-512 down to SSE4.1). Two kernels
may sum the same numbers in another order, so the last bits of a result can depend on the CPU.
Each setting below caps one of the two, so that one machine stands for the others. A cap above
what the CPU has changes nothing (AVX2 on a CPU without AVX-512). Each run first prints the
kernels torch reports, so a setting that took no effect shows.
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
}
# The tests that compare numbers computed by torch: formulas against references, two code paths,
# a seed against itself, a resume against a run never stopped. The rest (the command line, the
# docs, the benchmarks' statistics, lint) run the same on every CPU.
KERNEL_TESTS = [
    "tests/test_math.py", "tests/test_exact_gradient.py", "tests/test_reinforce_vpg.py", "tests/test_trpo.py",
    "tests/test_truncation.py", "tests/test_rollout_storage.py", "tests/test_ppo_discrete.py",
    "tests/test_ppo_continuous.py", "tests/test_ppo_recurrent.py", "tests/test_guard_rails.py",
    "tests/test_resume.py", "tests/test_extension_points.py",
]
# What torch reports: ATen's capability, and oneDNN's ISA from its verbose line when an LSTM runs.
PROBE = ("import torch; torch.nn.LSTM(2, 2)(torch.zeros(1, 1, 2)); "
         "print('ATen:', torch.backends.cpu.get_cpu_capability())")


def kernels(env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE], env={**env, "ONEDNN_VERBOSE": "1"},
                         capture_output=True, text=True, check=True).stdout
    isa = next((line.split("isa:")[1] for line in out.splitlines() if "isa:" in line), "?")
    aten = next(line for line in out.splitlines() if line.startswith("ATen:"))
    return f"{aten}, oneDNN: {isa}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="the whole suite, not only KERNEL_TESTS")
    parser.add_argument("--grader", action="store_true", help="also grade the reference (exercises/grade.py)")
    parser.add_argument("--only", choices=SETTINGS, help="one setting")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (say, -k replay)")
    args = parser.parse_args()
    failed = []
    for name, caps in SETTINGS.items():
        if args.only and name != args.only:
            continue
        env = {**os.environ, **caps}
        print(f"== {name} ({' '.join(f'{k}={v}' for k, v in caps.items())}): {kernels(env)}", flush=True)
        commands = [["pytest", "-q", *([] if args.all else KERNEL_TESTS), *args.pytest_args]]
        if args.grader:
            commands.append([sys.executable, "exercises/grade.py", "."])
        for command in commands:
            start = time.time()
            code = subprocess.run(command, cwd=ROOT, env=env).returncode
            print(f"-- {name}: {' '.join(command[:2])} exited {code} after {time.time() - start:.0f} s", flush=True)
            if code:
                failed.append(f"{name}: {' '.join(command[:2])}")
    print("all passed" if not failed else "failed: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
