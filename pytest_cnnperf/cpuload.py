"""How much CPU time a sample's own threads were denied while it ran.

Two Linux counters, both cumulative: every thread's time spent runnable but waiting for a core
(``/proc/self/task/<tid>/schedstat``, its second field), and the time the hypervisor gave the
machine's virtual CPUs to other machines (steal, in ``/proc/stat``). On a 2-core runner another
process that keeps one core busy halves a 2-thread train step without making its steps erratic or
slowing the short calibration workload, so the samples must say it themselves. Counting the
benchmark's own waiting, not others' CPU time, counts only the competition that reached it: a
busy neighbour beside a benchmark that sleeps, or that leaves cores free, does not count.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

#: /proc/stat's steal column after the "cpu" label
_STEAL_FIELD = 7


@dataclass(frozen=True)
class CpuSnapshot:
    #: this process's threads' time waiting for a core, summed
    waited_s: float
    #: the whole machine's steal time
    stolen_s: float
    wall_s: float


def snapshot() -> CpuSnapshot | None:
    """The counters now; ``None`` where Linux does not keep them."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            stolen = int(stat.readline().split()[1:][_STEAL_FIELD])
        waited_ns = sum(_waited_ns(task) for task in Path("/proc/self/task").iterdir())
    except (OSError, ValueError, IndexError):
        return None
    return CpuSnapshot(
        waited_s=waited_ns / 1e9,
        stolen_s=stolen / os.sysconf("SC_CLK_TCK"),
        wall_s=time.perf_counter(),
    )


def _waited_ns(task: Path) -> int:
    try:
        return int((task / "schedstat").read_text(encoding="ascii").split()[1])
    except FileNotFoundError:  # the thread ended since the directory was listed
        return 0


def contention(before: CpuSnapshot | None, after: CpuSnapshot | None, threads: int) -> float | None:
    """Cores' worth of CPU time a process running ``threads`` threads was denied between two
    snapshots: its threads' waiting plus its share of the steal (the steal of ``threads`` of the
    machine's cores). 0.0 on a quiet machine; about 0.5 for a 2-thread train step beside a
    process that keeps one core of two busy."""
    if before is None or after is None or after.wall_s <= before.wall_s:
        return None
    wall = after.wall_s - before.wall_s
    cores = os.cpu_count() or threads
    waited = (after.waited_s - before.waited_s) / wall
    stolen = (after.stolen_s - before.stolen_s) / wall * min(threads, cores) / cores
    # a thread that ended between the snapshots takes its waiting with it
    return max(0.0, waited + stolen)
