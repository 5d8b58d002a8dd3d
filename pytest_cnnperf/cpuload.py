"""How much of the CPU other processes took while a sample ran.

Read from Linux's ``/proc/stat`` (the time all CPUs spent busy, including steal: time the
hypervisor gave to other machines) less this process's own CPU time. On a 2-core runner another
process that keeps one core busy halves a 2-thread train step without making its steps erratic
or slowing the short calibration workload, so the samples must say it themselves.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

#: /proc/stat's busy columns after the "cpu" label: user, nice, system, irq, softirq, steal
#: (guest time is counted in user already; idle and iowait are not busy)
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class CpuSnapshot:
    busy_s: float
    own_s: float
    wall_s: float


def snapshot() -> CpuSnapshot | None:
    """The CPU times now; ``None`` where ``/proc/stat`` cannot be read (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()[1:]
        ticks = sum(int(fields[i]) for i in _BUSY_FIELDS)
    except (OSError, ValueError, IndexError):
        return None
    return CpuSnapshot(
        busy_s=ticks / os.sysconf("SC_CLK_TCK"),
        own_s=time.process_time(),
        wall_s=time.perf_counter(),
    )


def contention(before: CpuSnapshot | None, after: CpuSnapshot | None, threads: int) -> float | None:
    """Cores' worth of CPU time that others took between two snapshots beyond the cores a
    process running ``threads`` threads leaves free: 0.0 on a quiet machine, about 1.0 while
    another process keeps one core busy beside a benchmark that uses every core."""
    if before is None or after is None or after.wall_s <= before.wall_s:
        return None
    wall = after.wall_s - before.wall_s
    others = ((after.busy_s - before.busy_s) - (after.own_s - before.own_s)) / wall
    spare = max(0, (os.cpu_count() or threads) - threads)
    return max(0.0, others - spare)
