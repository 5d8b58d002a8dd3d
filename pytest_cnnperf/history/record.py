"""A pytest session's side of its history: the recent runs the creep gate compares with, and
the run appended at the end of the session.

Only the process that ends the session appends (the xdist controller, which has every worker's
results by then; never a worker or a sample process), after the baselines and reports are
written, so a history that cannot be reached costs nothing but the history: one message naming
it. The creep gate reads in the process that gates (a worker under xdist); once a read failed,
the session stops asking and says so once.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import __version__
from ..gate.creep import Run
from ..model import Result
from ..model.because import plural
from ..store.results_file import now
from .identity import ci_run, git_state
from .runs import RunInfo
from .store import HistoryProblem, display, open_store


def run_info(
    folder: Path,
    machine: str | None,
    accepted: bool = False,
    environ: Mapping[str, str] | None = None,
) -> RunInfo:
    """This run as its history records it: now, here, the checkout ``folder`` is in and the CI
    job (from ``environ``, default the process's)."""
    return RunInfo(
        uid=uuid.uuid4().hex,
        recorded=now(),
        machine=machine,
        host=socket.gethostname(),
        git=git_state(folder),
        ci=ci_run(environ),
        cnnperf=__version__,
        accepted=accepted,
    )


class HistoryLink:
    """The session's history, read for the creep gate."""

    def __init__(self, target: Path | str) -> None:
        self.target = target
        self.name = display(target)
        #: why the history could not be read, once it could not
        self.problem: str | None = None

    def recent(self, test_id: str, key: str, machine: str, runs: int) -> list[Run] | None:
        """The benchmark's newest ``runs`` runs on ``machine``, newest first (none before a
        history file exists); ``None`` when the history cannot be read (see :attr:`problem`)."""
        if self.problem is not None:
            return None
        if isinstance(self.target, Path) and not self.target.exists():
            return []
        try:
            with open_store(self.target) as store:
                entries = store.recent(test_id, key, machine, runs)
        except HistoryProblem as exc:
            self.problem = str(exc)
            return None
        return [Run(e.result, e.run.commit, e.run.recorded) for e in entries]


def append(
    target: Path | str, folder: Path, machine: str | None, accepted: bool, results: Sequence[Result]
) -> tuple[str | None, str | None]:
    """Append a session's run to its history: the line that says so, or the problem (the
    history is named in either)."""
    if not results:
        return None, None
    info = run_info(folder, machine, accepted)
    try:
        with open_store(target, create=True) as store:
            run_id = store.append(info, results)
    except HistoryProblem as exc:
        return (
            None,
            f"{exc}; this run is not in it (its results, reports and baselines were written)",
        )
    count = len(results)
    return (
        f"recorded run {run_id} ({plural(count, 'benchmark')}) in the history {display(target)}",
        None,
    )
