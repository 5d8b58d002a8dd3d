"""The counting process of ``--cnnperf-metric=instructions``: this checkout's pytest process
again, under Valgrind's callgrind, that collects the same tests and takes the counted samples
the run asks for (``measuring.instructions``), through its own zygote, as the revision's process
of ``--cnnperf-against`` takes its samples (``revision.base``).

A session starts one per core (:class:`CountingPool`; one per xdist worker) when the first
benchmark is counted, so Valgrind's start and torch's import, uninstrumented, are paid once a
process. What moves counts is pinned: address-space randomisation off (``setarch -R``),
Python's hash seed, one torch thread (callgrind collects per thread), and the kernels torch,
oneDNN, MKL and glibc's maths dispatch to (``measuring.instructions.kernels_for``, by the
Valgrind it runs under). Valgrind shows the program a CPU of its own, never the host's, so
under the same pins the libraries pick the same kernels on every x86-64 host.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..measuring.instructions import (
    KERNELS_ENV,
    OUT_ENV,
    VALGRIND_ENV,
    InstructionsProblem,
    kernels_for,
    valgrind_version,
)
from ..model import Against, Revision
from ..sampling.manager import Sampler, Target
from ..sampling.messages import ANY_KEY, BenchmarkError, Site, TakenSample
from .base import BaseProblem, BaseSampler, BaseSide, Launch, launch
from .git import Worktree

if TYPE_CHECKING:
    from .against import AgainstRun

#: what the counting process's environment pins, beside the kernels
PINNED = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


#: callgrind's options: instrumentation and collection off until the counted steps, output
#: file per process (a counted sample is a forked child), no per-line figures
CALLGRIND = (
    "--tool=callgrind",
    "--instr-atstart=no",
    "--collect-atstart=no",
    "--dump-line=no",
    "--dump-instr=no",
)


def valgrind() -> str:
    """The valgrind command (``BaseProblem`` saying how to get it where there is none)."""
    found = shutil.which("valgrind")
    if found is None:
        raise BaseProblem(
            "--cnnperf-metric=instructions counts under Valgrind, which is not installed here; "
            "install it (Debian and Ubuntu: apt-get install valgrind; Fedora: dnf install "
            "valgrind), or gate by time: --cnnperf-metric=time"
        )
    return found


def environment(folder: Path, version: str, inherited: Mapping[str, str]) -> dict[str, str]:
    """What the counting process's environment adds to ``inherited`` (this one's) to count
    under Valgrind ``version``: glibc's tunables keep the user's others."""
    kernels = kernels_for(version)
    pinned = dict(kernels.env)
    tunables = inherited.get("GLIBC_TUNABLES")
    if tunables and "GLIBC_TUNABLES" in pinned:
        pinned["GLIBC_TUNABLES"] = f"{pinned['GLIBC_TUNABLES']}:{tunables}"
    return {
        **PINNED,
        **pinned,
        VALGRIND_ENV: version,
        KERNELS_ENV: kernels.name,
        OUT_ENV: str(folder),
    }


def under_callgrind(how: Launch, folder: Path) -> Launch:
    """``how`` started under callgrind, randomisation off, its environment pinned."""
    command = valgrind()
    try:
        version = valgrind_version(command)
    except InstructionsProblem as exc:
        raise BaseProblem(str(exc)) from None
    pinned = environment(folder, version, {**os.environ, **how.env})
    arguments = ["setarch", platform.machine(), "-R", command, "-q", *CALLGRIND]
    arguments.append(f"--callgrind-out-file={folder}/cg.%p")
    return Launch((*arguments, *how.command), how.cwd, {**how.env, **pinned})


@dataclass
class CountingRun:
    """A counting process, started at the first counted benchmark: this checkout's, or with
    ``revision`` the revision's of ``--cnnperf-against`` (its worktree's tests)."""

    revision: AgainstRun | None = None
    side: BaseSide | None = None
    folder: Path | None = None

    def sampler(self, config: Any, passed: Sequence[str], timeout: float) -> BaseSampler:
        """The counting process's sampler (started now, once); ``BaseProblem`` when it cannot
        count."""
        if self.side is None:
            self.folder = Path(tempfile.mkdtemp(prefix="pytest-cnnperf-callgrind-"))
            option = "--cnnperf-metric=instructions"
            if self.revision is None:
                top = Path(config.rootpath)
                here = Revision("this checkout", "this checkout")
                tree = Worktree(top, here, top)  # the checkout itself: paths map to themselves
                against = Against(here, here)
            else:
                tree, against = self.revision.worktree, self.revision.against
            how = launch(config, tree, "cpu", None, passed)
            if how is None:
                raise BaseProblem(f"{option}: none of this run's tests exist at {against.base}")
            how = under_callgrind(how, self.folder)
            self.side = BaseSide.start(against, tree, option, how, threads=1)
        return self.side.sampler(timeout)

    def processes(self) -> list[int]:
        """The counting process and every process under it (its zygote, a count's process)."""
        pid = self.side.pid if self.side is not None else None
        return [pid, *descendants(pid)] if pid is not None else []

    def close(self) -> None:
        if self.side is not None:
            self.side.close()
            self.side = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


@dataclass
class _Count:
    """A count asked of the pool: a test's (``demanded``), or one taken ahead of its test."""

    target: Target
    demanded: bool
    #: a counting process took it
    begun: bool = False
    future: Future[tuple[TakenSample, str | None]] = field(default_factory=Future)


class CountingPool(Sampler):
    """This checkout's counting processes, one per core this process may use (so that a
    session's counts take every core): each counts the step a test asks for and, while the
    others count or a test is timed, the first benchmark of a test still to come (a count
    depends on the code alone: one taken ahead stands for the test's when ``Site.key`` is the
    same); under pytest-xdist a worker's one process takes none ahead (which tests a worker runs
    is decided as it goes). They are stopped while a test's samples are timed (:meth:`held`), so
    that no count disturbs a time."""

    def __init__(
        self,
        runs: Sequence[CountingRun],
        start: Callable[[CountingRun], BaseSampler],
        upcoming: Callable[[], Sequence[tuple[str, str]]],
    ) -> None:
        self._runs = list(runs)
        self._start = start
        #: the benchmark tests of the session, in order: (node id, file)
        self._upcoming = upcoming
        self._changed = threading.Condition()
        self._queue: list[_Count] = []
        #: the counts taken ahead, by node id, and the template of their plan (the first asked)
        self._ahead: dict[str, _Count] = {}
        self._template: Target | None = None
        self._closed = False
        self._threads: list[threading.Thread] = []

    in_process = False

    def take(self, target: Target, count: int) -> list[TakenSample]:
        """``count`` counted samples of ``target`` (one: counts do not vary)."""
        return [self._count(target) for _ in range(count)]

    def _count(self, target: Target) -> TakenSample:
        with self._changed:
            if self._template is None:
                self._template = target
            ahead = self._ahead.get(target.site.nodeid) if target.site.index == 0 else None
            if ahead is not None and not ahead.begun:
                self._queue.remove(ahead)  # not begun: asked as the test asks it
                ahead = None
            if ahead is None:
                ahead = _Count(target, demanded=True)
                self._queue.insert(0, ahead)
            self._ahead.setdefault(target.site.nodeid, ahead)
            self._changed.notify_all()
        self._spawn()
        try:
            taken, key = ahead.future.result()
        except (BenchmarkError, BaseProblem):
            if ahead.demanded:
                raise
            taken, key = None, None  # a count ahead that failed: ask it as the test does
        if key == target.site.key and taken is not None:
            return taken
        with self._changed:
            asked = _Count(target, demanded=True)
            self._queue.insert(0, asked)
            self._changed.notify_all()
        return asked.future.result()[0]

    def _spawn(self) -> None:
        """Start the workers, one per counting process, at the first count."""
        if self._threads:
            return
        for run in self._runs:
            thread = threading.Thread(target=self._work, args=(run,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _next(self) -> _Count | None:
        """What a free counting process counts next: what a test asks, else the first test to
        come that nothing counted yet (``None``: closed)."""
        with self._changed:
            while not self._closed:
                count = self._queue.pop(0) if self._queue else self._to_come()
                if count is not None:
                    count.begun = True
                    self._ahead.setdefault(count.target.site.nodeid, count)
                    return count
                self._changed.wait()
            return None

    def _to_come(self) -> _Count | None:
        """A count of the first test to come, after the last one asked for, not yet counted."""
        template = self._template
        if template is None or len(self._runs) == 1:
            return None
        tests = list(self._upcoming())
        asked = [i for i, (nodeid, _) in enumerate(tests) if nodeid in self._ahead]
        for nodeid, path in tests[max(asked, default=-1) + 1 :]:
            if nodeid not in self._ahead:
                site = Site(nodeid, path, 0, ANY_KEY)
                return _Count(replace(template, site=site, replay=()), demanded=False)
        return None

    def _work(self, run: CountingRun) -> None:
        while (count := self._next()) is not None:
            try:
                count.future.set_result(self._start(run).take_one(count.target))
            except BaseException as exc:  # the asker raises it, or asks again
                count.future.set_exception(exc)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Stop the counting processes (``SIGSTOP``) while the block runs, and continue them
        after: a count in flight waits while a test's samples are timed. A process forked
        while they are stopped is stopped too."""
        stopped: list[int] = []
        try:
            for _ in range(2):  # again: one may have forked a count's process meanwhile
                for pid in [p for run in self._runs for p in run.processes()]:
                    if pid not in stopped and _signal(pid, signal.SIGSTOP):
                        stopped.append(pid)
            _until_stopped(stopped)
            yield
        finally:
            for pid in stopped:
                _signal(pid, signal.SIGCONT)

    def close(self) -> None:
        """End the counting processes; a count in flight ends with them."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        for run in self._runs:
            run.close()
        for thread in self._threads:
            thread.join(timeout=CLOSE_JOIN_S)


#: how long closing waits for a worker, whose process has just been ended
CLOSE_JOIN_S = 30.0


def processes() -> int:
    """How many counting processes a session runs: one per core it may use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def pools(
    start: Callable[[CountingRun], BaseSampler],
    upcoming: Callable[[], Sequence[tuple[str, str]]],
    worker: bool,
    against: AgainstRun | None,
) -> list[CountingPool]:
    """A session's counting processes: this checkout's, one per core (an xdist ``worker``'s:
    one), which count the tests to come while they wait; and the revision's gated against."""
    size = 1 if worker else processes()
    found = [CountingPool([CountingRun() for _ in range(size)], start, upcoming)]
    if against is not None:
        found.append(CountingPool([CountingRun(against)], start, list))
    return found


def header(xdist: bool) -> str:
    """How the session counts, for its header: by which Valgrind, with which kernels, in how
    many processes (``xdist``: one per pytest-xdist worker)."""
    try:
        version = valgrind_version(valgrind())
    except BaseProblem:
        return "throughput gated by instructions, but Valgrind is not installed (see below)"
    except InstructionsProblem as exc:
        return f"throughput gated by instructions, but {exc}"
    kernels = kernels_for(version).name
    if xdist:
        where = "one process per pytest-xdist worker"
    else:
        count = processes()
        where = f"{count} process{'' if count == 1 else 'es'}, one per core"
    return (
        f"throughput gated by instructions, counted under Valgrind {version} with the {kernels} "
        f"kernels in {where}; time is reported beside"
    )


@contextmanager
def held(pools: Sequence[CountingPool]) -> Iterator[None]:
    """Every pool's counting processes stopped while the block runs (``CountingPool.held``)."""
    with ExitStack() as stack:
        for pool in pools:
            stack.enter_context(pool.held())
        yield


def descendants(pid: int) -> list[int]:
    """The processes under ``pid``, children first, as /proc says now (none off Linux)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(0), [])
        found += children
        todo += children
    return found


#: how long stopping the counting processes may take to show in /proc
STOP_WAIT_S = 2.0


def _until_stopped(pids: Sequence[int]) -> None:
    """Wait until every one of ``pids`` is stopped (or ended): a signal lands when the process
    is next scheduled."""
    deadline = time.monotonic() + STOP_WAIT_S
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                break  # ended, or no /proc
            if state in ("T", "t", "Z", "X"):
                break
            time.sleep(0.001)


def _signal(pid: int, sent: int) -> bool:
    """Send ``sent`` to ``pid``; ``False`` where it has ended."""
    try:
        os.kill(pid, sent)
    except ProcessLookupError:
        return False
    return True
