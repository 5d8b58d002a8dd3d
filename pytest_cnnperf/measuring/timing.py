"""Timing train steps: warm up until steady, then time a block of steps phase by phase.

A ``Clock`` marks between a step's phases: ``time.perf_counter`` on the CPU; on CUDA, events on
the measured device's current stream (not the current device's), read after one sync at the
block's end, with the block's total from a wall clock synced around it, so nothing inside the
timed region waits for the GPU. A ``Window`` (``train_loop``) splits the block into parts that
each lie inside one pass over the loader.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Phase = tuple[str, Callable[[], None]]


@dataclass(frozen=True)
class TimingPolicy:
    """Steps inside one sample."""

    warmup_min_steps: int
    warmup_max_steps: int
    warmup_max_s: float
    #: warm-up ends when the last ``warmup_window`` steps are within this fraction of each other
    warmup_tolerance: float
    warmup_window: int
    min_steps: int
    max_steps: int
    min_time_s: float
    memory_steps: int = 2


class Clock(Protocol):
    """Marks points in a stream of work and reads the time between them."""

    def sync(self) -> None:
        """Wait until all work issued so far has finished."""

    def now(self) -> float:
        """Host wall-clock seconds."""

    def mark(self) -> Any:
        """A point in the work stream, to be read after ``sync``."""

    def seconds_between(self, start: Any, end: Any) -> float:
        """Seconds between two marks; only valid after ``sync``."""

    def reserve(self, marks: int) -> None:
        """Prepare ``marks`` marks ahead, so that making them costs the timed steps nothing
        a training loop would not do."""


class CpuClock:
    """Host timestamps: CPU work is done when the call returns."""

    def sync(self) -> None:
        pass

    def reserve(self, marks: int) -> None:
        pass

    def now(self) -> float:
        return time.perf_counter()

    def mark(self) -> float:
        return time.perf_counter()

    def seconds_between(self, start: float, end: float) -> float:
        return end - start


class CudaClock:
    """CUDA events on ``device``'s current stream for marks; a synchronised wall clock for
    blocks. ``torch_module``: a stand-in for torch, for tests."""

    def __init__(self, device: Any, torch_module: Any = None) -> None:
        if torch_module is None:
            import torch as torch_module
        self._torch = torch_module
        self._device = device
        self._spare: list[Any] = []

    def sync(self) -> None:
        self._torch.cuda.synchronize(self._device)

    def now(self) -> float:
        return time.perf_counter()

    def _stream(self) -> Any:
        return self._torch.cuda.current_stream(self._device)

    def reserve(self, marks: int) -> None:
        """Create ``marks`` events and record each once: torch creates a CUDA event at its first
        record, which would otherwise happen inside the timed steps. Call it outside them."""
        stream = self._stream()
        for _ in range(marks - len(self._spare)):
            event = self._torch.cuda.Event(enable_timing=True)
            event.record(stream)
            self._spare.append(event)

    def mark(self) -> Any:
        event = self._spare.pop() if self._spare else self._torch.cuda.Event(enable_timing=True)
        event.record(self._stream())
        return event

    def seconds_between(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0


class BlockProbe(Protocol):
    """Reads something over the timed block alone (the device's energy counter): ``start``
    right after the block's first synchronisation, ``stop`` right after its last, both
    outside the timed interval."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Window(Protocol):
    """Where the timed steps of a loader's loop may run: inside one pass over it, so that an
    epoch's end and the restart after it are never timed (``measuring.loader``)."""

    def steps(self, wanted: int) -> int:
        """The steps to time, given the ``wanted`` of the timing policy."""

    def part(self, left: int) -> int:
        """Outside the timed steps: make room for the next part (restarting the loader and
        warming it again when its pass has no room left); how many of ``left`` steps it holds."""

    def crossed(self) -> bool:
        """Whether the part just timed ran into the end of a pass after all (a loader whose
        length was unknown): its steps are timed again."""


def run_step(phases: Sequence[Phase], clock: Clock) -> list[Any]:
    """Run one step, marking before the first phase and after each one."""
    marks = [clock.mark()]
    for _, run in phases:
        run()
        marks.append(clock.mark())
    return marks


def _synced_step_time(phases: Sequence[Phase], clock: Clock) -> float:
    clock.sync()
    return _timed(phases, clock, 1)[0]


def warm_up(phases: Sequence[Phase], clock: Clock, policy: TimingPolicy) -> tuple[float, int, bool]:
    """Run the cold first step, then steps until the last few agree within the tolerance: the
    cold step's time, the warm-up steps after it and whether they became steady in budget."""
    cold = _synced_step_time(phases, clock)
    started = clock.now()
    times: list[float] = []
    while True:
        times.append(_synced_step_time(phases, clock))
        window = times[-policy.warmup_window :]
        if (
            len(times) >= policy.warmup_min_steps
            and len(window) == policy.warmup_window
            and max(window) <= min(window) * (1 + policy.warmup_tolerance)
        ):
            return cold, len(times), True
        if len(times) >= policy.warmup_max_steps or clock.now() - started >= policy.warmup_max_s:
            return cold, len(times), False


def steps_for(step_estimate_s: float, policy: TimingPolicy) -> int:
    """How many steps fill the minimum time, within the policy's step bounds."""
    wanted = math.ceil(policy.min_time_s / step_estimate_s) if step_estimate_s > 0 else 0
    return max(policy.min_steps, min(policy.max_steps, wanted))


def time_block(
    phases: Sequence[Phase],
    clock: Clock,
    steps: int,
    probe: BlockProbe | None = None,
    window: Window | None = None,
) -> tuple[float, list[list[Any]]]:
    """Time ``steps`` steps back to back; returns the synchronised wall time and each step's
    marks. Nothing inside the block waits for the device. ``window``: in parts, each inside
    one pass over a loader, their times summed."""
    clock.sync()
    if probe:
        probe.start()
    if window is None:
        wall, marks = _timed(phases, clock, steps)
    else:
        wall, marks = 0.0, []
        while len(marks) < steps:
            part = window.part(steps - len(marks))
            clock.sync()
            part_wall, part_marks = _timed(phases, clock, part)
            if not window.crossed():
                wall, marks = wall + part_wall, marks + part_marks
    if probe:
        probe.stop()
    return wall, marks


def _timed(phases: Sequence[Phase], clock: Clock, steps: int) -> tuple[float, list[list[Any]]]:
    """``steps`` steps after a synchronisation: their synchronised wall time and marks."""
    start = clock.now()
    marks = [run_step(phases, clock) for _ in range(steps)]
    clock.sync()
    return clock.now() - start, marks


@dataclass(frozen=True)
class TimedSteps:
    """The timed part of a sample: the cold step, the warm-up and a block of timed steps
    (``model.Sample`` holds the same figures with what was measured around them)."""

    step_time_s: float
    step_times_s: tuple[float, ...]
    phases: dict[str, tuple[float, ...]]
    cold_step_s: float
    #: steps run before the timed block: the cold one, the warm-up, one to size the block
    warmup_steps: int
    warmup_steady: bool


def time_steps(
    phases: Sequence[Phase],
    clock: Clock,
    policy: TimingPolicy,
    *,
    per_step_wall: bool,
    probe: BlockProbe | None = None,
    window: Window | None = None,
) -> TimedSteps:
    """Warm up, then time one block and summarise it. ``per_step_wall``: the figure is the
    median step (CPU, where marks are wall-clock readings), else the block's synchronised wall
    time per step (CUDA)."""

    cold, warmup_steps, steady = warm_up(phases, clock, policy)
    estimate = _synced_step_time(phases, clock)
    steps = steps_for(estimate, policy)
    if window is not None:
        steps = window.steps(steps)
    clock.reserve(steps * (len(phases) + 1))
    wall, marks = time_block(phases, clock, steps, probe, window)
    names = [name for name, _ in phases]
    per_phase: dict[str, list[float]] = {name: [] for name in names}
    totals = []
    for step_marks in marks:
        for i, name in enumerate(names):
            per_phase[name].append(clock.seconds_between(step_marks[i], step_marks[i + 1]))
        totals.append(clock.seconds_between(step_marks[0], step_marks[-1]))
    figure = statistics.median(totals) if per_step_wall else wall / steps
    return TimedSteps(
        step_time_s=figure,
        step_times_s=tuple(totals),
        phases={name: tuple(values) for name, values in per_phase.items()}
        if len(names) > 1
        else {},
        cold_step_s=cold,
        warmup_steps=warmup_steps + 2,
        warmup_steady=steady,
    )
