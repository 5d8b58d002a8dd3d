"""``--cnnperf-markdown`` and ``$GITHUB_STEP_SUMMARY``: the verdict, the table, the environment.

Written for a CI job page or a pull-request comment: the first line says whether anything
regressed, the regressed benchmarks follow with their numbers, then the table of every benchmark,
its notes, and the environment the numbers belong to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import explain, units
from ..results import BenchmarkResult, Comparison, Verdict
from . import table

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


def _escape(cell: str) -> str:
    return cell.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(name: str) -> str:
    return f"`{name}`" if "`" not in name else name


def title(results: Sequence[BenchmarkResult]) -> str:
    """The verdict in one heading."""
    n = len(results)
    count = {v: c for v, c in table.counts(results)}
    of = f"of {n} benchmark{'' if n == 1 else 's'}"
    if count.get(Verdict.REGRESSED):
        return f"{ICON[Verdict.REGRESSED]} cnnperf: {count[Verdict.REGRESSED]} {of} regressed"
    if count.get(Verdict.ERROR):
        return f"{ICON[Verdict.ERROR]} cnnperf: {count[Verdict.ERROR]} {of} failed to run"
    recompiling = sum(any(explain.fails_compile(r) for r in x.decision.reasons) for x in results)
    if recompiling:  # without a baseline (a new benchmark that recompiles while timed)
        return f"{ICON[Verdict.REGRESSED]} cnnperf: {recompiling} {of} failed (recompiles)"
    if count.get(Verdict.SAVED) == n:
        return f"{ICON[Verdict.SAVED]} cnnperf: recorded baselines of {n} benchmarks"
    if count.get(Verdict.INCONCLUSIVE):
        return (
            f"{ICON[Verdict.INCONCLUSIVE]} cnnperf: no regression found; "
            f"{count[Verdict.INCONCLUSIVE]} {of} inconclusive"
        )
    return f"{ICON[Verdict.OK]} cnnperf: no regression in {n} benchmark{'' if n == 1 else 's'}"


def _metric(comparison: Comparison, unit: str) -> str:
    if comparison.metric == "throughput":
        return (
            f"throughput {table.gain(comparison)} "
            f"(fails below -{units.percent(comparison.threshold)})"
        )
    return (
        f"peak memory {units.nbytes(comparison.current)} against "
        f"{units.nbytes(comparison.baseline)}, {units.change(comparison.change)} "
        f"(fails above +{units.percent(comparison.threshold)})"
    )


def _attention(results: Sequence[BenchmarkResult]) -> list[str]:
    lines = []
    for result in results:
        d = result.decision
        name = f"{_code(table.short_test(result.test_id))} ({table.short_key(result.config)})"
        compiled = [explain.reason_text(r) for r in d.reasons if explain.fails_compile(r)]
        if d.verdict is Verdict.REGRESSED or compiled:
            what = [
                _metric(c, result.config.unit)
                for c in (d.throughput, d.memory)
                if c and c.verdict is Verdict.REGRESSED
            ]
            creep = explain.creep_of(d)
            if creep:
                compiled.append(explain.reason_text(creep))
            said = "; ".join(what + compiled) or "; ".join(explain.notes(d)) or "regressed"
            lines.append(f"- {ICON[Verdict.REGRESSED]} {name}: {_escape(said)}")
        elif d.verdict is Verdict.ERROR:
            lines.append(f"- {ICON[d.verdict]} {name}: {_escape(result.error or 'error')}")
        elif d.verdict is Verdict.INCONCLUSIVE and d.throughput and result.measurement:
            spread = result.measurement.step.relative_iqr / 2
            lines.append(
                f"- {ICON[d.verdict]} {name}: inconclusive at the "
                f"{units.percent(d.throughput.threshold)} threshold (throughput "
                f"{table.gain(d.throughput)}, spread ±{spread:.0%}); re-run it or measure more "
                "with --cnnperf-effort=thorough"
            )
    return lines


def render(results: Sequence[BenchmarkResult], verbose: bool = False) -> str:
    """The whole summary as Markdown (GitHub-flavoured tables)."""
    lines = [f"### {title(results)}", ""]
    failures = _attention(results)
    if failures:
        lines += [*failures, ""]
    lines += [table.summary(results), ""]
    rows = [table.row(r) for r in results]
    columns = table.visible(rows, [*table.COLUMNS, *(table.DETAIL_COLUMNS if verbose else ())])
    lines.append("| " + " | ".join(c.header for c in columns) + " |")
    lines.append("|" + "|".join("--:" if c.figure else "---" for c in columns) + "|")
    for r, result in zip(rows, results, strict=True):
        cells = []
        for c in columns:
            value = getattr(r, c.field)
            if c.field == "verdict":
                value = f"{ICON.get(result.decision.verdict, '')} {value}"
            elif c.field == "test":
                value = _code(value)
            cells.append(_escape(value))
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {_code(r.test)}: {_escape(note)}" for r in rows for note in r.notes]
    if any(r.decision.throughput for r in results):
        lines += ["", f"_{table.CHANGE_LEGEND}_"]
    legend = table.efficiency_legend(results)
    if legend:
        lines += ["", *[f"_{_escape(line)}_" for line in legend]]
    if notes:
        lines += ["", "Notes:", "", *notes]
    missing = explain.missing_baselines(results)
    if missing:
        lines += ["", *[_escape(line.strip()) for line in missing]]
    lines.append("")
    for env in table.environments(results):
        lines.append(f"**Environment** ({_code(env.machine)}): {_escape(env.describe())}")
        lines.append("")
    for line in table.compilers(results):
        lines += [f"**Compiler**: {_escape(line.removeprefix('compiler: '))}", ""]
    return "\n".join(lines)


def write(path: Path, results: Sequence[BenchmarkResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(results), encoding="utf-8")


def step_summary(environ: Mapping[str, str] | None = None) -> Path | None:
    """The file GitHub Actions shows on the job page, when this runs in one."""
    value = (os.environ if environ is None else environ).get(SUMMARY_VARIABLE, "").strip()
    return Path(value) if value else None


def append(path: Path, results: Sequence[BenchmarkResult]) -> None:
    """Add the summary to a file that other steps also write to."""
    with path.open("a", encoding="utf-8") as stream:
        stream.write(render(results) + "\n")
