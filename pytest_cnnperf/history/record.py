"""A pytest session's side of its history: the recent runs the creep gate compares with, and
the run appended at the end of the session.

Only the process that ends the session appends (the xdist controller, which has every worker's
results by then; never a worker or a sample process), after the baselines and reports are
written, so a history that cannot be reached costs nothing but the history: one message naming
it. The creep gate reads in the process that gates (a worker under xdist); once a read failed,
the session stops asking and says so once.
"""

from __future__ import annotations

import datetime
import socket
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from .identity import ci_run, git_state
from .runs import Entry, RunInfo
from .store import HistoryProblem, display, open_store

if TYPE_CHECKING:
    from ..results import BenchmarkResult
    from ..session import Session


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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

    def recent(self, test_id: str, key: str, machine: str, runs: int) -> list[Entry] | None:
        """The benchmark's newest ``runs`` runs on ``machine``, newest first (none before a
        history file exists); ``None`` when the history cannot be read (see :attr:`problem`)."""
        if self.problem is not None:
            return None
        if isinstance(self.target, Path) and not self.target.exists():
            return []
        try:
            with open_store(self.target) as store:
                return store.recent(test_id, key, machine, runs)
        except HistoryProblem as exc:
            self.problem = str(exc)
        return None


def append(session: Session, folder: Path, results: Sequence[BenchmarkResult]) -> None:
    """Append the session's run to its history (``--cnnperf-history``); what happened becomes a
    line of the terminal summary: the run's number, or the problem."""
    from ..settings import CREEP_ACCEPT, HISTORY

    target = session.settings[HISTORY]
    if target is None or not results:
        return
    info = run_info(folder, session.machine, session.settings[CREEP_ACCEPT])
    try:
        with open_store(target, create=True) as store:
            run_id = store.append(info, results)
    except HistoryProblem as exc:
        problem = f"{exc}; this run is not in it (its results, reports and baselines were written)"
        session.reported([], [problem])
        return
    count = len(results)
    session.reported(
        [
            f"recorded run {run_id} ({count} benchmark{'' if count == 1 else 's'}) in the history "
            f"{display(target)}"
        ],
        [],
    )
