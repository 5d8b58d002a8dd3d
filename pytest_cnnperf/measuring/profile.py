"""The operator profile: a few steady steps under ``torch.profiler``, after the timed steps.

The operators are those the model, the loss, the optimizer and the autograd engine call
(``aten::conv2d``, ``aten::convolution_backward``), the operators they call in turn counted in them.
Each one's time per step is its CPU time or, on CUDA, the device time of the kernels it launched
(CUPTI), in its fastest profiled step (something else running on the machine only ever slows an
operator down); its spread is how far that can be off (its gap to the next fastest step), which
is what a later comparison must stand out of. Forward hooks open a ``record_function`` range per
module, so that a forward operator is named with the module that ran it (``layer4.1.conv2``);
compiled models are left unhooked, as hooks would make them recompile.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..model.profile import OperatorTime, Profile
from .timing import Clock, run_step
from .workload import Workload

#: steps profiled (after one unprofiled step that settles the profiler's own allocations)
STEPS = 4
#: the operators kept: the TIME_ROWS that take most time (the small ones too, which show how
#: much all the operators changed alike: a step's operators rarely number more), and the
#: operators that together allocate COVERAGE of what is allocated, at most MEMORY_ROWS more
TIME_ROWS = 40
MEMORY_ROWS = 6
COVERAGE = 0.95

_STEP = "cnnperf::profiled-step"
_MODULE = "cnnperf::module:"
#: events with a namespace that are not operators: our ranges and the autograd engine's
NOT_OPERATORS = ("cnnperf::", "autograd::")


class ProfileFailed(Exception):
    """The profiler could not profile the step; the message says why."""


def profile_steps(
    workload: Workload, device: Any, clock: Clock, trace: str | None = None
) -> Profile:
    """Profile :data:`STEPS` steps of ``workload``; write them as a Chrome trace to ``trace``
    when given. ``ProfileFailed`` for a step the profiler cannot handle."""
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    hooked = workload.model is not None and workload.compiled is None
    try:
        run_step(workload.phases, clock)
        clock.sync()
        with (
            quiet_native_stderr(),
            _module_ranges(workload.model if hooked else None),
            profile(activities=activities, profile_memory=True) as prof,
        ):
            for _ in range(STEPS):
                with record_function(_STEP):
                    run_step(workload.phases, clock)
                    clock.sync()
        found = summarise(prof.events(), cuda)
    except ProfileFailed:
        raise
    except Exception as exc:  # the profiler's own failures come in many types
        raise ProfileFailed(f"{type(exc).__name__}: {exc}".splitlines()[0]) from exc
    if trace:
        try:
            os.makedirs(os.path.dirname(trace) or ".", exist_ok=True)
            prof.export_chrome_trace(trace)
        except OSError as exc:
            raise ProfileFailed(f"the trace could not be written to {trace}: {exc}") from exc
    return found


def summarise(events: Any, cuda: bool) -> Profile:
    """A profile of the operators in ``events`` (the profiler's), grouped into its steps."""
    from torch.autograd import DeviceType  # type: ignore[attr-defined]

    # the host's events: on CUDA the list also holds the kernels and a device-side copy of each
    # range, whose times are already counted in the operators that launched them
    events = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async]
    steps = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == _STEP)
    if not steps:
        raise ProfileFailed(
            "the profiler recorded none of the profiled steps (was another profiler running?)"
        )
    starts = [start for start, _ in steps]
    seconds: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(steps))
    calls: dict[str, int] = defaultdict(int)
    allocated: dict[str, int] = defaultdict(int)
    modules: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for event in events:
        if not _operator(event.name) or not _outermost(event):
            continue  # an inner operator's time and memory count in the one that called it
        step = bisect.bisect_right(starts, event.time_range.start) - 1
        if step < 0 or event.time_range.start > steps[step][1]:
            continue
        name = event.name
        own = (event.device_time_total if cuda else event.cpu_time_total) / 1e6
        seconds[name][step] += own
        calls[name] += 1
        memory = event.device_memory_usage if cuda else event.cpu_memory_usage
        allocated[name] += max(0, int(memory))
        module = _module_of(event)
        if module is not None:
            modules[name][module] += own
    count = len(steps)
    rows = [
        OperatorTime(
            name=name,
            calls=calls[name] / count,
            seconds=min(times),
            spread=_noise(times),
            allocated_bytes=allocated[name] // count,
            module=max(modules[name], key=modules[name].__getitem__) if modules[name] else None,
        )
        for name, times in seconds.items()
    ]
    kept = sorted(rows, key=lambda o: o.seconds, reverse=True)[:TIME_ROWS]
    kept += [o for o in _top(rows, lambda o: o.allocated_bytes, MEMORY_ROWS) if o not in kept]
    kept.sort(key=lambda o: o.seconds, reverse=True)
    step_s = min((end - start) / 1e6 for start, end in steps)
    return Profile(
        clock="cuda" if cuda else "cpu",
        steps=count,
        step_s=step_s,
        operators=tuple(kept),
        other_s=max(0.0, sum(o.seconds for o in rows) - sum(o.seconds for o in kept)),
        rest=tuple(sorted(o.name for o in rows if o not in kept)),
    )


def _noise(times: list[float]) -> float:
    """How far the fastest step's time can be off: its gap to the next fastest (large only when
    something else ran in all the steps but one)."""
    fastest = sorted(times)[:2]
    return fastest[-1] - fastest[0]


def _top(rows: list[OperatorTime], size: Any, most: int) -> list[OperatorTime]:
    """The largest rows by ``size`` that together hold :data:`COVERAGE` of it, at most ``most``."""
    ranked = sorted((r for r in rows if size(r) > 0), key=size, reverse=True)
    total, kept, held = sum(size(r) for r in ranked), [], 0.0
    for row in ranked[:most]:
        if held >= COVERAGE * total:
            break
        kept.append(row)
        held += size(row)
    return kept


def _operator(name: str) -> bool:
    """Whether an event is an operator (not our ranges, the autograd engine's, or Python's)."""
    return "::" in name and not name.startswith(NOT_OPERATORS)


def _outermost(event: Any) -> bool:
    """Whether no other operator called this one (the model, the loss, the optimizer or the
    autograd engine did)."""
    parent = event.cpu_parent
    while parent is not None:
        if _operator(parent.name):
            return False
        parent = parent.cpu_parent
    return True


def _module_of(event: Any) -> str | None:
    """The innermost module range around a (forward) operator, if any."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(_MODULE):
            return str(parent.name[len(_MODULE) :])
        parent = parent.cpu_parent
    return None


@contextlib.contextmanager
def _module_ranges(model: Any) -> Iterator[None]:
    """While profiling, every named submodule's forward runs inside a ``record_function``
    range named after it."""
    if model is None:
        yield
        return
    from torch.autograd.profiler import record_function

    open_ranges: dict[int, list[Any]] = defaultdict(list)
    handles = []

    def enter(name: str) -> Any:
        def hook(module: Any, args: Any) -> None:
            entered = record_function(_MODULE + name)
            entered.__enter__()
            open_ranges[id(module)].append(entered)

        return hook

    def leave(module: Any, args: Any, output: Any) -> None:
        if open_ranges[id(module)]:
            open_ranges[id(module)].pop().__exit__(None, None, None)

    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_pre_hook(enter(name)))
            handles.append(module.register_forward_hook(leave))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


#: lines the profiler's native logger prints that say nothing to a benchmark's reader
_PROFILER_CHATTER = (
    "USDT:",
    "profiler_start",
    "profiler_stop",
    "gpuGetDeviceCount",
    "Memory block of unknown size",
)


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
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
