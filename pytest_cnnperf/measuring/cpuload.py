"""How much CPU time other processes denied a sample's threads while it ran (a neighbour can
slow a step without making it erratic or slowing the calibration, so samples must say it).

From cumulative Linux counters: each thread's time runnable but waiting (``schedstat``), the
machine's busy time and steal (``/proc/stat``), and this process's CPU time. The denial is the
threads' waiting plus their share of the steal, capped at what others took: the waiting alone
would count the threads waiting for each other; others' CPU time alone, a neighbour on free cores.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

#: /proc/stat's columns after the "cpu" label: busy ones (user, nice, system, irq, softirq, steal;
#: guest time is counted in user already, idle and iowait are not busy) and steal
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
_STEAL_FIELD = 7


@dataclass(frozen=True)
class CpuSnapshot:
    #: this process's threads' time waiting for a core, summed
    waited_s: float
    #: the whole machine's busy time, and of it, the steal
    busy_s: float
    stolen_s: float
    #: this process's CPU time
    own_s: float
    wall_s: float


def snapshot() -> CpuSnapshot | None:
    """The counters now; ``None`` where Linux does not keep them."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(field) for field in stat.readline().split()[1:]]
        waited_ns = sum(_waited_ns(task) for task in Path("/proc/self/task").iterdir())
    except (OSError, ValueError, IndexError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return CpuSnapshot(
        waited_s=waited_ns / 1e9,
        busy_s=sum(fields[i] for i in _BUSY_FIELDS) / tick,
        stolen_s=fields[_STEAL_FIELD] / tick,
        own_s=time.process_time(),
        wall_s=time.perf_counter(),
    )


def _waited_ns(task: Path) -> int:
    try:
        return int((task / "schedstat").read_text(encoding="ascii").split()[1])
    except FileNotFoundError:  # the thread ended since the directory was listed
        return 0


def contention(before: CpuSnapshot | None, after: CpuSnapshot | None, threads: int) -> float | None:
    """Cores' worth of CPU time other processes denied a process running ``threads`` threads
    between two snapshots: its threads' waiting plus their share of the steal, capped at the
    CPU time others took (figures of quiet and busy machines: docs/validation.md)."""
    if before is None or after is None or after.wall_s <= before.wall_s:
        return None
    wall = after.wall_s - before.wall_s
    cores = os.cpu_count() or threads
    waited = (after.waited_s - before.waited_s) / wall
    stolen = (after.stolen_s - before.stolen_s) / wall * min(threads, cores) / cores
    others = ((after.busy_s - before.busy_s) - (after.own_s - before.own_s)) / wall
    # a thread that ended between the snapshots takes its waiting with it: never below 0
    return max(0.0, min(waited + stolen, others))
