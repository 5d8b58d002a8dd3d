"""``cnnperf comment``: the Markdown of a pull-request comment.

This run against its baselines (the Markdown summary of its results file) and, where a history
is configured, each benchmark's trend there: the latest runs against the best of the recent ones,
the drift per run, the last change point. The first line is a hidden marker, :data:`MARKER`, so
that a CI step can find the comment it posted before and update it instead of adding another; the
body is kept under GitHub's limit of 65,536 characters.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Result, units
from ..reports import markdown
from .series import Analysis

MARKER = "<!-- cnnperf-comment -->"
#: GitHub refuses longer comments
LIMIT = 65536


def _trend_rows(results: Sequence[Result], analyses: Sequence[Analysis]) -> list[str]:
    by_benchmark = {(a.series.test_id, a.series.key, a.series.machine): a for a in analyses}
    rows = []
    for result in results:
        machine = result.environment.machine if result.environment else None
        analysis = by_benchmark.get((result.test_id, result.key, machine or ""))
        if analysis is None:
            continue
        series, creep = analysis.series, analysis.creep
        # a table cell: the test's name as code, the key as text (both may hold anything)
        name = f"{markdown.code_cell(result.test)} ({markdown.text(result.key)})"
        if creep:
            from_best = f"{units.change(-creep.loss)} (best {units.rate(creep.best, series.unit)})"
            trend = f"{units.change(creep.slope)}/run" + (" ⚠️ creeping" if creep.creeping else "")
        else:
            from_best, trend = "-", "-"
        points = analysis.change_points
        last = (
            f"{units.change(points[-1].change)} at "
            f"{markdown.text(analysis.commit_range(points[-1].index))} "
            f"(p = {points[-1].p_value:.2g})"
            if points
            else "none"
        )
        rows.append(
            f"| {name} | {len(series.points)} | {units.rate(series.throughputs[-1], series.unit)} "
            f"| {from_best} | {trend} | {last} |"
        )
    return rows


def render(
    results: Sequence[Result],
    analyses: Sequence[Analysis] | None = None,
    history: str | None = None,
    window: int = 20,
) -> str:
    """The comment: marker, this run's summary, and the trend where a history was read."""
    parts = [MARKER, markdown.render(results).rstrip()]
    if analyses is not None:
        rows = _trend_rows(results, analyses)
        parts += ["", f"#### Trend in the history ({markdown.text(history or '')})", ""]
        if rows:
            parts += [
                f"| benchmark | runs | latest | from the best of the last {window} | trend "
                "| last change point |",
                "|---|--:|--:|--:|--:|---|",
                *rows,
            ]
        else:
            parts.append("_None of these benchmarks has runs in the history yet._")
    text = "\n".join(parts) + "\n"
    if len(text) > LIMIT:
        cut = "\n\n_(cut to fit GitHub's comment limit; the full summary is in the job's log)_\n"
        text = text[: LIMIT - len(cut)].rsplit("\n", 1)[0] + cut
    return text
