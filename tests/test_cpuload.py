"""The CPU accounting that tells a sample another process was competing for the cores."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pytest_cnnperf import cpuload
from pytest_cnnperf.cpuload import CpuSnapshot

pytestmark = pytest.mark.skipif(cpuload.snapshot() is None, reason="needs Linux's /proc/stat")


def test_contention_is_what_others_took_beyond_the_spare_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    before = CpuSnapshot(busy_s=100.0, own_s=10.0, wall_s=0.0)
    # in 2 s: all CPUs busy for 4 s, 2 of them ours: others took one core
    after = CpuSnapshot(busy_s=104.0, own_s=12.0, wall_s=2.0)
    assert cpuload.contention(before, after, threads=2) == pytest.approx(1.0)
    # with one thread of two cores, that core was spare: no contention
    assert cpuload.contention(before, after, threads=1) == 0.0
    assert cpuload.contention(None, after, threads=2) is None


def test_a_process_spinning_beside_us_shows_as_contention() -> None:
    """A real competitor, measured: a spinning process while this one sleeps. Its share is
    large and deterministic (a whole core); no timing is asserted."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        before = cpuload.snapshot()
        time.sleep(0.5)
        taken = cpuload.contention(before, cpuload.snapshot(), threads=10_000)
    finally:
        spinner.kill()
        spinner.wait()
    # threads beyond the cores: nothing spare, so the spinner's core counts
    assert taken is not None
    assert taken > 0.5
