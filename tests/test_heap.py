"""The glibc heap kept between train steps (``measuring.heap``): freed gradients are reused, not
handed back to the kernel and faulted in again at the next step."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the heap's thresholds are glibc's",
)

# A step's pattern at a small scale: a 10 MiB block freed once (glibc raises its trim threshold to
# twice that, 20 MiB), then each "step" allocates three 8 MiB gradients, writes them and frees
# them: 24 MiB free at the top of the heap, more than 20 MiB, so glibc trims it every step.
STEPS = """
import ctypes, resource, sys
sys.path.insert(0, {root!r})
from pytest_cnnperf.measuring import heap
if {keep}:
    heap.keep()
    assert heap.KEPT

def touched(size):
    block = bytearray(size)
    ctypes.memset((ctypes.c_char * size).from_buffer(block), 1, size)
    return block

touched(10 << 20)  # freed at once
def step():
    blocks = [touched(8 << 20) for _ in range(3)]
    del blocks
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 5)
"""


def faults_per_step(keep: bool) -> int:
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", STEPS.format(root=root, keep=keep)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip())


def test_a_kept_heap_reuses_what_a_step_freed() -> None:
    pages = (24 << 20) // 4096
    assert faults_per_step(keep=False) > pages // 2  # glibc on its own: faulted in every step
    assert faults_per_step(keep=True) < pages // 20


def test_the_plugin_keeps_the_heap_of_cpu_runs_and_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    # a fresh process: the thresholds are the process's own
    result = pytester.runpytest_subprocess("--cnnperf", "--cnnperf-device=cpu")
    result.stdout.fnmatch_lines(["cnnperf: glibc heap kept between steps (trim threshold 1 GiB*"])


@pytest.mark.slow  # a fresh pytest process, as the test above: the same path, another branch
def test_a_users_own_threshold_is_left_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--cnnperf", "--cnnperf-device=cpu")
    result.stdout.no_fnmatch_line("*glibc heap kept*")
    assert result.ret == 0
