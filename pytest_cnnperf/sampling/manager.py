"""Where samples come from, as the pytest process sees it: fresh processes, or rounds inside
the pytest process.

On a shared machine the same code's median step time differs by tens of percent from one process
to the next, and the samples of one process cannot show that. So by default every sample is taken
in a fresh process, forked from a *zygote* (``sampling.zygote``): a copy of the pytest process
made at session start, before any test (or any torch thread pool) ran. For each sample the zygote
forks a child (``sampling.child``) that runs the test from its beginning, answers the benchmarks
before the wanted one with the parent's results, measures the wanted one, writes its sample to a
file and exits. The test's own code thus rebuilds the model in every sample process; nothing is
pickled.

Where fork is unsafe (no ``os.fork``, or the pytest process already started torch's OpenMP pool,
which a forked child cannot use) or ``--cnnperf-inprocess`` is given, samples are rounds in the
pytest process itself, and results say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..measuring.sample import SamplePlan
from ..measuring.workload import Workload
from ..model import Result
from ..store import leftovers
from .messages import (
    JOB,
    STOPPED,
    BenchmarkError,
    ChildReport,
    Job,
    Site,
    TakenSample,
    cause,
    describe_error,
    read_report,
)
from .zygote import (
    CUDA_PROBE_TIMEOUT_S,
    PROBE_TIMEOUT_S,
    cuda_driver_started,
    die_with_parent,
    probe_torch,
    quiet_fork_warning,
    serve,
)

#: the sample processes' working folders in the temporary directory: pytest-cnnperf-<pid>-...
WORKDIR_PREFIX = "pytest-cnnperf-"


@dataclass(frozen=True)
class Target:
    """The benchmark call a sampler measures."""

    site: Site
    #: the results of the test's benchmark calls before this one
    replay: tuple[Result, ...]
    #: ``build(device, world_size)``: the workload, data-parallel over ``world_size`` ranks
    build: Callable[[Any, int], Workload]
    plan: SamplePlan
    world_size: int = 1
    #: how many of the samples taken (the first ones) also measure peak memory
    memory_samples: int = 0
    #: how many of the samples taken (the first ones) also count the step's FLOPs and
    #: operators and compute its first steps' numbers: one, as they do not vary; none when more
    #: samples are taken of a benchmark that has them
    counted_samples: int = 1
    #: how many (the first ones) also profile the step's operators, and where to write that
    #: profile's trace
    profile_samples: int = 0
    trace: str | None = None


class Sampler(Protocol):
    in_process: bool

    def replayed(self, site: Site) -> Result | None:
        """The result to answer a benchmark call with without measuring it (in a sample
        process: the calls before the one it measures), or ``None``."""
        return None

    def take(self, target: Target, count: int) -> list[TakenSample]:
        """``count`` samples of ``target``; raises ``BenchmarkError``."""


class InProcessSampler(Sampler):
    """Samples as rounds inside this process, with torch's global state restored afterwards."""

    in_process = True

    def __init__(self, device: Any, reason: str | None = None) -> None:
        self.device = device
        self.reason = reason

    def take(self, target: Target, count: int) -> list[TakenSample]:
        from ..measuring import torchstate
        from ..measuring.sample import take_sample

        if target.world_size != 1:
            raise BenchmarkError(
                f"world_size={target.world_size} needs sample processes, which are unavailable "
                f"here ({self.reason or 'measuring in-process'}); its ranks run in processes of "
                "their own"
            )
        with torchstate.preserved(self.device):
            workload = None
            try:
                workload = target.build(self.device, 1)
                return [
                    TakenSample(
                        *take_sample(
                            workload,
                            self.device,
                            target.plan,
                            memory_pass=i < target.memory_samples,
                            in_process=True,
                            count_pass=i < target.counted_samples,
                            profile_pass=i < target.profile_samples,
                            trace=target.trace,
                        )
                    )
                    for i in range(count)
                ]
            except Exception as exc:
                raise BenchmarkError(describe_error(exc)) from exc
            finally:
                if workload is not None and workload.loop is not None:
                    workload.loop.close()


#: the key of the line a zygote writes when it ends on an error (its output goes nowhere)
ENDED = "ended"


class Zygote:
    """Handle, in the pytest process, of the forked zygote.

    The zygote leads a process group of its own, which its sample processes join: the terminal's
    Ctrl-C reaches the pytest process alone, which then ends the whole group at once
    (:meth:`kill`). Should the pytest process die without doing so (SIGKILL), the kernel kills
    the zygote, and the zygote's death its children (``zygote.die_with_parent``)."""

    def __init__(self, pid: int, requests: int, replies: int, workdir: Path) -> None:
        self.pid = pid
        self._requests = requests
        # unbuffered: a line read must not take the next one out of the pipe, where select()
        # waits for it
        self._replies = os.fdopen(replies, "rb", buffering=0)
        self._workdir = workdir
        self._counter = 0
        self._ready: bool | None = None
        self._reaped = False
        self.unusable: str | None = None
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the zygote does itself, whichever runs first
        try:
            self._group = os.getpgid(pid) == pid
        except OSError:
            self._group = False

    @classmethod
    def fork(cls, serve_: Callable[[int, int], None]) -> Zygote:
        """Fork the zygote; ``serve_(requests_fd, replies_fd)`` runs in it and never returns."""
        temporary = Path(tempfile.gettempdir())
        leftovers.remove_folders_of_dead(temporary, WORKDIR_PREFIX)
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        parent = os.getpid()
        workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{parent}-"))
        with quiet_fork_warning():
            pid = os.fork()
        if pid == 0:  # the zygote
            try:
                os.setpgid(0, 0)
                die_with_parent(parent)
                os.close(requests_write)
                os.close(replies_read)
                serve_(requests_read, replies_write)
            except BaseException as exc:  # its output goes nowhere: say why on the pipe
                with contextlib.suppress(OSError):
                    why = {ENDED: f"{type(exc).__name__}: {exc}"}
                    os.write(replies_write, (json.dumps(why) + "\n").encode())
            finally:
                os._exit(0)
        os.close(requests_read)
        os.close(replies_write)
        return cls(pid, requests_write, replies_read, workdir)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            os.write(self._requests, (json.dumps(message) + "\n").encode())
        except OSError:  # it died (the out-of-memory killer, a kill)
            raise BenchmarkError("the sample-process server ended unexpectedly") from None

    def receive(self, timeout: float) -> dict[str, Any] | None:
        ready, _, _ = select.select([self._replies], [], [], timeout)
        if not ready:
            return None
        line = self._replies.readline().decode("utf-8")
        if not line:
            raise BenchmarkError("the sample-process server ended unexpectedly")
        message: dict[str, Any] = json.loads(line)
        if ENDED in message:
            raise BenchmarkError(f"the sample-process server ended: {message[ENDED]}")
        return message

    def wait_ready(self) -> bool:
        """Wait for the zygote's self-check; ``False`` (with ``unusable`` set) if it failed."""
        if self._ready is None:
            try:
                message = self.receive(timeout=PROBE_TIMEOUT_S + CUDA_PROBE_TIMEOUT_S + 120)
            except BenchmarkError as exc:
                message = {"unusable": str(exc)}
            if message is None:
                message = {"unusable": "the sample-process server did not start in time"}
            self.unusable = message.get("unusable")
            self._ready = self.unusable is None
        return self._ready

    def run(self, jobs: Sequence[Job], timeout: float) -> list[ChildReport]:
        """Run ``jobs`` in one fresh process each (all at once: the ranks of one step) and
        return their reports, the one that failed first first; processes that outlive
        ``timeout`` are killed."""
        self._send({"op": "run", "jobs": [JOB.dump(job) for job in jobs]})
        started = self.receive(timeout=60)
        if started is None:
            raise BenchmarkError("the sample-process server did not answer")
        pids: list[int] = started["pids"]
        finished = self.receive(timeout=timeout)
        if finished is None:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.receive(timeout=60)
            error = (
                f"the sample process took longer than {timeout:g} s (cnnperf_sample_timeout) "
                "and was killed; if it needs longer, raise cnnperf_sample_timeout in the ini file"
            )
            return [ChildReport(error=error, rank=job.rank) for job in jobs]
        reports = [
            _collect_report(Path(job.out), status, job.rank)
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

    def relay(self, requests_fd: int, replies_fd: int) -> None:
        """Pass another process's requests (lines on ``requests_fd``) to this zygote and its
        replies back (on ``replies_fd``), until that process closes its end: a revision gated
        against takes samples for the head this way (``revision``)."""
        incoming = os.fdopen(requests_fd, "rb", buffering=0)
        while True:
            ready, _, _ = select.select([incoming, self._replies], [], [])
            if incoming in ready:
                line = incoming.readline()
                if not line:
                    return
                os.write(self._requests, line)
            if self._replies in ready:
                reply = self._replies.readline()
                if not reply:
                    return
                os.write(replies_fd, reply)

    def kill(self) -> None:
        """End the zygote and every process it started, at once (safe in a signal handler)."""
        if self._reaped:  # its id may belong to another process by now
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self._group:
                os.killpg(self.pid, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def close(self, grace: float = 0.0) -> None:
        """End the zygote and its processes, and remove their files; ``grace``: seconds it
        may take to end on its own once its pipe is closed, before it is killed."""
        with contextlib.suppress(OSError):
            os.close(self._requests)
        with contextlib.suppress(OSError):
            self._replies.close()
        deadline = time.monotonic() + grace
        while not self._reaped and time.monotonic() < deadline:
            try:
                self._reaped = os.waitpid(self.pid, os.WNOHANG)[0] == self.pid
            except ChildProcessError:
                self._reaped = True
            if not self._reaped:
                time.sleep(0.05)
        self.kill()
        with contextlib.suppress(ChildProcessError):
            if not self._reaped:
                os.waitpid(self.pid, 0)
        self._reaped = True
        shutil.rmtree(self._workdir, ignore_errors=True)


def _collect_report(path: Path, status: int | None, rank: int) -> ChildReport:
    try:
        if status is None:
            return ChildReport(error=STOPPED, rank=rank)
        try:
            report = read_report(path)
        except (OSError, ValueError):
            log = tail(path.with_suffix(".log"), 20)
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


def tail(log: Path, lines: int) -> str:
    """The last ``lines`` lines of a process's output file (none where it cannot be read)."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class ProcessSampler(Sampler):
    """Samples, each in a fresh process forked by the zygote."""

    in_process = False

    def __init__(self, zygote: Zygote, timeout: float) -> None:
        self.zygote = zygote
        self.timeout = timeout

    def job(self, target: Target, i: int, rank: int, rendezvous: str | None) -> Job:
        """The job of rank ``rank`` of the ``i``-th sample of ``target``."""
        return Job(
            site=target.site,
            replay=target.replay,
            out=self.zygote.new_path(".json"),
            rank=rank,
            world_size=target.world_size,
            rendezvous=rendezvous,
            parent_pid=os.getpid(),
            memory=i < target.memory_samples,
            counted=i < target.counted_samples,
            profile=i < target.profile_samples,
        )

    def take(self, target: Target, count: int) -> list[TakenSample]:
        return [self.take_one(target, i)[0] for i in range(count)]

    def take_one(self, target: Target, i: int = 0) -> tuple[TakenSample, str | None]:
        """The ``i``-th sample of ``target``, and the key of the call it measured (with
        ``ANY_KEY``, the test's call at the site's index, whichever it is)."""
        # ranks of a data-parallel step meet through a file, so no port is picked or leaked
        rendezvous = self.zygote.new_path(".store") if target.world_size > 1 else None
        jobs = [self.job(target, i, rank, rendezvous) for rank in range(target.world_size)]
        reports = self.zygote.run(jobs, self.timeout)
        errors = [r for r in reports if r.error]
        if errors:
            failed = cause(errors)
            ranks = target.world_size
            where = f"rank {failed.rank} of {ranks}: " if ranks > 1 else ""
            raise BenchmarkError(where + str(failed.error), failed.problem)
        first = next(r for r in reports if r.rank == 0)
        if first.taken is None:
            raise BenchmarkError("the sample process sent no measurement")
        return first.taken, first.key


class Sampling:
    """The session's source of samples: the zygote, forked when the session starts, and the
    sampler chosen when the first benchmark runs (or, in a sample process, its own)."""

    def __init__(self, device: str, in_process: bool, timeout_s: float) -> None:
        self.device = device
        self.in_process = in_process
        self.timeout_s = timeout_s
        self.zygote: Zygote | None = None
        self._sampler: Sampler | None = None
        #: torch runs one thread in this process (the counting process): no thread pool for
        #: a forked child to inherit, so the zygote's probe has nothing to find
        self.one_thread = False

    def start(self, run_child: Callable[[Job], None]) -> str | None:
        """Fork the zygote, unless samples are to be taken in-process; a warning when it
        cannot be forked. ``run_child(job)`` runs in each sample process."""
        if self.in_process:
            return None
        if not hasattr(os, "fork"):
            return "this platform cannot fork, so samples are taken in-process"
        device = self.device
        # asked here: in a process forked after cuInit, the driver answers as if never started
        started = device.startswith("cuda") and cuda_driver_started()

        def probe(done: Callable[[], None]) -> None:
            if self.one_thread:  # under Valgrind the probe alone would take seconds
                done()
            else:
                probe_torch(device, done, started)

        def serve_(requests: int, replies: int) -> None:
            serve(requests, replies, probe, run_child)

        self.zygote = Zygote.fork(serve_)
        return None

    def use(self, sampler: Sampler) -> None:
        self._sampler = sampler

    def sampler(self) -> tuple[Sampler, str | None]:
        """The sampler (chosen once, when the first benchmark runs), and a warning the first
        time when samples must be taken in-process against the user's wish."""
        if self._sampler is not None:
            return self._sampler, None
        zygote = self.zygote
        if zygote is not None and zygote.wait_ready():
            self._sampler = ProcessSampler(zygote, timeout=self.timeout_s)
            return self._sampler, None
        reason = (
            None
            if self.in_process
            else (zygote.unusable if zygote else "no sample processes could be started")
        )
        import torch

        self._sampler = InProcessSampler(torch.device(self.device), reason)
        if not reason:
            return self._sampler, None
        return self._sampler, (
            f"samples were taken inside the pytest process because {reason}; they then share "
            "one process's noise, so verdicts are less certain"
        )

    def close(self) -> None:
        """End the sample processes and remove their files (again: nothing)."""
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.close()
