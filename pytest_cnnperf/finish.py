"""The end of a session: write the baselines this run recorded and find stale entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .baseline import BaselineFileError, SaveOutcome
from .state import SessionState

if TYPE_CHECKING:
    from .reports.benchmark_json import Info


@dataclass
class FinishReport:
    saved: list[SaveOutcome] = field(default_factory=list)
    #: (file, test name) of entries whose test no longer exists
    stale: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: the report files written (``--cnnperf-json`` and the others), one line each
    reports: list[str] = field(default_factory=list)


def stale_tests(state: SessionState, machine: str, module: str) -> list[str]:
    """Tests with entries in the module's baseline file that this session did not collect."""
    try:
        document = state.store.load(state.store.path(machine, module), machine)
    except BaselineFileError:
        return []
    if document is None:
        return []
    return sorted(set(document.entries) - state.collected.get(module, set()))


def save_baselines(state: SessionState) -> FinishReport:
    """Merge the recorded entries into their files (pruning stale tests on request), then list
    the stale entries that remain. The report is kept on the state for the terminal summary."""
    report = FinishReport()
    for (machine, module), entries in sorted(state.pending.items()):
        prune = stale_tests(state, machine, module) if state.config.prune else []
        try:
            report.saved.append(state.store.save(machine, module, entries, prune))
        except (BaselineFileError, OSError) as exc:
            report.errors.append(f"could not save baselines for {module}: {exc}")
    if state.machine:
        for module in sorted(state.collected):
            path = state.store.path(state.machine, module)
            stale = stale_tests(state, state.machine, module)
            report.stale += [(str(path), test) for test in stale]
    state.finish = report
    return report


def write_reports(state: SessionState, benchmark_info: Info | None = None) -> None:
    """Write the reports the options ask for, and the Markdown summary to
    ``$GITHUB_STEP_SUMMARY`` when that is set. A report that cannot be written becomes an error
    line of the terminal summary (never a traceback) and does not stop the others.
    ``benchmark_info`` gives pytest-benchmark's machine and commit information."""
    from .reports import outputs

    if state.finish is None:
        state.finish = FinishReport()
    written, errors = outputs.write_all(
        state.config.reports, state.results, state.machine, benchmark_info
    )
    state.finish.reports += written
    state.finish.errors += errors
