"""A history's results as series: one per benchmark (test and configuration) and machine, in
the order the runs were recorded, with their change points, environment changes and creep.

Only results that measured something are points; a benchmark that failed to run in a run leaves
a gap. The series are plain data; ``analyse`` (numpy, scipy and ruptures) adds the findings.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..model import Environment, Measurement, Result
from .changepoints import ChangePoint
from .runs import Entry, RunInfo
from .trend import CreepView

#: analyse at most this many of a series' latest runs (the change-point search is quadratic)
LAST_RUNS = 200


@dataclass(frozen=True)
class Point:
    """One run of a series."""

    run_id: int
    run: RunInfo
    result: Result

    @property
    def measurement(self) -> Measurement:
        assert self.result.measurement is not None
        return self.result.measurement

    @property
    def throughput(self) -> float:
        """The run's figure: the throughput of its fastest sample. On a shared machine a
        disturbance only ever slows a sample down, so the fastest of a run's fresh processes
        varies least from run to run."""
        m = self.measurement
        return m.items_per_step / min(s.step_time_s for s in m.samples)

    @property
    def peak_bytes(self) -> int | None:
        return self.measurement.peak_allocated_bytes

    @property
    def environment(self) -> Environment | None:
        return self.result.environment


@dataclass(frozen=True)
class Series:
    """One benchmark on one machine, run after run."""

    test_id: str
    key: str
    machine: str
    points: tuple[Point, ...]

    @property
    def name(self) -> str:
        return f"{self.test_id} [{self.key}]"

    @property
    def unit(self) -> str:
        return self.points[-1].result.config.unit

    @property
    def throughputs(self) -> tuple[float, ...]:
        return tuple(p.throughput for p in self.points)


def matches(pattern: str | None, test_id: str, key: str) -> bool:
    """Whether a benchmark is one ``pattern`` asks for: a glob (``*resnet*``) or a part of its
    test id or configuration key; no pattern asks for all."""
    if not pattern:
        return True
    names = (test_id, key, f"{test_id} [{key}]")
    return any(fnmatch.fnmatchcase(n, pattern) or pattern in n for n in names)


def build(
    entries: Iterable[Entry], pattern: str | None = None, machine: str | None = None
) -> list[Series]:
    """The series of ``entries`` (oldest run first) that ``pattern`` and ``machine`` select,
    each cut to its :data:`LAST_RUNS` runs, in the order their benchmarks first appear."""
    grouped: dict[tuple[str, str, str], list[Point]] = {}
    for entry in entries:
        result = entry.result
        if result.measurement is None or not result.measurement.samples:
            continue
        where = result.environment.machine if result.environment else entry.run.machine
        if not where or (machine and where != machine):
            continue
        if not matches(pattern, result.test_id, result.key):
            continue
        point = Point(entry.run_id, entry.run, result)
        grouped.setdefault((result.test_id, result.key, where), []).append(point)
    return [
        Series(test_id, key, where, tuple(points[-LAST_RUNS:]))
        for (test_id, key, where), points in grouped.items()
    ]


@dataclass(frozen=True)
class EnvironmentChange:
    """The software or device changed between two runs of a series."""

    #: the first run in the new environment (0-based)
    index: int
    changes: tuple[str, ...]


@dataclass(frozen=True)
class MemoryChange:
    """Peak memory changed between two runs by more than its noise."""

    index: int
    before: int
    after: int

    @property
    def change(self) -> float:
        return self.after / self.before - 1 if self.before else 0.0


@dataclass(frozen=True)
class Analysis:
    """A series with what the history found in it."""

    series: Series
    change_points: tuple[ChangePoint, ...]
    environment_changes: tuple[EnvironmentChange, ...]
    memory_changes: tuple[MemoryChange, ...]
    creep: CreepView | None

    def commit_range(self, index: int) -> str:
        """The commits between the run before ``index`` and the run at it: ``a1b2c3d..e4f5a6b``,
        what ``git log`` takes to list the suspects."""
        points = self.series.points
        before, after = points[index - 1].run.short_commit(), points[index].run.short_commit()
        return after if before == after else f"{before}..{after}"


def environment_changes(points: Sequence[Point]) -> list[EnvironmentChange]:
    found = []
    for i in range(1, len(points)):
        old, new = points[i - 1].environment, points[i].environment
        if old and new:
            changes = new.changes_from(old)
            if changes:
                found.append(EnvironmentChange(i, changes))
    return found


#: peak memory changes smaller than this (and than 1 MiB) are allocator noise
MEMORY_NOISE = 0.01


def memory_changes(points: Sequence[Point]) -> list[MemoryChange]:
    """Where the peak memory moved from one run to the next by more than 1% and 1 MiB."""
    found = []
    previous: int | None = None
    for i, point in enumerate(points):
        peak = point.peak_bytes
        if peak is None:
            continue
        if previous is not None and abs(peak - previous) > max(MEMORY_NOISE * previous, 1 << 20):
            found.append(MemoryChange(i, previous, peak))
        previous = peak
    return found


def analyse(series: Series, window: int = 20) -> Analysis:
    """Change points of the throughput, environment and memory changes, the creep view over
    the last ``window`` runs."""
    from . import changepoints, trend

    values = series.throughputs
    return Analysis(
        series=series,
        change_points=tuple(changepoints.find(values)),
        environment_changes=tuple(environment_changes(series.points)),
        memory_changes=tuple(memory_changes(series.points)),
        creep=trend.view(values, window=window),
    )
