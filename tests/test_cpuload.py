"""The CPU accounting that tells a sample another process was competing for the cores."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest

from pytest_cnnperf.measuring import cpuload
from pytest_cnnperf.measuring.cpuload import CpuSnapshot

pytestmark = pytest.mark.skipif(
    cpuload.snapshot() is None, reason="needs Linux's /proc/stat and schedstat"
)


def test_contention_is_our_threads_waiting_and_steal_up_to_what_others_took(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    before = CpuSnapshot(waited_s=1.0, busy_s=100.0, stolen_s=5.0, own_s=10.0, wall_s=0.0)
    # in 2 s: our threads waited 0.8 s, the hypervisor stole 0.2 s of the two cores, and all CPUs
    # were busy 4 s, 2 of them ours: others took one core
    after = CpuSnapshot(waited_s=1.8, busy_s=104.0, stolen_s=5.2, own_s=12.0, wall_s=2.0)
    assert cpuload.contention(before, after, threads=2) == pytest.approx(0.4 + 0.1)
    # one thread of two cores is hit by half the steal
    assert cpuload.contention(before, after, threads=1) == pytest.approx(0.4 + 0.05)
    assert cpuload.contention(None, after, threads=2) is None
    # waiting while nobody else ran: our threads waited for each other
    alone = dataclasses.replace(after, busy_s=102.0, stolen_s=5.0)
    assert cpuload.contention(before, alone, threads=2) == 0.0
    # a thread that ended between the snapshots took its waiting with it: never negative
    ended = dataclasses.replace(after, waited_s=0.5)
    assert cpuload.contention(before, ended, threads=2) == 0.0


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_a_process_spinning_on_our_core_shows_as_contention() -> None:
    """A real competitor, measured: a spinning process pinned to the core this thread is pinned
    to, so that the two share it. Their shares are large and deterministic (about half the
    core); no timing is asserted."""
    core = min(os.sched_getaffinity(0))
    pinned = f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    mask = os.sched_getaffinity(0)
    spinner = subprocess.Popen([sys.executable, "-c", pinned])
    try:
        os.sched_setaffinity(0, {core})
        quiet = cpuload.snapshot()
        time.sleep(0.3)  # sleeping: the spinner's core is not denied to us
        asleep = cpuload.contention(quiet, cpuload.snapshot(), threads=1)
        before = cpuload.snapshot()
        _spin(0.5)
        spinning = cpuload.contention(before, cpuload.snapshot(), threads=1)
    finally:
        os.sched_setaffinity(0, mask)
        spinner.kill()
        spinner.wait()
    assert asleep is not None
    assert spinning is not None
    # sleeping beside the spinner is not contention, spinning beside it is (about half the
    # core); the machine's own steal and the process's other threads add to both alike
    assert spinning > 0.25
    assert asleep < spinning / 2
