"""The terminal at the end of a session, and each benchmark's headline with ``-v``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from ..model import Result, Verdict
from . import explain, table, text

if TYPE_CHECKING:
    from ..session import Session

#: verdicts and the markup the terminal shows them in
MARKUP = {
    Verdict.REGRESSED: {"red": True, "bold": True},
    Verdict.ERROR: {"red": True, "bold": True},
    Verdict.INCONCLUSIVE: {"yellow": True},
    Verdict.IMPROVED: {"green": True},
}


def styled_lines(
    results: Sequence[Result], verbose: bool = False
) -> list[tuple[str, Verdict | None]]:
    """The verdict counts, the table of every benchmark, its notes and the environments; each
    line with the verdict whose colour it takes (``None``: plain)."""
    rows = [table.row(r) for r in results]
    columns = table.visible(rows, [*table.COLUMNS, *(table.DETAIL_COLUMNS if verbose else ())])
    right = [i for i, c in enumerate(columns) if c.figure]
    header, *body = text.columns([c.header for c in columns], table.cells(rows, columns), right)
    worst = table.counts(results)[0][0] if results else None
    out: list[tuple[str, Verdict | None]] = [(table.summary(results), worst)]
    out += [(line, None) for line in explain.compared(results)]
    out.append(("", None))
    out.append((header, None))
    out += [(line, r.verdict) for line, r in zip(body, results, strict=True)]
    notes = [f"note: {r.test}: {note}" for r in rows for note in r.notes]
    notes += [f"operators: {r.test}: {line}" for r in rows for line in r.operators]
    notes[:0] = table.efficiency_legend(results)
    notes[:0] = table.legends(results)
    if notes:
        out += [("", None), *[(n, None) for n in notes]]
    out.append(("", None))
    out += [(line, None) for line in table.environment_lines(results)]
    out += [(line, None) for line in table.compilers(results)]
    return out


def lines(results: Sequence[Result], verbose: bool = False) -> list[str]:
    return [line for line, _ in styled_lines(results, verbose)]


def summary(reporter: pytest.TerminalReporter, session: Session) -> None:
    results = session.results
    finish = session.finish
    if not results and not (finish.saved or finish.stale) and not session.warnings:
        return
    reporter.write_sep("=", "cnnperf")
    if results:
        verbose = reporter.config.get_verbosity() > 0
        for line, verdict in styled_lines(results, verbose):
            reporter.write_line(line, **(MARKUP.get(verdict, {}) if verdict else {}))
    missing = explain.missing_baselines(results)
    if missing:
        reporter.write_line("")
        for line in missing:
            reporter.write_line(line, yellow=True)
    for outcome in finish.saved:
        removed = f", removed {len(outcome.removed)} stale test(s)" if outcome.removed else ""
        reporter.write_line(f"saved {outcome.written} baseline(s) to {outcome.path}{removed}")
    if finish.stale:
        one = len(finish.stale) == 1
        reporter.write_line(
            "1 baseline entry belongs to no test its module has now (if that test is gone, "
            "remove it with --cnnperf-save --cnnperf-prune):"
            if one
            else f"{len(finish.stale)} baseline entries belong to no test their modules have "
            "now (if those tests are gone, remove them with --cnnperf-save --cnnperf-prune):"
        )
        for path, test in finish.stale:
            reporter.write_line(f"  {test} in {path}")
    for written in finish.reports:
        reporter.write_line(written)
    for error in finish.errors:
        reporter.write_line(f"error: {error}", red=True)
    for warning in session.warnings:
        reporter.write_line(f"warning: {warning}", yellow=True)


def headlines(reporter: pytest.TerminalReporter, results: Sequence[Result]) -> None:
    """With ``-v``: under a test's line, each benchmark's verdict and main figures."""
    for result in results:
        line = f"    {table.short_key(result.config)}: {explain.headline(result)}"
        reporter.write("\n" + line, **(MARKUP.get(result.verdict, {}) if result.verdict else {}))
