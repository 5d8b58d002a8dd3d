"""``--cnnperf-plot`` and ``cnnperf plot``: throughput and memory against the baselines, and the
speedup of each mode where a run covers several, as a PNG or SVG.

matplotlib is an optional extra (``pip install 'pytest-cnnperf[plot]'``), imported only here (for
the dashboard's charts too) and only when something is drawn; pyplot is never used, so no global
backend or figure state changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Result, Spread, Verdict, units
from . import modes, table

FORMATS = (".png", ".svg")
INSTALL = "pip install 'pytest-cnnperf[plot]'"

COLOURS = {
    Verdict.OK: "#3b75af",
    Verdict.SAVED: "#3b75af",
    Verdict.NEW: "#8c6bb1",
    Verdict.IMPROVED: "#2e8b57",
    Verdict.REGRESSED: "#c8312b",
    Verdict.INCONCLUSIVE: "#e08a1e",
    Verdict.ERROR: "#777777",
}
BASELINE_COLOUR = "#a0a0a0"


class PlotError(Exception):
    """The plot cannot be drawn; the message says why and what to do."""


@dataclass(frozen=True)
class Bench:
    """One benchmark as the plot draws it."""

    label: str
    unit: str
    verdict: Verdict | None
    #: the median sample's throughput, as the tables show it
    rate: float
    #: throughput of each sample, now and in the baseline (empty: unknown)
    rates: tuple[float, ...]
    baseline_rates: tuple[float, ...] = ()
    #: the baseline's median throughput where its samples are not at hand
    baseline_rate: float | None = None
    memory: int | None = None
    baseline_memory: int | None = None
    #: the gate's throughput change (positive = faster), shown next to the figures
    change: float | None = None
    #: achieved FLOP/s and its share of the device's peak, where they were measured
    flops_per_s: float | None = None
    utilisation: float | None = None


@dataclass(frozen=True)
class Picture:
    benches: tuple[Bench, ...]
    modes: modes.ModeTable | None
    title: str
    subtitle: str


def check_path(path: Path) -> None:
    if path.suffix.lower() not in FORMATS:
        raise PlotError(
            f"a plot is drawn as PNG or SVG: the file name must end in .png or .svg, not "
            f"{path.suffix or 'without a suffix'} (e.g. cnnperf.png)"
        )


def bench(result: Result, baseline: Result | None) -> Bench:
    """A benchmark's figures with its baseline's: per-sample figures when the baseline is at
    hand, else the median the gate compared with."""
    m, d = result.measured, result.decision
    before = baseline.measured if baseline else None
    return Bench(
        label=f"{result.test}\n{table.short_key(result.config)}",
        unit=result.unit,
        verdict=result.verdict,
        rate=m.items_per_second,
        rates=m.rates,
        baseline_rates=before.rates if before else (),
        baseline_rate=before.items_per_second if before else table.baseline_rate(result),
        memory=m.peak_allocated_bytes,
        baseline_memory=(
            before.peak_allocated_bytes
            if before
            else int(d.memory.baseline)
            if d and d.memory
            else None
        ),
        change=-d.throughput.change if d and d.throughput else None,
        flops_per_s=m.achieved_flops_per_s,
        utilisation=m.utilisation,
    )


def picture(
    results: Sequence[Result],
    baselines: Mapping[tuple[str, str], Result],
    title: str = "cnnperf",
    reference: str | None = None,
) -> Picture:
    """What to draw for a run's results; ``baselines`` maps ``(test_id, key)`` to the baseline
    each was compared with, where it could be read."""
    measured = [r for r in results if r.measurement is not None]
    benches = [bench(r, baselines.get((r.test_id, r.key))) for r in measured]
    envs = table.environments(results)
    subtitle = "; ".join(env.describe() for env in envs)
    return Picture(tuple(benches), modes.build(measured, reference), title, subtitle)


def figure_class(needs: str = "drawing a plot needs", error: type[Exception] = PlotError) -> Any:
    """matplotlib's Figure, imported when a drawing needs it (the plot's, the dashboard's);
    without matplotlib, ``error`` says what needed it and how to install it."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise error(
            f"{needs} matplotlib, which is not installed; install it with {INSTALL}"
        ) from None
    return Figure


def _draw_spread(ax: Any, y: float, values: Sequence[float], colour: str, height: float) -> None:
    s = Spread.of(values)
    ax.hlines(y, s.low, s.high, color=colour, linewidth=1.2, zorder=2)
    ax.barh(y, s.q3 - s.q1, left=s.q1, height=height, color=colour, alpha=0.45, zorder=3)
    ax.vlines(s.median, y - height / 2, y + height / 2, color=colour, linewidth=2.2, zorder=4)


def _throughput(ax: Any, benches: Sequence[Bench]) -> None:
    everything = [v for b in benches for v in (*b.rates, *b.baseline_rates)]
    everything += [b.baseline_rate for b in benches if b.baseline_rate]
    if everything and max(everything) / min(everything) > 8:
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    for i, b in enumerate(benches):
        y = -i
        colour = COLOURS.get(b.verdict or Verdict.OK, COLOURS[Verdict.OK])
        if b.baseline_rates:
            _draw_spread(ax, y + 0.2, b.baseline_rates, BASELINE_COLOUR, 0.28)
        elif b.baseline_rate:
            ax.plot([b.baseline_rate], [y + 0.2], "D", color=BASELINE_COLOUR, markersize=5)
        _draw_spread(ax, y - 0.2, b.rates, colour, 0.28)
        note = str(b.verdict) if b.verdict else ""
        if b.change is not None:
            note = f"{units.change(b.change)} {note}"
        ax.annotate(
            f" {units.rate(b.rate, b.unit)}  {note}".rstrip(),
            (max(b.rates), y - 0.2),
            va="center",
            fontsize=7.5,
            color=colour,
        )
    units_used = sorted({b.unit for b in benches})
    ax.set_xlabel(
        f"throughput ({', '.join(u + '/s' for u in units_used)}); box: quartiles, "
        "line: range of samples"
    )
    ax.grid(axis="x", color="#e4e4e4", zorder=0)
    ax.margins(x=0.25)


def _memory(ax: Any, benches: Sequence[Bench]) -> None:
    values = [v for b in benches for v in (b.memory, b.baseline_memory) if v is not None]
    size, unit = units.byte_unit(max(values, default=0))
    for i, b in enumerate(benches):
        y = -i
        colour = COLOURS.get(b.verdict or Verdict.OK, COLOURS[Verdict.OK])
        if b.baseline_memory is not None:
            ax.barh(y + 0.2, b.baseline_memory / size, height=0.34, color=BASELINE_COLOUR)
        if b.memory is not None:
            ax.barh(y - 0.2, b.memory / size, height=0.34, color=colour, alpha=0.8)
            ax.annotate(
                f" {units.nbytes(b.memory)}",
                (b.memory / size, y - 0.2),
                va="center",
                fontsize=7.5,
                color=colour,
            )
    ax.set_xlabel(f"peak memory ({unit})")
    ax.grid(axis="x", color="#e4e4e4", zorder=0)
    ax.set_axisbelow(True)
    ax.margins(x=0.45)


def _utilisation(ax: Any, benches: Sequence[Bench]) -> None:
    """Each benchmark's achieved FLOP/s as a share of the device's peak (MFU)."""
    top = max(((b.utilisation or 0.0) * 100 for b in benches), default=0.0)
    for i, b in enumerate(benches):
        if b.flops_per_s is None:
            continue
        y = -i - 0.2  # beside this run's throughput
        colour = COLOURS.get(b.verdict or Verdict.OK, COLOURS[Verdict.OK])
        share = (b.utilisation or 0.0) * 100
        if b.utilisation is not None:
            ax.barh(y, share, height=0.34, color=colour, alpha=0.8)
        label = f" {share:.1f}%" if b.utilisation is not None else " peak unknown,"
        ax.annotate(
            f"{label} {units.flops(b.flops_per_s)}",
            (share, y),
            va="center",
            fontsize=7.5,
            color=colour,
        )
    ax.set_xlabel("MFU (% of the peak)")
    # room on the right for the figures written after the bars
    ax.set_xlim(0, max(top, 1.0) * 2.4)
    ax.grid(axis="x", color="#e4e4e4", zorder=0)
    ax.set_axisbelow(True)


def _modes(ax: Any, table_: modes.ModeTable) -> None:
    others = [m for m in table_.modes if m != table_.reference]
    width = 0.8 / max(len(others), 1)
    palette = ["#3b75af", "#e08a1e", "#2e8b57", "#8c6bb1", "#c8312b", "#4fb0c6"]
    for j, mode in enumerate(others):
        ys, speedups = [], []
        for i, row in enumerate(table_.rows):
            cell = row.cells.get(mode)
            if cell is not None and cell.speedup is not None:
                ys.append(-i + 0.4 - width * (j + 0.5))
                speedups.append(cell.speedup)
        colour = palette[j % len(palette)]
        ax.barh(ys, speedups, height=width * 0.9, color=colour, label=table_.label(mode))
        for y, s in zip(ys, speedups, strict=True):
            ax.annotate(f" {s:.2f}x", (s, y), va="center", fontsize=7, color=colour)
    ax.axvline(1.0, color="#333333", linewidth=1)
    ax.set_yticks([-i for i in range(len(table_.rows))], [r.label for r in table_.rows])
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel(f"speedup against {table_.label(table_.reference)} (step time ratio)")
    ax.legend(fontsize=7.5, loc="lower right", frameon=False)
    ax.grid(axis="x", color="#e4e4e4", zorder=0)
    ax.set_axisbelow(True)
    ax.margins(x=0.15)


def draw(pic: Picture, path: Path) -> None:
    """Render ``pic`` to ``path`` (``.png`` or ``.svg``)."""
    check_path(path)
    if not pic.benches:
        raise PlotError("no benchmark has a measurement to draw")
    figure = figure_class()
    n = len(pic.benches)
    top_h = 0.55 * n + 1.0
    mode_h = 0.32 * len(pic.modes.rows) * max(len(pic.modes.modes) - 1, 1) + 1.0 if pic.modes else 0
    # a third chart, the utilisation of each benchmark, where FLOPs were counted
    mfu = any(b.flops_per_s is not None for b in pic.benches)
    widths = (2.6, 1, 1) if mfu else (2.6, 1)
    fig = figure(figsize=(14 if mfu else 11, top_h + mode_h + 0.6), dpi=90, layout="constrained")
    if pic.modes:
        grid = fig.add_gridspec(2, len(widths), width_ratios=widths, height_ratios=(top_h, mode_h))
    else:
        grid = fig.add_gridspec(1, len(widths), width_ratios=widths)
    ax_t = fig.add_subplot(grid[0, 0])
    ax_m = fig.add_subplot(grid[0, 1], sharey=ax_t)
    _throughput(ax_t, pic.benches)
    _memory(ax_m, pic.benches)
    if mfu:
        ax_u = fig.add_subplot(grid[0, 2], sharey=ax_t)
        _utilisation(ax_u, pic.benches)
        ax_u.tick_params(axis="y", labelleft=False)
        ax_u.set_title("utilisation of the peak (MFU)", fontsize=9, loc="left")
    ax_t.set_yticks([-i for i in range(n)], [b.label for b in pic.benches])
    ax_t.tick_params(axis="y", labelsize=8)
    ax_m.tick_params(axis="y", labelleft=False)
    ax_t.set_title("throughput: baseline (grey) above, this run below", fontsize=9, loc="left")
    ax_m.set_title("peak memory", fontsize=9, loc="left")
    if pic.modes:
        _modes(fig.add_subplot(grid[1, :]), pic.modes)
    fig.suptitle(f"{pic.title}\n{pic.subtitle}", fontsize=9.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=path.suffix.lower().lstrip("."))
