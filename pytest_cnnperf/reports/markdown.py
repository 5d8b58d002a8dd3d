"""``--cnnperf-markdown`` and ``$GITHUB_STEP_SUMMARY``: the verdict, the table, the environment.

Written for a CI job page or a pull-request comment: the first line says whether anything
regressed, the regressed benchmarks follow with their numbers, then the table of every benchmark,
its notes, and the environment the numbers belong to.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..model import Comparison, Result, Verdict, units
from ..model.because import plural
from ..model.findings import ComputesOtherwise
from . import explain, table
from .loader import InputFigures

SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"

ICON = {
    Verdict.OK: "✅",
    Verdict.REGRESSED: "❌",
    Verdict.IMPROVED: "🚀",
    Verdict.INCONCLUSIVE: "❔",
    Verdict.NEW: "🆕",
    Verdict.SAVED: "💾",
    Verdict.ERROR: "💥",
}


# What GitHub would read as Markdown in text: escapes, code, emphasis (an underscore inside a
# word is not), links, strikethrough and table cells; a backslash before each makes it literal.
_MARKDOWN = re.compile(r"[\\`*\[\]~|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# and what it would read as HTML (a tag, an entity), written as entities instead
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _one_line(value: str) -> str:
    return " ".join(value.splitlines())


def text(value: str) -> str:
    """``value`` shown as it is, on one line, in Markdown and in a table cell: ``x|y<b>z</b>``
    neither splits the cell nor turns bold, and ``<script>`` stays text."""
    escaped = _MARKDOWN.sub(lambda m: "\\" + m.group(), _one_line(value))
    return re.sub("[&<>]", lambda m: _HTML[m.group()], escaped)


def code(value: str) -> str:
    """``value`` as a code span, where HTML and Markdown are shown as they are: fenced by one
    backtick more than its longest run of them, and padded with a space at either end where it
    starts or ends with a backtick or a space (CommonMark takes one such space off each end)."""
    value = _one_line(value)
    if not value.strip():
        return text(value)
    fence = "`" * (max(map(len, re.findall("`+", value)), default=0) + 1)
    pad = " " if value[0] in "` " or value[-1] in "` " else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def html_code(value: str) -> str:
    """``value`` as code inside HTML (a ``<summary>``, where GitHub reads no Markdown)."""
    return f"<code>{html.escape(_one_line(value))}</code>"


def code_cell(value: str) -> str:
    """``value`` as a code span in a table cell: its pipes escaped, which GitHub reads as pipes
    inside a cell's code span too."""
    return code(value).replace("|", "\\|")


def title(results: Sequence[Result]) -> str:
    """The verdict in one heading."""
    n = len(results)
    count = {v: c for v, c in table.counts(results)}
    of = f"of {plural(n, 'benchmark')}"
    if count.get(Verdict.REGRESSED):
        return f"{ICON[Verdict.REGRESSED]} cnnperf: {count[Verdict.REGRESSED]} {of} regressed"
    if count.get(Verdict.ERROR):
        return f"{ICON[Verdict.ERROR]} cnnperf: {count[Verdict.ERROR]} {of} failed to run"
    recompiling = sum(any(r.fails_as for r in x.decision.reasons) for x in results if x.decision)
    if recompiling:  # without a baseline (a new benchmark that recompiles while timed)
        return f"{ICON[Verdict.REGRESSED]} cnnperf: {recompiling} {of} failed (recompiles)"
    if count.get(Verdict.SAVED) == n:
        return f"{ICON[Verdict.SAVED]} cnnperf: recorded baselines of {n} benchmarks"
    if count.get(Verdict.INCONCLUSIVE):
        return (
            f"{ICON[Verdict.INCONCLUSIVE]} cnnperf: no regression found; "
            f"{count[Verdict.INCONCLUSIVE]} {of} inconclusive"
        )
    return f"{ICON[Verdict.OK]} cnnperf: no regression in {plural(n, 'benchmark')}"


def _metric(comparison: Comparison) -> str:
    if comparison.metric == "throughput":
        return f"throughput {table.gain(comparison)} ({explain.fails_at(comparison)})"
    return (
        f"peak memory {units.nbytes(comparison.current)} against "
        f"{units.nbytes(comparison.baseline)}, {units.change(comparison.change)} "
        f"({explain.fails_at(comparison)})"
    )


def _attention(results: Sequence[Result]) -> list[str]:
    lines = []
    for result in results:
        d = result.decision
        if d is None:
            continue
        name = f"{code(result.test)} ({text(table.short_key(result.config))})"
        compiled = [str(r) for r in d.reasons if r.fails_as]
        if d.verdict is Verdict.REGRESSED or compiled:
            what = [
                _metric(c) for c in (d.throughput, d.memory) if c and c.verdict is Verdict.REGRESSED
            ]
            figures = InputFigures.of(result.measurement)
            if figures is not None and what:
                what.append(figures.verdict())
            if d.creep:
                compiled.append(str(d.creep))
            said = "; ".join(what + compiled) or "; ".join(explain.notes(d)) or "regressed"
            lines.append(f"- {ICON[Verdict.REGRESSED]} {name}: {text(said)}")
        elif d.verdict is Verdict.ERROR:
            lines.append(f"- {ICON[d.verdict]} {name}: {text(result.error or 'error')}")
        elif otherwise := [str(r) for r in d.reasons if isinstance(r, ComputesOtherwise)]:
            lines.append(f"- {ICON[Verdict.INCONCLUSIVE]} {name}: {text(otherwise[0])}")
        elif d.verdict is Verdict.INCONCLUSIVE and d.throughput and result.measurement:
            spread = result.measurement.step.relative_iqr / 2
            lines.append(
                f"- {ICON[d.verdict]} {name}: inconclusive at the "
                f"{units.percent(d.throughput.threshold)} threshold (throughput "
                f"{table.gain(d.throughput)}, spread ±{spread:.0%}); re-run it or measure more "
                "with --cnnperf-effort=thorough"
            )
    return lines


def render(results: Sequence[Result], verbose: bool = False) -> str:
    """The whole summary as Markdown (GitHub-flavoured tables)."""
    lines = [f"### {title(results)}", ""]
    against = explain.compared(results)
    if against:
        lines += [*[text(line[0].upper() + line[1:]) + "." for line in against], ""]
    failures = _attention(results)
    if failures:
        lines += [*failures, ""]
    lines += [table.summary(results, name=code), ""]
    rows = [table.row(r) for r in results]
    columns = table.visible(rows, [*table.COLUMNS, *(table.DETAIL_COLUMNS if verbose else ())])
    lines.append("| " + " | ".join(c.header for c in columns) + " |")
    lines.append("|" + "|".join("--:" if c.figure else "---" for c in columns) + "|")
    for r, result in zip(rows, results, strict=True):
        cells = []
        for c in columns:
            value = getattr(r, c.field)
            if c.field == "verdict":
                icon = ICON.get(result.verdict, "") if result.verdict else ""
                cells.append(f"{icon} {text(value)}")
            elif c.field == "test":
                cells.append(code_cell(value))
            else:
                cells.append(text(value))
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {code(r.test)}: {text(note)}" for r in rows for note in r.notes]
    operators = [
        line
        for r in rows
        if r.operators
        for line in (
            f"<details><summary>Which operators changed: {html_code(r.test)}</summary>",
            "",
            *(f"- {text(op)}" for op in r.operators),
            "",
            "</details>",
        )
    ]
    lines += [line for legend in table.legends(results) for line in ("", f"_{legend}_")]
    legend = table.efficiency_legend(results)
    if legend:
        lines += ["", *[f"_{text(line)}_" for line in legend]]
    if notes:
        lines += ["", "Notes:", "", *notes]
    if operators:
        lines += ["", *operators]
    missing = explain.missing_baselines(results)
    if missing:
        lines += ["", *[text(line.strip()) for line in missing]]
    lines.append("")
    for env in table.environments(results):
        lines.append(f"**Environment** ({code(env.machine)}): {text(env.describe())}")
        lines.append("")
    for line in table.compilers(results):
        lines += [f"**Compiler**: {text(line.removeprefix('compiler: '))}", ""]
    return "\n".join(lines)


def write(path: Path, results: Sequence[Result]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(results), encoding="utf-8")


def step_summary(environ: Mapping[str, str] | None = None) -> Path | None:
    """The file GitHub Actions shows on the job page, when this runs in one."""
    value = (os.environ if environ is None else environ).get(SUMMARY_VARIABLE, "").strip()
    return Path(value) if value else None


def append(path: Path, results: Sequence[Result]) -> None:
    """Add the summary to a file that other steps also write to."""
    with path.open("a", encoding="utf-8") as stream:
        stream.write(render(results) + "\n")
