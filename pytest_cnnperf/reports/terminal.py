"""The table at the end of a pytest session."""

from __future__ import annotations

import dataclasses

import pytest

from ..state import SessionState
from . import table


def _render(rows: list[table.Row]) -> list[str]:
    columns = [f.name for f in dataclasses.fields(table.Row) if f.name != "note"]
    cells = [[getattr(r, c) for c in columns] for r in [table.HEADERS, *rows]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = []
    for r, line in zip([table.HEADERS, *rows], cells, strict=True):
        text = "  ".join(
            cell.ljust(width) for cell, width in zip(line, widths, strict=True)
        ).rstrip()
        lines.append(text + (f"  ({r.note})" if r.note else ""))
    return lines


def summary(reporter: pytest.TerminalReporter, state: SessionState) -> None:
    results = state.results
    finish = state.finish
    if not results and not (finish and (finish.saved or finish.stale)) and not state.warnings:
        return
    reporter.write_sep("=", "cnnperf")
    if results:
        for line in _render([table.row(r) for r in results]):
            reporter.write_line(line)
        for env in table.environments(results):
            reporter.write_line(f"{env.machine}: {env.describe()}")
    if finish:
        for outcome in finish.saved:
            removed = f", removed {len(outcome.removed)} stale test(s)" if outcome.removed else ""
            reporter.write_line(f"saved {outcome.written} baseline(s) to {outcome.path}{removed}")
        if finish.stale:
            reporter.write_line(
                f"{len(finish.stale)} baseline entr{'y' if len(finish.stale) == 1 else 'ies'} "
                "belong to tests that no longer exist (remove them with --cnnperf-save "
                "--cnnperf-prune):"
            )
            for path, test in finish.stale:
                reporter.write_line(f"  {test} in {path}")
        for error in finish.errors:
            reporter.write_line(f"error: {error}", red=True)
    for warning in state.warnings:
        reporter.write_line(f"warning: {warning}", yellow=True)
