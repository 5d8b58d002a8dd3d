"""The operator profile: a few steady steps under ``torch.profiler``, after the timed steps.

Each outermost operator's time per step is its CPU time or, on CUDA, its kernels' device time,
in its fastest profiled step (a neighbour only ever slows it down), with its gap to the next
fastest as its spread. Forward hooks name a forward operator with its module
(``layer4.1.conv2``); compiled models are left unhooked, as hooks would make them recompile.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..model.profile import OperatorTime, Profile
from .timing import Clock, run_step
from .workload import Workload

#: steps profiled (after one unprofiled step that settles the profiler's own allocations)
STEPS = 4
#: the operators kept: the TIME_ROWS that take most time (small ones too: they show how much
#: all changed alike), and those allocating COVERAGE of the bytes, at most MEMORY_ROWS more
TIME_ROWS = 40
MEMORY_ROWS = 6
COVERAGE = 0.95

_STEP = "cnnperf::profiled-step"
_MODULE = "cnnperf::module:"
#: events with a namespace that are not operators: our ranges, the autograd engine's, the
#: profiler's own
NOT_OPERATORS = ("cnnperf::", "autograd::", "profiler::")
#: the profiler's allocation events, and the utility operators its own tables leave out
_MEMORY = "[memory]"
_UTILITY = frozenset(("[OutOfMemory]", "aten::is_leaf", "aten::output_nr", "aten::_version"))


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
            module_ranges(workload.model if hooked else None),
            profile(activities=activities, profile_memory=True) as prof,
        ):
            for _ in range(STEPS):
                with record_function(_STEP):
                    run_step(workload.phases, clock)
                    clock.sync()
        found = summarise(raw_events(prof), cuda)
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


#: what is read of each raw event (``torch._C._autograd._KinetoEvent``'s methods)
RAW_EVENT_METHODS = (
    "name",
    "device_type",
    "start_ns",
    "end_ns",
    "nbytes",
    "start_thread_id",
    "end_thread_id",
    "is_async",
    "correlation_id",
    "linked_correlation_id",
)


def raw_events(prof: Any) -> list[Any]:
    """``prof.profiler.kineto_results.events()``: a private API, read as it is much faster than
    the public ``prof.events()`` that would replace it (docs/validation.md); ``ProfileFailed``,
    naming what is missing, on a torch that changed it (tests/test_attribution.py pins it)."""
    import torch

    try:
        events = list(prof.profiler.kineto_results.events())
    except AttributeError as exc:
        missing = f"'s profiler has no raw events (prof.profiler.kineto_results.events(): {exc})"
    else:
        lacking = [m for m in RAW_EVENT_METHODS if events and not hasattr(events[0], m)]
        if not lacking:
            return events
        missing = (
            f"'s raw profiler events have no {', '.join(lacking)} "
            "(prof.profiler.kineto_results.events())"
        )
    raise ProfileFailed(
        f"torch {torch.__version__}{missing}; pytest-cnnperf reads this private API for speed: "
        "use a torch release its changelog says it is tested with"
    )


@dataclass
class _Call:
    """One call of an outermost operator, as the host's events nest."""

    name: str
    step: int
    start: int
    end: int
    module: str | None
    device_ns: int = 0
    allocated: int = 0


def summarise(events: Any, cuda: bool) -> Profile:
    """A profile of the operators in ``events`` (:func:`raw_events`), grouped into its steps: on
    a host thread, an event's parent is the innermost one open when it starts; an operator's
    kernels are the device events linked to its correlation id, or to an operator it called."""
    from torch.autograd import DeviceType  # type: ignore[attr-defined]

    threads: dict[int, list[tuple[int, int, str, int]]] = defaultdict(list)
    allocations: dict[int, list[tuple[int, int]]] = defaultdict(list)
    kernel_ns: dict[int, int] = defaultdict(int)
    memory_device = DeviceType.CUDA if cuda else DeviceType.CPU
    for event in events:
        name = event.name()
        device = event.device_type()
        if name == _MEMORY:
            if device == memory_device:
                allocations[event.start_thread_id()].append((event.start_ns(), event.nbytes()))
        elif device != DeviceType.CPU:
            # a kernel or a copy: device time of the call it links to (a range's device-side
            # copy links to none)
            if linked := event.linked_correlation_id():
                kernel_ns[linked] += event.end_ns() - event.start_ns()
        elif not (
            event.is_async()
            or event.start_thread_id() != event.end_thread_id()
            or event.linked_correlation_id() > 0  # a launch: its op holds the correlation id
            or name in _UTILITY
        ):
            start, end = event.start_ns(), event.end_ns()
            threads[event.start_thread_id()].append((start, end, name, event.correlation_id()))
    steps = sorted((s, e) for rows in threads.values() for s, e, n, _ in rows if n == _STEP)
    if not steps:
        raise ProfileFailed(
            "the profiler recorded none of the profiled steps (was another profiler running?)"
        )
    starts = [start for start, _ in steps]
    calls: list[_Call] = []
    for thread, rows in threads.items():
        rows.sort(key=lambda r: (r[0], -r[1]))
        # the open events: their end, the call of the outermost operator among them, the module
        open_: list[tuple[int, _Call | None, str | None]] = []
        mine: list[_Call] = []
        for start, end, name, correlation in rows:
            while open_ and open_[-1][0] <= start:
                open_.pop()
            call, module = (open_[-1][1], open_[-1][2]) if open_ else (None, None)
            if name.startswith(_MODULE):
                module = name[len(_MODULE) :]
            elif call is None and _operator(name):
                step = bisect.bisect_right(starts, start) - 1
                if step >= 0 and start <= steps[step][1]:
                    call = _Call(name, step, start, end, module)
                    mine.append(call)
            if call is not None and correlation:
                call.device_ns += kernel_ns.get(correlation, 0)
            open_.append((end, call, module))
        _allocate(mine, allocations.get(thread, []))
        calls += mine
    return _profile(calls, len(steps), min(e - s for s, e in steps) / 1e9, cuda)


def _allocate(calls: list[_Call], allocations: list[tuple[int, int]]) -> None:
    """Each call's net allocation: the bytes allocated less those freed while it ran (on its
    thread)."""
    starts = [c.start for c in calls]  # the calls of one thread follow each other
    for when, nbytes in allocations:
        i = bisect.bisect_right(starts, when) - 1
        if i >= 0 and when <= calls[i].end:
            calls[i].allocated += nbytes


def _profile(calls: list[_Call], count: int, step_s: float, cuda: bool) -> Profile:
    """The profile of the operator calls of ``count`` steps: each operator's time in its fastest
    step, its noise, calls, allocations and module."""
    seconds: dict[str, list[float]] = defaultdict(lambda: [0.0] * count)
    times_called: dict[str, int] = defaultdict(int)
    allocated: dict[str, int] = defaultdict(int)
    modules: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for call in calls:
        own = (call.device_ns if cuda else call.end - call.start) / 1e9
        seconds[call.name][call.step] += own
        times_called[call.name] += 1
        allocated[call.name] += max(0, call.allocated)
        if call.module is not None:
            modules[call.name][call.module] += own
    rows = [
        OperatorTime(
            name=name,
            calls=times_called[name] / count,
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


@contextlib.contextmanager
def module_ranges(model: Any) -> Iterator[None]:
    """While profiling, every named submodule's forward runs inside a ``record_function``
    range named after it."""
    from torch.autograd.profiler import record_function

    open_ranges: dict[int, list[Any]] = defaultdict(list)

    def enter(name: str, module: Any) -> None:
        entered = record_function(_MODULE + name)
        entered.__enter__()
        open_ranges[id(module)].append(entered)

    def leave(module: Any) -> None:
        if open_ranges[id(module)]:
            open_ranges[id(module)].pop().__exit__(None, None, None)

    with forward_hooks(model, enter, leave):
        yield


@contextlib.contextmanager
def forward_hooks(
    model: Any,
    enter: Callable[[str, Any], None],
    leave: Callable[[Any], None],
    *,
    root: bool = False,
) -> Iterator[None]:
    """While open, ``enter(name, module)`` runs before every named submodule's forward and
    ``leave(module)`` after it (``root``: the model's own too, named by its class); no model,
    no hooks."""
    handles = []
    for name, module in model.named_modules() if model is not None else ():
        if name or root:
            label = name or type(module).__name__
            handles.append(
                module.register_forward_pre_hook(lambda m, args, label=label: enter(label, m))
            )
            handles.append(module.register_forward_hook(lambda m, args, output: leave(m)))
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
