"""``cnnperf history``: each series as text, with its change points, creep and runs."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import units
from ..model.because import plural
from ..reports import text
from . import changepoints, trend
from .changepoints import ChangePoint
from .series import Analysis, EnvironmentChange, MemoryChange, Series
from .trend import CreepView


def when(recorded: str) -> str:
    """``2026-11-30T21:02:05Z`` -> ``2026-11-30 21:02``."""
    return recorded.replace("T", " ")[:16]


def change_point_line(analysis: Analysis, point: ChangePoint) -> str:
    unit = analysis.series.unit
    return (
        f"run {point.index + 1} ({analysis.commit_range(point.index)}): throughput "
        f"{units.change(point.change)} ({units.rate(point.before, unit)} -> "
        f"{units.rate(point.after, unit)}), p = {point.p_value:.2g}"
    )


def creep_line(analysis: Analysis, creep: CreepView) -> str:
    series = analysis.series
    unit = series.unit
    best = series.points[creep.best_index]
    latest = "the latest run" if creep.latest_runs == 1 else f"the latest {creep.latest_runs} runs"
    verdict = (
        "creeping"
        if creep.creeping
        else "a step rather than a creep (see the change points)"
        if creep.p_value < trend.ALPHA and not creep.steady
        else "no steady trend"
    )
    return (
        f"{latest} {units.rate(creep.latest, unit)}, {units.change(-creep.loss)} against the "
        f"best of the last {creep.runs} ({units.rate(creep.best, unit)}, run "
        f"{creep.best_index + 1}, {best.run.short_commit()}); "
        f"trend {units.change(creep.slope)}/run (95% CI "
        f"{units.change(creep.slope_low)} to {units.change(creep.slope_high)}), "
        f"Kendall p = {creep.p_value:.2g}: {verdict}"
    )


def memory_change_line(analysis: Analysis, c: MemoryChange) -> str:
    return (
        f"run {c.index + 1} ({analysis.commit_range(c.index)}): {units.change(c.change)} "
        f"({units.nbytes(c.before)} -> {units.nbytes(c.after)})"
    )


def environment_line(change: EnvironmentChange) -> str:
    return f"environment changed at run {change.index + 1}: {'; '.join(change.changes)}"


def _memory_line(analysis: Analysis) -> str:
    changes = analysis.memory_changes
    if not changes:
        peaks = [p.peak_bytes for p in analysis.series.points if p.peak_bytes is not None]
        return f"unchanged at {units.nbytes(peaks[-1])}" if peaks else "not measured"
    return "; ".join(memory_change_line(analysis, c) for c in changes)


def runs_table(analysis: Analysis, rows: int) -> list[str]:
    """The last ``rows`` runs (all with 0): number, commit, branch, time, figures, marks."""
    series = analysis.series
    marks: dict[int, list[str]] = {}
    for step in analysis.change_points:
        marks.setdefault(step.index, []).append(f"step {units.change(step.change)}")
    for change in analysis.environment_changes:
        marks.setdefault(change.index, []).append("; ".join(change.changes))
    for memory in analysis.memory_changes:
        marks.setdefault(memory.index, []).append(f"memory {units.change(memory.change)}")
    body = []
    start = max(0, len(series.points) - rows) if rows else 0
    for i, point in enumerate(series.points[start:], start=start):
        spread = point.measurement.step.relative_iqr / 2
        body.append(
            [
                str(i + 1),
                point.run.short_commit(),
                point.run.branch or "-",
                when(point.run.recorded),
                f"{units.rate(point.throughput, series.unit)} ±{spread:.0%}",
                units.nbytes(point.peak_bytes),
                ", ".join(marks.get(i, [])),
            ]
        )
    header = ["run", "commit", "branch", "recorded", "throughput", "peak mem", ""]
    lines = text.columns(header, body, right=[0, 4, 5])
    return [line.rstrip() for line in lines]


def lines(target: str, analyses: Sequence[Analysis], runs: int, rows: int) -> list[str]:
    """The whole view: a head line, then each series."""
    out = [f"history {target}: {plural(runs, 'run')}, {len(analyses)} series", ""]
    for analysis in analyses:
        out += series_lines(analysis, rows)
        out.append("")
    out.append(
        "change points: ruptures (PELT) on log throughput, each kept at permutation p <= "
        f"{changepoints.ALPHA:g} and a step of {changepoints.MIN_STEP:.0%} or more; commits a..b: "
        "the runs before and after it"
    )
    return out


def series_lines(analysis: Analysis, rows: int) -> list[str]:
    series: Series = analysis.series
    count = len(series.points)
    out = [f"{series.name} on {series.machine}: {plural(count, 'run')}"]
    points = analysis.change_points
    if points:
        out.append("  change points:")
        out += [f"    {change_point_line(analysis, p)}" for p in points]
    else:
        out.append("  change points: none")
    creep = analysis.creep
    out.append(
        f"  creep: {creep_line(analysis, creep)}"
        if creep
        else f"  creep: too few runs to tell ({trend.MIN_RUNS} or more are needed)"
    )
    out.append(f"  memory: {_memory_line(analysis)}")
    out += [f"  {environment_line(change)}" for change in analysis.environment_changes]
    out += ["", *["  " + line for line in runs_table(analysis, rows)]]
    return out
