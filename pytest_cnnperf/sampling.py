"""Where samples come from: fresh processes, or rounds inside the pytest process.

On a shared machine the same code's median step time differs by tens of percent from one process
to the next, and the samples of one process cannot show that. So by default every sample is taken
in a fresh process, forked from a *zygote*: a copy of the pytest process made at session start,
before any test (or any torch thread pool) ran. For each sample the zygote forks a child; the
child collects the test's module, runs the test from its beginning, answers the benchmarks before
the wanted one with the parent's results, measures the wanted one, writes its sample to a file and
exits. The test's own code thus rebuilds the model in every sample process; nothing is pickled.

Where fork is unsafe (no ``os.fork``, or the pytest process already started torch's OpenMP pool,
which a forked child cannot use) or ``--cnnperf-inprocess`` is given, samples are rounds in the
pytest process itself, and results say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import select
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from . import serde
from .policy import TimingPolicy
from .results import BenchmarkResult, Environment, Sample
from .workload import Workload

#: how long a forked probe may take to run a tiny parallel op before the zygote is declared unusable
PROBE_TIMEOUT_S = 5.0
#: how long the other ranks get to report their own errors after one rank failed
FAILURE_GRACE_S = 10.0
#: modules a sample process would otherwise import for every sample
PRELOAD = (
    "torch",
    "torchvision",
    "pytest_cnnperf.sample",
    "pytest_cnnperf.environment",
    "scipy.stats",
)


class BenchmarkError(Exception):
    """A benchmark could not be measured; the message says what was being measured and why."""


@dataclass(frozen=True)
class Measured:
    """What one sample process sends back."""

    sample: Sample
    environment: Environment


@dataclass(frozen=True)
class ChildReport:
    measured: Measured | None = None
    error: str | None = None
    rank: int = 0
    #: when the error happened (``time.time()``): among ranks, the earliest is the cause
    failed_at: float | None = None


@dataclass(frozen=True)
class Job:
    """What a sample process is asked to do."""

    nodeid: str
    path: str
    index: int
    key: str
    replay: tuple[BenchmarkResult, ...]
    out: str
    rank: int = 0
    world_size: int = 1
    rendezvous: str | None = None
    parent_pid: int = 0
    memory: bool = True


@dataclass(frozen=True)
class Target:
    """The benchmark call a sampler measures."""

    nodeid: str
    path: str
    index: int
    key: str
    replay: tuple[BenchmarkResult, ...]
    #: ``build(device, world_size)``: the workload, data-parallel over ``world_size`` ranks
    build: Callable[[Any, int], Workload]
    measure: MeasureSample
    timing: TimingPolicy
    world_size: int = 1
    #: how many of the samples taken (the first ones) also measure peak memory
    memory_samples: int = 0


class MeasureSample(Protocol):
    """Measures one sample of a built workload (and its environment)."""

    def __call__(
        self, workload: Workload, *, in_process: bool, timing: TimingPolicy, memory: bool
    ) -> Measured: ...


class Sampler(Protocol):
    in_process: bool

    def take(self, target: Target, count: int) -> list[Measured]:
        """``count`` samples of ``target``; raises ``BenchmarkError``."""


class InProcessSampler:
    """Samples as rounds inside this process, with torch's global state restored afterwards."""

    in_process = True

    def __init__(
        self, device: Any, describe: Callable[[BaseException], str], reason: str | None = None
    ) -> None:
        self.device = device
        self.describe = describe
        self.reason = reason

    def take(self, target: Target, count: int) -> list[Measured]:
        from . import torchstate

        if target.world_size != 1:
            raise BenchmarkError(
                f"world_size={target.world_size} needs sample processes, which are unavailable "
                f"here ({self.reason or 'measuring in-process'}); its ranks run in processes of "
                "their own"
            )
        with torchstate.preserved():
            try:
                workload = target.build(self.device, 1)
                return [
                    target.measure(
                        workload,
                        in_process=True,
                        timing=target.timing,
                        memory=i < target.memory_samples,
                    )
                    for i in range(count)
                ]
            except Exception as exc:
                raise BenchmarkError(self.describe(exc)) from exc


# ---- the zygote: a pristine copy of the pytest process that forks sample processes ----


class Zygote:
    """Handle, in the pytest process, of the forked zygote."""

    in_process = False

    def __init__(self, pid: int, requests: int, replies: int, workdir: Path) -> None:
        self.pid = pid
        self._requests = requests
        self._replies = os.fdopen(replies, "r", encoding="utf-8")
        self._workdir = workdir
        self._counter = 0
        self._ready: bool | None = None
        self.unusable: str | None = None

    @classmethod
    def fork(cls, serve: Callable[[int, int], None]) -> Zygote:
        """Fork the zygote; ``serve(requests_fd, replies_fd)`` runs in it and never returns."""
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        workdir = Path(tempfile.mkdtemp(prefix="pytest-cnnperf-"))
        with _quiet_fork_warning():
            pid = os.fork()
        if pid == 0:  # the zygote
            os.close(requests_write)
            os.close(replies_read)
            try:
                serve(requests_read, replies_write)
            finally:
                os._exit(0)
        os.close(requests_read)
        os.close(replies_write)
        return cls(pid, requests_write, replies_read, workdir)

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._requests, (json.dumps(message) + "\n").encode())

    def _receive(self, timeout: float | None) -> dict[str, Any] | None:
        if timeout is not None:
            ready, _, _ = select.select([self._replies], [], [], timeout)
            if not ready:
                return None
        line = self._replies.readline()
        if not line:
            raise BenchmarkError("the sample-process server ended unexpectedly")
        message: dict[str, Any] = json.loads(line)
        return message

    def wait_ready(self) -> bool:
        """Wait for the zygote's self-check; ``False`` (with ``unusable`` set) if it failed."""
        if self._ready is None:
            message = self._receive(timeout=PROBE_TIMEOUT_S + 120)
            if message is None:
                self.unusable = "the sample-process server did not start in time"
                self._ready = False
            else:
                self.unusable = message.get("unusable")
                self._ready = self.unusable is None
        return self._ready

    def run(self, jobs: Sequence[Job], timeout: float) -> list[ChildReport]:
        """Run ``jobs`` in one fresh process each (all at once: the ranks of one step) and
        return their reports, the one that failed first first; processes that outlive
        ``timeout`` are killed."""
        self._send({"op": "run", "jobs": [serde.to_data(job) for job in jobs]})
        started = self._receive(timeout=60)
        if started is None:
            raise BenchmarkError("the sample-process server did not answer")
        pids: list[int] = started["pids"]
        finished = self._receive(timeout=timeout)
        if finished is None:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._receive(timeout=60)
            error = f"the sample process took longer than {timeout:.0f} s and was killed"
            return [ChildReport(error=error, rank=job.rank) for job in jobs]
        reports = [
            _read_report(Path(job.out), status, job.rank)
            for job, status in zip(jobs, finished["statuses"], strict=True)
        ]
        first = finished["first_failure"]
        if first is not None:  # the process that failed first holds the cause: put it first
            reports.insert(0, reports.pop(first))
        return reports

    def new_path(self, suffix: str) -> str:
        """A fresh file name in the zygote's working folder."""
        self._counter += 1
        return str(self._workdir / f"sample-{self._counter}{suffix}")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._requests)
        with contextlib.suppress(OSError):
            self._replies.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        for path in self._workdir.glob("*"):
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self._workdir.rmdir()


#: the error of a rank stopped because another one failed
STOPPED = "stopped because another rank failed"


def _read_report(path: Path, status: int | None, rank: int) -> ChildReport:
    if status is None:
        path.unlink(missing_ok=True)
        path.with_suffix(".log").unlink(missing_ok=True)
        return ChildReport(error=STOPPED, rank=rank)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        report = serde.from_data(ChildReport, data)
    except (OSError, ValueError):
        log = _tail(path.with_suffix(".log"))
        how = (
            f"was killed by signal {-status}"
            if status < 0
            else f"exited with status {status} without a report"
        )
        report = ChildReport(
            error=f"the sample process {how}" + (f"; its last output:\n{log}" if log else "")
        )
    finally:
        path.unlink(missing_ok=True)
        path.with_suffix(".log").unlink(missing_ok=True)
    return dataclasses.replace(report, rank=rank)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def _quiet_fork_warning() -> Iterator[None]:
    """Python 3.12 warns about fork in a process with threads (xdist's I/O thread, torch's
    idle helper); the zygote and its children touch none of those threads' state."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*use of fork\\(\\) may lead to deadlocks.*")
        yield


class ProcessSampler:
    """Samples, each in a fresh process forked by the zygote."""

    in_process = False

    def __init__(self, zygote: Zygote, timeout: float) -> None:
        self.zygote = zygote
        self.timeout = timeout

    def take(self, target: Target, count: int) -> list[Measured]:
        measured = []
        for i in range(count):
            # ranks of a data-parallel step meet through a file, so no port is picked or leaked
            rendezvous = self.zygote.new_path(".store") if target.world_size > 1 else None
            jobs = [
                Job(
                    nodeid=target.nodeid,
                    path=target.path,
                    index=target.index,
                    key=target.key,
                    replay=target.replay,
                    out=self.zygote.new_path(".json"),
                    rank=rank,
                    world_size=target.world_size,
                    rendezvous=rendezvous,
                    parent_pid=os.getpid(),
                    memory=i < target.memory_samples,
                )
                for rank in range(target.world_size)
            ]
            reports = self.zygote.run(jobs, self.timeout)
            errors = [r for r in reports if r.error]
            if errors:
                failed = cause(errors)
                ranks = target.world_size
                where = f"rank {failed.rank} of {ranks}: " if ranks > 1 else ""
                raise BenchmarkError(where + str(failed.error))
            first = next(r.measured for r in reports if r.rank == 0)
            if first is None:
                raise BenchmarkError("the sample process sent no measurement")
            measured.append(first)
        return measured


def cause(errors: list[ChildReport]) -> ChildReport:
    """Of the failed processes of one sample (the first to exit first), the one whose error
    caused the others'. A process that died without reporting its error (a crash, a kill) died
    the moment it failed, so when the first to exit did, it is the cause; otherwise the earliest
    reported failure is, since the ranks it left waiting exit in any order."""
    first = errors[0]
    if first.failed_at is None:
        return first
    return min((e for e in errors if e.failed_at is not None), key=lambda e: e.failed_at or 0.0)


# ---- inside the zygote ----


def serve(
    requests_fd: int,
    replies_fd: int,
    probe: Callable[[], None],
    run_child: Callable[[Job], None],
) -> None:
    """The zygote's loop: self-check once, then fork one process per job until the pytest
    process closes the pipe."""
    replies = os.fdopen(replies_fd, "w", encoding="utf-8", buffering=1)
    requests = os.fdopen(requests_fd, "r", encoding="utf-8")
    _detach_output()
    for module in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(module)
    replies.write(json.dumps({"unusable": _probe(probe)}) + "\n")
    for line in requests:
        message = json.loads(line)
        jobs = [serde.from_data(Job, data) for data in message["jobs"]]
        pids = [_fork_child(job, run_child, (requests_fd, replies_fd)) for job in jobs]
        replies.write(json.dumps({"pids": pids}) + "\n")
        replies.write(json.dumps(_wait_all(pids)) + "\n")


def _wait_all(pids: list[int]) -> dict[str, Any]:
    """Exit codes of the processes, and which failed first. When one fails (a rank of a
    data-parallel step), the others would wait for it forever: they get a grace period to
    report their own errors, then are stopped (``None``)."""
    statuses: dict[int, int | None] = {}
    first: int | None = None
    deadline = math.inf
    while len(statuses) < len(pids):
        pid, status = os.waitpid(-1, os.WNOHANG if first is not None else 0)
        if pid == 0:  # others still running after a failure
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            for other in pids:
                if other not in statuses:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(other, signal.SIGKILL)
                    os.waitpid(other, 0)
                    statuses[other] = None
            break
        if pid not in pids:
            continue
        statuses[pid] = os.waitstatus_to_exitcode(status)
        if statuses[pid] != 0 and first is None:
            first = pids.index(pid)
            deadline = time.monotonic() + FAILURE_GRACE_S
    return {"statuses": [statuses[pid] for pid in pids], "first_failure": first}


def _detach_output() -> None:
    """Nothing from the zygote or its children may reach the user's terminal or the pytest
    process's capture files."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def _probe(probe: Callable[[], None]) -> str | None:
    """Run ``probe`` in a forked child: a hang means the zygote inherited a thread pool that
    forked children cannot use."""
    pid = os.fork()
    if pid == 0:
        try:
            probe()
        except BaseException:
            os._exit(1)
        os._exit(0)
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.waitstatus_to_exitcode(status) == 0:
                return None
            return "a torch operation failed in a forked process"
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return (
        "a forked process hung in torch's thread pool: the pytest process ran torch operations "
        "before the session started (for example at import time in a conftest.py)"
    )


def _shuffle_address_space() -> list[object]:
    """Move where this process's next allocations land by a random number of pages.

    Forked processes inherit their parent's address-space layout, so without this every sample
    of a session would place its tensors at the same addresses and share one layout's speed:
    measured here, forks of one process agreed within 2% while fresh processes spread over 15%
    (a ResNet-18 step at 37 or 43 ms depending on the layout). Shifting the mmap area and the
    heap by random amounts gives each sample a layout of its own, as a fresh process would have.
    """
    import ctypes
    import mmap
    import random

    rng = random.SystemRandom()
    keep: list[object] = [mmap.mmap(-1, rng.randrange(1, 1024) * mmap.PAGESIZE)]
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        keep.append(libc.malloc(rng.randrange(16, 1 << 17)))
    return keep


def _fork_child(job: Job, run_child: Callable[[Job], None], pipes: tuple[int, int]) -> int:
    pid = os.fork()
    if pid == 0:
        for fd in pipes:
            os.close(fd)
        _layout = _shuffle_address_space()
        log = os.open(
            str(Path(job.out).with_suffix(".log")), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
        )
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        try:
            run_child(job)
        except BaseException:
            write_report(job, ChildReport(error=traceback.format_exc()))
            os._exit(1)
        os._exit(3)
    return pid


def write_report(job: Job, report: ChildReport) -> None:
    path = Path(job.out)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(serde.to_data(report)), encoding="utf-8")
    os.replace(temporary, path)
