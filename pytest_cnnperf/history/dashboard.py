"""``cnnperf dashboard OUT_DIR``: a static site of the history, to open from disk.

``index.html`` has a summary table (one row per benchmark and machine, with a small chart of its
throughput) linking to one page per series: throughput and peak memory over the runs, with change
points and environment changes marked and the creep window shaded, then the findings and runs as
tables. Charts are drawn by matplotlib as SVG and put inline: no script, no stylesheet or font to
fetch, so the site works offline and the same history gives the same files. matplotlib is the
``plot`` extra, imported only when drawing (``reports.plot.figure_class``); pyplot is never used.
"""

from __future__ import annotations

import html
import io
import itertools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import units
from ..model.because import plural
from ..reports import plot
from . import changepoints, trend
from .series import Analysis
from .views import change_point_line, creep_line, environment_line, memory_change_line, when

THROUGHPUT = "#3b75af"
MEMORY = "#6a8f3a"
STEP = "#c8312b"
ENVIRONMENT = "#7a7a7a"
CREEP = "#e08a1e"

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px;
       color: #1d1d1f; max-width: 1180px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: #666; margin-bottom: 18px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e3e3e3; text-align: left;
         vertical-align: middle; }
th { font-weight: 600; background: #f6f6f6; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nw { white-space: nowrap; }
.bad { color: #b3261e; font-weight: 600; } .good { color: #2e7d32; }
.chart svg { max-width: 100%; height: auto; }
.spark svg { width: 180px; height: 42px; display: block; }
code { font-size: 12.5px; }
a { color: #1a5fb4; }
"""


class DashboardError(Exception):
    """The dashboard cannot be made; the message says why and what to do."""


def _figure_class() -> Any:
    return plot.figure_class("the dashboard is drawn with", DashboardError)


def _svg(fig: Any) -> str:
    """A figure as SVG to put inline: no XML prolog, reproducible ids, no date."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "cnnperf"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def page_name(index: int, analysis: Analysis) -> str:
    """``003-test_models.py-test_resnet18.html``: numbered, readable, safe on any file system."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", analysis.series.test_id.split("/")[-1]).strip("-")
    return f"{index + 1:03d}-{slug[:60]}.html"


def _segments(analysis: Analysis) -> list[tuple[int, int, float]]:
    """``(start, end, level)`` of the runs between change points (0-based, end excluded)."""
    import statistics

    values = analysis.series.throughputs
    bounds = [0, *(c.index for c in analysis.change_points), len(values)]
    return [(a, b, statistics.median(values[a:b])) for a, b in itertools.pairwise(bounds)]


def chart(analysis: Analysis) -> str:
    """Throughput (each run: its fastest sample, and its samples' quartiles) and peak memory
    over the runs, change points and environment changes marked, the creep window shaded."""
    from ..model import Spread

    figure_class = _figure_class()
    series = analysis.series
    points = series.points
    n = len(points)
    runs = list(range(1, n + 1))
    has_memory = any(p.peak_bytes is not None for p in points)
    fig = figure_class(figsize=(11, 5.6 if has_memory else 3.9), dpi=96, layout="constrained")
    grid = fig.add_gridspec(
        2 if has_memory else 1, 1, height_ratios=(2.3, 1) if has_memory else None
    )
    ax = fig.add_subplot(grid[0])
    spreads = [
        Spread.of([p.measurement.items_per_step / t for t in p.measurement.step_times])
        for p in points
    ]
    ax.vlines(
        runs,
        [s.q1 for s in spreads],
        [s.q3 for s in spreads],
        color=THROUGHPUT,
        alpha=0.35,
        linewidth=4,
        label="samples: quartiles",
    )
    ax.plot(
        runs,
        series.throughputs,
        color=THROUGHPUT,
        marker="o",
        markersize=3.5,
        linewidth=1.2,
        label="run: fastest sample",
    )
    for start, end, level in _segments(analysis) if analysis.change_points else []:
        ax.hlines(
            level, start + 0.6, end + 0.4, color=STEP, linewidth=1.2, linestyles="dashed", alpha=0.8
        )
    for k, point in enumerate(analysis.change_points):
        x = point.index + 0.5
        ax.axvline(x, color=STEP, linewidth=1.4, label="change point" if k == 0 else None)
        ax.annotate(
            f"{units.change(point.change)}\np={point.p_value:.2g}",
            (x, 1),
            xycoords=("data", "axes fraction"),
            xytext=(3, -3),
            textcoords="offset points",
            va="top",
            fontsize=8,
            color=STEP,
        )
    _environment_marks(ax, analysis)
    creep = analysis.creep
    if creep:
        first = n - creep.runs + 1
        ax.axvspan(
            first - 0.5,
            n + 0.5,
            color=CREEP if creep.creeping else "#999999",
            alpha=0.09 if creep.creeping else 0.05,
            linewidth=0,
            label=f"last {creep.runs} runs" + (": creeping" if creep.creeping else ""),
        )
        if creep.creeping:
            ax.plot(
                [first, n],
                [creep.start, creep.start * (1 + creep.slope) ** (creep.runs - 1)],
                color=CREEP,
                linewidth=1.6,
                linestyle="dashed",
                label=f"trend {units.change(creep.slope)}/run",
            )
        ax.plot(
            [creep.best_index + 1],
            [creep.best],
            marker="*",
            markersize=11,
            color=CREEP,
            linestyle="none",
            label=f"best of the last {creep.runs}",
        )
    ax.set_ylabel(f"{series.unit}/s")
    ax.set_title(f"throughput of {series.key} on {series.machine}", fontsize=10, loc="left")
    ax.grid(axis="y", color="#e6e6e6")
    ax.set_axisbelow(True)
    ax.legend(fontsize=7.5, loc="lower left", frameon=False, ncols=3)
    bottom = ax
    if has_memory:
        mem = fig.add_subplot(grid[1], sharex=ax)
        peaks = [p.peak_bytes for p in points]
        scale, unit = units.byte_unit(max(b or 0 for b in peaks), least="MiB")
        mem.plot(
            [r for r, b in zip(runs, peaks, strict=True) if b is not None],
            [b / scale for b in peaks if b is not None],
            color=MEMORY,
            marker="s",
            markersize=3,
            linewidth=1.1,
            drawstyle="steps-mid",
        )
        for change in analysis.memory_changes:
            mem.axvline(change.index + 0.5, color=STEP, linewidth=1.2)
        _environment_marks(mem, analysis, labels=False)
        mem.set_ylabel(f"peak memory ({unit})")
        mem.grid(axis="y", color="#e6e6e6")
        mem.set_axisbelow(True)
        mem.margins(y=0.25)
        ax.tick_params(axis="x", labelbottom=False)
        bottom = mem
    every = max(1, -(-n // 24))
    ticks = runs[::every]
    bottom.set_xticks(
        ticks,
        [f"{r} {points[r - 1].run.short_commit()}" for r in ticks],
        rotation=60,
        ha="right",
        fontsize=7.5,
    )
    bottom.set_xlabel("run and commit")
    bottom.set_xlim(0.3, n + 0.7)
    return _svg(fig)


def _environment_marks(ax: Any, analysis: Analysis, labels: bool = True) -> None:
    for k, change in enumerate(analysis.environment_changes):
        x = change.index + 0.5
        ax.axvline(
            x,
            color=ENVIRONMENT,
            linestyle=":",
            linewidth=1.4,
            label="environment changed" if labels and k == 0 else None,
        )
        if labels:
            ax.annotate(
                "; ".join(change.changes),
                (x, 0),
                xycoords=("data", "axes fraction"),
                xytext=(-3, 4),
                textcoords="offset points",
                rotation=90,
                ha="right",
                va="bottom",
                fontsize=7.5,
                color=ENVIRONMENT,
            )


def sparkline(analysis: Analysis) -> str:
    """A small chart of the throughput for the summary table."""
    figure_class = _figure_class()
    fig = figure_class(figsize=(2.5, 0.58), dpi=72)
    ax = fig.add_axes((0.01, 0.08, 0.98, 0.84))
    values = analysis.series.throughputs
    ax.plot(range(len(values)), values, color=THROUGHPUT, linewidth=1.1)
    for point in analysis.change_points:
        ax.axvline(point.index - 0.5, color=STEP, linewidth=1)
    for change in analysis.environment_changes:
        ax.axvline(change.index - 0.5, color=ENVIRONMENT, linestyle=":", linewidth=1)
    ax.set_axis_off()
    ax.margins(x=0.02, y=0.15)
    return _svg(fig)


def _document(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
            *body,
            "</body></html>",
            "",
        ]
    )


def _creep_cells(analysis: Analysis) -> str:
    """The "from best" and "trend" cells of a series' row."""
    creep = analysis.creep
    if creep is None:
        return '<td class="n">-</td><td class="n">-</td>'
    trend = f"{units.change(creep.slope)}/run"
    if creep.creeping:
        trend = f'<span class="bad">{_e(trend)} creeping</span>'
    return f'<td class="n">{_e(units.change(-creep.loss))}</td><td class="n">{trend}</td>'


def index_page(analyses: Sequence[Analysis], target: str, runs: int, generated: str) -> str:
    rows = []
    for i, analysis in enumerate(analyses):
        series = analysis.series
        last = series.points[-1]
        points = analysis.change_points
        latest_step = (
            f"{_e(units.change(points[-1].change))} at run {points[-1].index + 1}"
            if points
            else "none"
        )
        rows.append(
            "<tr>"
            f'<td><a href="{_e(page_name(i, analysis))}">{_e(series.test_id)}</a><br>'
            f"<code>{_e(series.key)}</code></td>"
            f'<td class="nw">{_e(series.machine)}</td>'
            f'<td class="n">{len(series.points)}</td>'
            f'<td class="spark">{sparkline(analysis)}</td>'
            f'<td class="n">{_e(units.rate(last.throughput, series.unit))}</td>'
            f"{_creep_cells(analysis)}"
            f'<td class="n">{latest_step}</td>'
            f'<td class="n">{_e(units.nbytes(last.peak_bytes))}</td>'
            f'<td class="nw"><code>{_e(last.run.short_commit())}</code><br>'
            f"{_e(when(last.run.recorded))}</td>"
            "</tr>"
        )
    head = (
        "<tr><th>benchmark</th><th>machine</th><th>runs</th><th>throughput</th><th>latest</th>"
        "<th>from best</th><th>trend</th><th>last change point</th><th>peak mem</th>"
        "<th>last run</th></tr>"
    )
    body = [
        "<h1>cnnperf history</h1>",
        f'<div class="sub">{_e(target)}: {plural(runs, "run")}, '
        f"{len(analyses)} series; generated {_e(generated)}</div>",
        f"<table>{head}{''.join(rows)}</table>",
        "<p><b>from best</b>: the latest runs' median throughput against the best run of the "
        "creep window; <b>trend</b>: Theil-Sen slope per run over that window, <b>creeping</b> "
        f"when it is significant (Kendall p &lt; {trend.ALPHA:g}), adds up to "
        f"{trend.MIN_DRIFT:.0%} or more and a line fits better than one step. Change points: "
        "ruptures (PELT) on log throughput, each kept at permutation p &le; "
        f"{changepoints.ALPHA:g} and a step of {changepoints.MIN_STEP:.0%} or more.</p>",
    ]
    return _document("cnnperf history", body)


def series_page(analysis: Analysis, target: str) -> str:
    series = analysis.series
    findings = [
        f"<li>change point: {_e(change_point_line(analysis, p))}</li>"
        for p in analysis.change_points
    ]
    findings += [f"<li>{_e(environment_line(c))}</li>" for c in analysis.environment_changes]
    findings += [
        f"<li>peak memory at {_e(memory_change_line(analysis, c))}</li>"
        for c in analysis.memory_changes
    ]
    if analysis.creep:
        findings.append(f"<li>creep: {_e(creep_line(analysis, analysis.creep))}</li>")
    if not findings:
        findings.append("<li>no change point, no environment change</li>")
    rows = []
    for i, point in reversed(list(enumerate(series.points))):
        spread = point.measurement.step.relative_iqr / 2
        env = point.environment
        rows.append(
            "<tr>"
            f'<td class="n">{i + 1}</td>'
            f"<td><code>{_e(point.run.short_commit())}</code></td>"
            f"<td>{_e(point.run.branch or '-')}</td>"
            f"<td>{_e(when(point.run.recorded))}</td>"
            f'<td class="n">{_e(units.rate(point.throughput, series.unit))} ±{spread:.0%}</td>'
            f'<td class="n">{_e(units.nbytes(point.peak_bytes))}</td>'
            f"<td>{_e(point.result.verdict)}</td>"
            f"<td>{_e(f'torch {env.torch}' if env else '-')}</td>"
            "</tr>"
        )
    body = [
        '<p><a href="index.html">&larr; all benchmarks</a></p>',
        f"<h1>{_e(series.test_id)}</h1>",
        f'<div class="sub"><code>{_e(series.key)}</code> on {_e(series.machine)}; '
        f"{len(series.points)} runs in {_e(target)}</div>",
        f'<div class="chart">{chart(analysis)}</div>',
        "<h2>Findings</h2>",
        f"<ul>{''.join(findings)}</ul>",
        "<h2>Runs, newest first</h2>",
        "<table><tr><th>run</th><th>commit</th><th>branch</th><th>recorded</th>"
        "<th>throughput</th><th>peak mem</th><th>verdict</th><th>environment</th></tr>"
        f"{''.join(rows)}</table>",
    ]
    return _document(f"cnnperf: {series.test_id}", body)


def write(
    folder: Path, analyses: Sequence[Analysis], target: str, runs: int, generated: str
) -> list[Path]:
    """Write the site into ``folder``; returns the files written, ``index.html`` first."""
    _figure_class()
    if folder.exists() and not folder.is_dir():
        raise DashboardError(f"{folder} is a file; give a folder for the dashboard")
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "index.html"]
    written[0].write_text(index_page(analyses, target, runs, generated), encoding="utf-8")
    for i, analysis in enumerate(analyses):
        path = folder / page_name(i, analysis)
        path.write_text(series_page(analysis, target), encoding="utf-8")
        written.append(path)
    return written
