"""Peak memory of a steady-state step, measured in a pass of its own after the timed steps.

CUDA: the caching allocator's peaks, its cache emptied first, so ``reserved`` is what the step
needs held. CPU: the tensor bytes alive during a step, exact from the profiler's allocation
events (``tracemalloc`` misses them), plus the static tensors; the process's peak RSS is reported
beside it, too coarse under the C allocator's caching to gate on.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import MemoryPeak
from .profile import quiet_native_stderr, raw_events
from .workload import Workload


def cuda_peak(workload: Workload, device: Any, steps: int) -> MemoryPeak:
    import torch

    workload.settle()
    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    retries_before = torch.cuda.memory_stats(device).get("num_alloc_retries", 0)
    for _ in range(steps):
        for _, run in workload.phases:
            run()
    torch.cuda.synchronize(device)
    stats = torch.cuda.memory_stats(device)
    return _with_parts(
        MemoryPeak(
            allocated_bytes=int(stats.get("allocated_bytes.all.peak", 0)),
            reserved_bytes=int(stats.get("reserved_bytes.all.peak", 0)),
            source="cuda-allocator",
            alloc_retries=int(stats.get("num_alloc_retries", 0)) - int(retries_before),
        ),
        workload,
    )


def cpu_peak(workload: Workload, steps: int) -> MemoryPeak:
    """Profile ``steps`` steps (at least two) from a step boundary and take the peak of tensor
    bytes alive during a step after the first: the workload's static tensors plus everything
    allocated since the profiler started and not yet freed."""
    from torch.profiler import ProfilerActivity, profile, record_function

    workload.settle()
    gc.collect()
    rss_reset = _reset_peak_rss()
    quiet = quiet_native_stderr()
    with quiet, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(max(2, steps)):
            with record_function(_STEP_LABEL):
                for _, run in workload.phases:
                    run()
    memory: list[tuple[int, int]] = []
    windows: list[tuple[int, int]] = []
    for event in raw_events(prof):
        if event.name() == "[memory]":
            memory.append((event.start_ns(), event.nbytes()))
        elif event.name() == _STEP_LABEL:
            windows.append((event.start_ns(), event.end_ns()))
    memory.sort()
    windows.sort()
    peak = MemoryPeak(
        allocated_bytes=workload.static_bytes() + _peak_alive(memory, windows[1:]),
        reserved_bytes=_peak_rss() if rss_reset else None,
        source="cpu-profiler",
    )
    return _with_parts(peak, workload)


def _with_parts(peak: MemoryPeak, workload: Workload) -> MemoryPeak:
    """The peak with what it holds for certain: weights, gradients, optimizer state."""
    if workload.state_bytes is None:
        return peak
    weights, gradients, optimizer = workload.state_bytes()
    return dataclasses.replace(
        peak, parameters_bytes=weights, gradients_bytes=gradients, optimizer_bytes=optimizer
    )


_STEP_LABEL = "cnnperf::step"


def _peak_alive(events: Sequence[tuple[int, int]], windows: Sequence[tuple[int, int]]) -> int:
    """The highest running total of allocations minus frees (from the first event on) reached
    inside one of ``windows`` (blocks allocated before profiling never count)."""
    alive = peak = 0
    for when, nbytes in events:
        alive += nbytes
        if any(start <= when <= end for start, end in windows):
            peak = max(peak, alive)
    return peak


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter for this process (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_rss() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
