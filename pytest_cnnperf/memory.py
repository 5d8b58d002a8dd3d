"""Peak memory of a steady-state step, measured in a pass of its own after the timed steps.

CUDA: the caching allocator's peaks, after emptying its cache and resetting them, so that
``reserved`` is what the step itself needs the allocator to hold.

CPU: PyTorch's profiler sees every allocation of its CPU allocator (``tracemalloc`` does not), so
the peak of tensor bytes alive during a step is exact and repeatable: the bytes alive when the step
starts (weights, gradients, optimizer state, batch) plus the highest excursion above that inside
the step. The process's peak resident set size (``VmHWM`` after resetting it through
``/proc/self/clear_refs``) is reported beside it; it is a real figure of the process, but the C
allocator's caching makes it too coarse to gate on.
"""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .results import MemoryPeak
from .timing import Phase

#: lines the profiler's native logger prints that say nothing to a benchmark's reader
_PROFILER_CHATTER = (
    "USDT:",
    "profiler_start",
    "profiler_stop",
    "gpuGetDeviceCount",
    "Memory block of unknown size",
)


def cuda_peak(phases: Sequence[Phase], device: Any, steps: int) -> MemoryPeak:
    import torch

    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    retries_before = torch.cuda.memory_stats(device).get("num_alloc_retries", 0)
    for _ in range(steps):
        for _, run in phases:
            run()
    torch.cuda.synchronize(device)
    stats = torch.cuda.memory_stats(device)
    return MemoryPeak(
        allocated_bytes=int(stats.get("allocated_bytes.all.peak", 0)),
        reserved_bytes=int(stats.get("reserved_bytes.all.peak", 0)),
        source="cuda-allocator",
        alloc_retries=int(stats.get("num_alloc_retries", 0)) - int(retries_before),
    )


def cpu_peak(phases: Sequence[Phase], resident: Callable[[], int], steps: int) -> MemoryPeak:
    """Profile ``steps`` steps and take the highest tensor-byte excursion of a step after the
    first (whose frees of blocks allocated before profiling are invisible to the profiler)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    gc.collect()
    rss_reset = _reset_peak_rss()
    with (
        _quiet_native_stderr(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        for _ in range(max(2, steps)):
            with record_function(_STEP_LABEL):
                for _, run in phases:
                    run()
    resident_bytes = resident()
    memory: list[tuple[int, int]] = []
    windows: list[tuple[int, int]] = []
    for event in prof.profiler.kineto_results.events():
        if event.name() == "[memory]":
            memory.append((event.start_ns(), event.nbytes()))
        elif event.name() == _STEP_LABEL:
            windows.append((event.start_ns(), event.start_ns() + event.duration_ns()))
    memory.sort()
    windows.sort()
    peak = max(_peak_excursion(memory, start, end) for start, end in windows[1:])
    return MemoryPeak(
        allocated_bytes=resident_bytes + peak,
        reserved_bytes=_peak_rss() if rss_reset else None,
        source="cpu-profiler",
    )


_STEP_LABEL = "cnnperf::step"


def _peak_excursion(events: Sequence[tuple[int, int]], start_ns: int, end_ns: int) -> int:
    """Highest running total of allocations minus frees within ``[start_ns, end_ns]``, measured
    from the total at ``start_ns``."""
    current = peak = 0
    for when, nbytes in events:
        if when < start_ns:
            continue
        if when > end_ns:
            break
        current += nbytes
        peak = max(peak, current)
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


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Hold back what native code writes to file descriptor 2 while profiling, and pass on
    the lines that are not the profiler's start/stop chatter."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [
                line
                for line in sink.read().decode(errors="replace").splitlines()
                if line.strip() and not any(c in line for c in _PROFILER_CHATTER)
            ]
            if kept:
                os.write(2, ("\n".join(kept) + "\n").encode())
