"""Where a step's time and memory go, operator by operator (:class:`Profile`: a few steady steps
under ``torch.profiler``, in a pass of its own after a sample's timed steps), and which operators
account for a change between two runs, beyond the profiles' own noise (:class:`Attribution`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from . import units
from .values import Bytes, NonNegative, Positive, PositiveInt


@dataclass(frozen=True)
class OperatorTime:
    """One operator's share of a profiled step."""

    #: the aten operator: ``aten::conv2d``, ``aten::convolution_backward``, ``aten::linear``
    name: str
    calls: NonNegative
    #: its own time per step, in the fastest profiled step (of the fastest process)
    seconds: NonNegative
    #: how far that time can be off: its noise from step to step (and process to process)
    spread: NonNegative = 0.0
    #: bytes it allocated per step, the operators it called included
    allocated_bytes: Bytes = 0
    #: the module that ran most of it in the forward pass (``layer4.1.conv2``), where known
    module: str | None = None


@dataclass(frozen=True)
class Profile:
    """The operators of a few profiled steps that take most of their time (40 of them, which
    is all or nearly all a step has), and those that allocate most."""

    #: ``cuda``: the device time of the kernels each operator launched; ``cpu``: its own time
    clock: str
    steps: PositiveInt
    #: the wall time of the fastest profiled step (the profiler's overhead included)
    step_s: Positive
    operators: tuple[OperatorTime, ...]
    #: the time per step of the operators below the cut, and their names
    other_s: NonNegative = 0.0
    rest: tuple[str, ...] = ()

    def operator(self, name: str) -> OperatorTime | None:
        return next((o for o in self.operators if o.name == name), None)

    def ran(self, name: str) -> bool:
        """Whether the operator ran in the profiled steps, listed or below the cut."""
        return self.operator(name) is not None or name in self.rest

    @classmethod
    def merged(cls, profiles: Sequence[Profile]) -> Profile | None:
        """One profile of several samples' (fresh processes): each operator's time in the
        fastest, and a spread that takes in how much that varied from one process to the next."""
        if len(profiles) <= 1:
            return profiles[0] if profiles else None
        rows: dict[str, list[OperatorTime]] = {}
        for profile in profiles:
            for row in profile.operators:
                rows.setdefault(row.name, []).append(row)
        merged = []
        for name, seen in rows.items():
            times = [r.seconds for r in seen]
            between = statistics.median(times) - min(times)
            merged.append(
                OperatorTime(
                    name=name,
                    calls=statistics.median(r.calls for r in seen),
                    seconds=min(times),
                    spread=max(between, statistics.median(r.spread for r in seen)),
                    allocated_bytes=int(statistics.median(r.allocated_bytes for r in seen)),
                    module=next((r.module for r in seen if r.module), None),
                )
            )
        merged.sort(key=lambda o: o.seconds, reverse=True)
        listed = {o.name for o in merged}
        return cls(
            clock=profiles[0].clock,
            steps=sum(p.steps for p in profiles),
            step_s=min(p.step_s for p in profiles),
            operators=tuple(merged),
            other_s=statistics.median(p.other_s for p in profiles),
            rest=tuple(sorted({n for p in profiles for n in p.rest} - listed)),
        )


@dataclass(frozen=True)
class OperatorChange:
    """An operator whose time per step (or allocation) changed beyond the profiles' noise."""

    name: str
    #: its time per step before and after; ``None``: it did not run on that side
    before_s: NonNegative | None
    after_s: NonNegative | None
    #: its share of the step's change, both beyond the operators' common change (``None`` where
    #: the step did not change)
    share: float | None = None
    #: it did not run at all on the baseline's side, or on the current one
    new: bool = False
    gone: bool = False
    module: str | None = None
    #: memory attribution: the bytes it allocated per step before and after
    before_bytes: Bytes | None = None
    after_bytes: Bytes | None = None

    @property
    def change_s(self) -> float:
        return (self.after_s or 0.0) - (self.before_s or 0.0)

    def text(self) -> str:
        """``aten::addmm +3.10 ms a step (1.20 ms -> 4.30 ms, 72% of the change), in module fc``."""
        where = f", in module {self.module}" if self.module else ""
        if self.before_bytes is not None or self.after_bytes is not None:
            before, after = self.before_bytes or 0, self.after_bytes or 0
            return (
                f"{self.name} allocates {units.nbytes(after - before)} more a step "
                f"({units.nbytes(before)} -> {units.nbytes(after)}){where}"
            )
        share = f", {self.share:.0%} of the change" if self.share is not None else ""
        if self.before_s is None:
            was = "new" if self.new else "below the baseline's top operators before"
            return f"{self.name} {units.seconds(self.after_s)} a step ({was}{share}){where}"
        if self.after_s is None:
            now = "gone" if self.gone else "below the top operators now"
            return f"{self.name} {units.seconds(self.before_s)} a step ({now}{share}){where}"
        sign = "+" if self.change_s >= 0 else "-"
        return (
            f"{self.name} {sign}{units.seconds(abs(self.change_s))} a step "
            f"({units.seconds(self.before_s)} -> {units.seconds(self.after_s)}{share}){where}"
        )


@dataclass(frozen=True)
class PeakParts:
    """What a step's peak memory holds: the weights, their gradients, the optimizer's state, and
    the rest (activations, workspaces, the batch)."""

    #: the weights (and buffers) of the model
    parameters_bytes: Bytes
    #: their gradients
    gradients_bytes: Bytes
    #: the optimizer's state (momentum, Adam's moments)
    optimizer_bytes: Bytes
    #: the peak less the three above
    rest_bytes: Bytes

    def text(self, before: PeakParts | None = None) -> str:
        """``parameters 44.7 MiB, gradients 44.7 MiB (+44.7 MiB), ...``: each part, and its
        change from ``before`` where it changed."""
        names = ("parameters", "gradients", "optimizer state", "the rest")
        was = (before or self).values()
        parts = []
        for name, now, then in zip(names, self.values(), was, strict=True):
            grew = now - then
            sign = "+" if grew > 0 else "-"
            change = f" ({sign}{units.nbytes(abs(grew))})" if grew else ""
            parts.append(f"{name} {units.nbytes(now)}{change}")
        return ", ".join(parts)

    def values(self) -> tuple[int, int, int, int]:
        return (self.parameters_bytes, self.gradients_bytes, self.optimizer_bytes, self.rest_bytes)


@dataclass(frozen=True)
class Attribution:
    """Which operators account for a benchmark's change, from its baseline's profile and its
    own."""

    #: the profiled step's change beyond the operators' common change (the machine's), seconds
    #: per step (positive: slower)
    step_change_s: float
    #: the changes that stand out of the noise, largest first
    changes: tuple[OperatorChange, ...]
    #: the share of the step's change the listed operators explain (``None`` where the step
    #: did not change beyond a fiftieth)
    explained: float | None
    #: how much the operators' times changed alike (the median of their ratios), allowed for
    alike: float
    #: the operators whose allocations grew, largest first (a memory regression's cause)
    allocations: tuple[OperatorChange, ...] = ()
    #: where the trace of the current profile was written (``--cnnperf-trace``)
    trace: str | None = None
    #: on a memory change, what the baseline's peak holds (``None`` where it has no breakdown)
    peak_before: PeakParts | None = None
    #: and what the current peak holds
    peak_after: PeakParts | None = None

    @property
    def found(self) -> bool:
        return bool(self.changes)

    def lines(self, limit: int = 5) -> list[str]:
        """The rows a reader gets: the top ``limit`` changes, or why there are none."""
        memory = bool(self.allocations) or self.peak_after is not None
        if not self.changes and memory and self.explained is None:
            lines = ["no operator's time changed beyond its noise"]
        elif not self.changes:
            lines = [
                "no operator-level cause found: no operator changed beyond its noise; the "
                f"operators changed alike by {self.alike - 1:+.0%} (the machine or its clock), "
                "or the time went to work outside them"
            ]
        else:
            lines = [c.text() for c in self.changes[:limit]]
            said = []
            if self.explained is not None:
                said.append(f"these explain {self.explained:.0%} of the step's change")
            more = len(self.changes) - limit
            if more > 0:
                said.append(f"{more} more in the JSON results (--cnnperf-json)")
            lines += ["; ".join(said)] if said else []
        lines += [c.text() for c in self.allocations[:limit]]
        if self.peak_after is not None:
            lines.append(f"the peak holds {self.peak_after.text(self.peak_before)}")
        return lines
