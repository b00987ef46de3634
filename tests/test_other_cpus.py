"""The tests most bound to the CPU's kernels pass under the kernels of other CPUs too.

torch picks its kernels by the CPU it runs on (tests/other_cpus.py says how, and runs every
kernel-dependent test under each cap). Here, within CI's time, a small set runs capped. The
recurrent replay and the gradient through time run with oneDNN's LSTM capped at AVX2 (the kernel
of a CPU without AVX-512, under which a replay held bit for bit failed) and at SSE4.1. The
written-out policies, held to torch.distributions bit for bit, run on ATen's scalar kernels. A cap
that changes no kernel on this CPU is skipped: the plain run covers it.
"""

import os
import subprocess
import sys

import pytest
from conftest import ROOT
from other_cpus import kernels

RECURRENT = ["tests/test_ppo_recurrent.py", "-k", "replays_whole or gradient_flows or reset_where"]
CAPPED = {
    "onednn-avx2": ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, RECURRENT),
    "onednn-sse41": ({"ONEDNN_MAX_CPU_ISA": "SSE41"}, RECURRENT),
    "aten-default": ({"ATEN_CPU_CAPABILITY": "default"},
                     ["tests/test_ppo_discrete.py", "tests/test_ppo_continuous.py", "tests/test_reinforce_vpg.py",
                      "-k", "bit_for_bit"]),
}


@pytest.mark.parametrize("setting", CAPPED)
def test_kernel_bound_tests_pass_under_another_cpus_kernels(setting):
    caps, selection = CAPPED[setting]
    env = {**os.environ, **caps}
    if kernels(env) == kernels(dict(os.environ)):
        pytest.skip(f"{setting} changes no kernel on this CPU")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-o", "addopts=", *selection],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-500:]
