"""pytest-xdist workers: a GPU of their own each, or a share of the CPU's threads, and their
results sent to the controller, which merges them, saves baselines and writes reports.

A worker picks its GPU by setting ``CUDA_VISIBLE_DEVICES`` at configure time, before anything
initialises CUDA (the plugin itself never does in the pytest process), indexing into the list the
caller may have set already.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from ..model import Result
from ..model.because import plural
from ..store.codec import Document

if TYPE_CHECKING:
    from ..session import Session

KEY = "cnnperf"
#: the key under which the controller hands a worker the revision's worktree
WORKTREE_KEY = "cnnperf_against_worktree"


def worker_slot(config: pytest.Config) -> tuple[int, int] | None:
    """``(index, count)`` of this xdist worker, ``None`` outside a worker."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    index = int(str(workerinput["workerid"]).removeprefix("gw"))
    return index, int(workerinput["workercount"])


def controller_workers(config: pytest.Config) -> int:
    """How many workers this process starts as an xdist controller (0: it runs tests itself).

    Read from the options, which xdist resolves before configure time (``-n auto`` included);
    its ``dsession`` plugin may not be registered yet when this plugin configures."""
    if worker_slot(config) is not None or getattr(config.option, "dist", "no") == "no":
        return 0
    return int(getattr(config.option, "numprocesses", 0) or 0)


def check_gpus(workers: int, gpus: int, device_kind: str, explicit_index: int | None) -> None:
    """One GPU per worker: refuse what cannot work, with the fix."""
    if device_kind == "cpu" or workers == 0:
        return
    if explicit_index is not None:
        raise pytest.UsageError(
            f"--cnnperf-device=cuda:{explicit_index} names one GPU, but -n {workers} starts "
            f"{workers} workers, each benchmarking on a GPU of its own; use --cnnperf-device=cuda "
            "(or auto) with -n, or drop -n"
        )
    if gpus and workers > gpus:
        raise pytest.UsageError(
            f"-n {workers} starts {workers} workers, but only {gpus} CUDA device"
            f"{'s are' if gpus != 1 else ' is'} visible, and two benchmarks never share a GPU: "
            f"use -n {gpus} (or fewer), or benchmark on the CPU with --cnnperf-device=cpu"
        )


def pin_gpu(index: int) -> None:
    """Make the worker's GPU the only one it sees (``cuda:0`` from then on)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        choices = [d.strip() for d in visible.split(",") if d.strip()]
        os.environ["CUDA_VISIBLE_DEVICES"] = choices[index % len(choices)]
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(index)


def pin_worker_gpu(index: int, count_gpus: Callable[[], int]) -> int:
    """Pin the worker's GPU before anything counts or initialises CUDA, then count what it sees;
    where no GPU is visible (a machine without one), leave ``CUDA_VISIBLE_DEVICES`` as it was.
    Returns the GPUs the worker sees."""
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    pin_gpu(index)
    count = count_gpus()
    if count == 0:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
    return count


def share_threads(count: int) -> str:
    """Give each of ``count`` workers its share of the CPU's threads; say what that costs."""
    import torch

    total = os.cpu_count() or torch.get_num_threads()
    threads = max(1, total // count)
    torch.set_num_threads(threads)
    return (
        f"{count} xdist workers share this CPU's {total} cores, {plural(threads, 'thread')} "
        "each: their benchmarks run at the same time and their figures interfere"
    )


@dataclass(frozen=True)
class Pending:
    machine: str
    module: str
    entries: dict[str, dict[str, Result]]


@dataclass(frozen=True)
class WorkerReport:
    """What a worker sends to the controller when it finishes."""

    results: tuple[Result, ...] = ()
    pending: tuple[Pending, ...] = ()
    collected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    uncollected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    machine: str | None = None
    warnings: tuple[str, ...] = ()


WORKER_REPORT: Document[WorkerReport] = Document(
    "pytest-cnnperf/worker-report", 2, WorkerReport, "worker report"
)


def send(config: pytest.Config, session: Session) -> None:
    """In a worker: put this worker's share into ``workeroutput`` for the controller."""
    report = WorkerReport(
        results=tuple(session.results),
        pending=tuple(
            Pending(machine, module, entries)
            for (machine, module), entries in session.pending.items()
        ),
        collected={module: tuple(sorted(tests)) for module, tests in session.collected.items()},
        uncollected={module: tuple(sorted(n)) for module, n in session.uncollected.items() if n},
        machine=session.machine,
        warnings=tuple(session.warnings),
    )
    config.workeroutput[KEY] = json.dumps(WORKER_REPORT.dump(report))  # type: ignore[attr-defined]


def receive(session: Session, text: str) -> None:
    """At the controller: merge one worker's share, losing and duplicating nothing."""
    report = WORKER_REPORT.load(json.loads(text))
    session.merge(
        results=report.results,
        pending={(p.machine, p.module): p.entries for p in report.pending},
        collected=report.collected,
        uncollected=report.uncollected,
        machine=report.machine,
        warnings=report.warnings,
    )


class XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    def __init__(self, session: Session, worktree: Callable[[pytest.Config], str | None]) -> None:
        self.session = session
        self.worktree = worktree

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        """Hand the revision's worktree to the worker (``--cnnperf-against``): made once."""
        worktree = self.worktree(node.config)
        if worktree is not None:
            node.workerinput[WORKTREE_KEY] = worktree

    @pytest.hookimpl
    def pytest_testnodedown(self, node: object, error: object) -> None:
        output = getattr(node, "workeroutput", {})
        if KEY in output:
            receive(self.session, output[KEY])
