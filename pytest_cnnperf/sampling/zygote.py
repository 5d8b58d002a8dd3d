"""The zygote: a pristine copy of the pytest process, forked at session start, that forks one
fresh process per sample.

It runs :func:`serve` until the pytest process closes its pipe: a self-check once (a forked
probe that runs a tiny parallel torch op, which hangs when the pytest process had already started
torch's thread pool, then on a GPU run starts CUDA on the measured device, which fails when the
pytest process had initialised CUDA before the session), then, for each request, one child per
job (the ranks of a data-parallel sample at once), waiting for them all and saying which failed
first.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .messages import JOB, ChildReport, Job, write_report

#: prctl(2)'s option: the signal a process gets when its parent ends
PR_SET_PDEATHSIG = 1
#: the CUDA driver's answer to a call that worked
CUDA_SUCCESS = 0
#: how long a forked probe may take to run a tiny parallel op before the zygote is declared unusable
PROBE_TIMEOUT_S = 5.0
#: how long it may then take to start CUDA on the measured device: creating a context takes
#: seconds without persistence mode, more with many GPUs (the driver starts every visible one)
CUDA_PROBE_TIMEOUT_S = 120.0
#: why forked processes cannot use CUDA, and the fix
POISONED = (
    "CUDA was initialised in the pytest process before the session started (usually by a "
    "conftest.py or plugin that called torch.cuda.is_available() or another CUDA function at "
    "import time, or imported a library that starts CUDA itself), and a process forked after "
    "that cannot use CUDA. Call torch.cuda.device_count() there instead (it asks NVML and leaves "
    "CUDA alone), or set PYTORCH_NVML_BASED_CUDA_CHECK=1, or move the call (or the import) into "
    "a test or fixture"
)
#: what torch raises in a process forked after its parent started CUDA without torch's fork
#: handler (another library, or C++ code, called cuInit): c10's device count on the driver's
#: initialisation error, or c10's check of any other CUDA call
DRIVER_STARTED_ERRORS = (
    "CUDA driver initialization failed, you might not have a CUDA gpu",
    "CUDA error: initialization error",
)
#: what the forked probe tells the zygote: the CPU part ran, CUDA started, or an error follows
_CPU_DONE, _DONE, _ERROR = b"C", b"K", b"E"
#: how long the other ranks get to report their own errors after one rank failed
FAILURE_GRACE_S = 10.0
#: modules a sample process would otherwise import for every sample (scipy is not one: only
#: the history's trend uses it, and its import under Valgrind is slow)
PRELOAD = (
    "torch",
    "torchvision",
    "pytest_cnnperf.measuring.sample",
    "pytest_cnnperf.measuring.environment",
)


def probe_torch(device: str, cpu_done: Callable[[], None], cuda_started: bool = False) -> None:
    """Work that hangs in a forked child when the parent already started torch's threads; then,
    after ``cpu_done()``, starting CUDA on ``device``, which fails in a forked child when the
    parent had initialised CUDA (``cuda_started``: the pytest process found so before forking,
    see :func:`cuda_driver_started`)."""
    import torch

    x = torch.ones(1 << 20)
    (x * 2).sum()
    torch.nn.functional.conv2d(torch.ones(8, 16, 32, 32), torch.ones(16, 16, 3, 3))
    cpu_done()
    if device.startswith("cuda"):
        if cuda_started or torch.cuda._is_in_bad_fork():  # torch's flag: its fork handler ran
            raise RuntimeError(POISONED)
        torch.cuda.set_device(device)
        torch.ones(1, device=device).add_(1)
        torch.cuda.synchronize(device)


def cuda_driver_started() -> bool:
    """Whether the CUDA driver was started (``cuInit``) in this process, which leaves every
    process forked from it unable to use CUDA. Its calls answer ``CUDA_ERROR_NOT_INITIALIZED``
    until then; this sees what torch's fork flag misses, a driver started by another library."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return False
    try:
        driver = ctypes.CDLL("libcuda.so.1")  # loading it starts nothing
        count = ctypes.c_int()
        return int(driver.cuDeviceGetCount(ctypes.byref(count))) == CUDA_SUCCESS
    except (OSError, AttributeError):  # no driver, or not NVIDIA's
        return False


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this (just forked) process when its parent ends, however it ends
    (Linux's ``PR_SET_PDEATHSIG``), and end now if the parent ``parent`` is gone already."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def serve(
    requests_fd: int,
    replies_fd: int,
    probe: Callable[[Callable[[], None]], None],
    run_child: Callable[[Job], None],
) -> None:
    """The zygote's loop: self-check once (``probe(cpu_done)``, see :func:`probe_torch`), then
    fork one process per job until the pytest process closes the pipe."""
    # the pytest process's handlers (an interrupt raised here, SIGTERM as an interrupt) are not
    # ours: the pytest process ends this process group when it stops
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    replies = os.fdopen(replies_fd, "w", encoding="utf-8", buffering=1)
    requests = os.fdopen(requests_fd, "r", encoding="utf-8")
    _detach_output()
    # preloading only saves time: a module that fails here (scipy 1.10's boost under Valgrind
    # raised SystemError) is left to the sample that needs it, whose report says why
    for module in PRELOAD:
        with contextlib.suppress(Exception):
            __import__(module)
    replies.write(json.dumps({"unusable": _probe(probe)}) + "\n")
    for line in requests:
        message = json.loads(line)
        jobs = [JOB.load(data) for data in message["jobs"]]
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
    process's capture files, nor read from the terminal (which stops a process outside its
    foreground process group)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _probe(probe: Callable[[Callable[[], None]], None]) -> str | None:
    """Run ``probe(cpu_done)`` in a forked child; ``None`` when it worked, else why forked
    processes cannot measure. A hang before ``cpu_done`` means an inherited thread pool that
    forked children cannot use (5 s); starting CUDA after it has a time limit of its own."""
    read, write = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read)

        def cpu_done() -> None:
            os.write(write, _CPU_DONE)

        try:
            die_with_parent(parent)
            probe(cpu_done)
            os.write(write, _DONE)
        except BaseException as exc:
            os.write(write, _ERROR + f"{type(exc).__name__}: {exc}".encode()[:4000])
        os._exit(0)
    os.close(write)
    try:
        return _probe_verdict(read)
    finally:
        os.close(read)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _read_until(read: int, deadline: float) -> bytes | None:
    """The next bytes from the pipe (``b""`` at its end), ``None`` when the deadline passed."""
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([read], [], [], left)[0]:
        return None
    return os.read(read, 4096)


def _probe_verdict(read: int) -> str | None:
    """What the probe's messages (``C``, then ``K`` or ``E`` and the error) say."""
    got = b""
    started = time.monotonic()
    while True:
        cpu_done = got[:1] == _CPU_DONE
        outcome = got[1:2] if cpu_done else got[:1]
        if outcome == _DONE:
            return None
        if outcome == _ERROR:
            break
        limit = PROBE_TIMEOUT_S + (CUDA_PROBE_TIMEOUT_S if cpu_done else 0.0)
        chunk = _read_until(read, started + limit)
        if chunk is None and not cpu_done:
            return (
                "a forked process hung in torch's thread pool: the pytest process ran torch "
                "operations before the session started (for example at import time in a "
                "conftest.py)"
            )
        if chunk is None:
            return (
                f"a forked process could not start CUDA within {CUDA_PROBE_TIMEOUT_S:.0f} s "
                "(is the GPU busy or in a bad state? Without persistence mode, nvidia-smi -pm 1, "
                "every process waits for the driver to start the GPU)"
            )
        if not chunk:
            return "a forked process ended while running a torch operation, without a word"
        got += chunk
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while (chunk := _read_until(read, deadline)) is not None and chunk:  # the whole error
        got += chunk
    error = got.split(_ERROR, 1)[1].decode(errors="replace")
    if POISONED in error or "Cannot re-initialize CUDA in forked subprocess" in error:
        return POISONED
    # torch's error stays in the message: a driver that cannot start at all says the same
    if any(text in error for text in DRIVER_STARTED_ERRORS):
        return f"{POISONED} (torch's error: {error.splitlines()[0]})"
    stage = "starting CUDA" if cpu_done else "a torch operation"
    return f"{stage} failed in a forked process: {error}"


def _shuffle_address_space() -> list[object]:
    """Move where this process's next allocations land (the mmap area and the heap) by a random
    number of pages: forked processes inherit their parent's address-space layout, and every
    sample would share one layout's speed, where fresh processes each have their own."""
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
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(parent)
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


@contextlib.contextmanager
def quiet_fork_warning() -> Iterator[None]:
    """Python 3.12 warns about fork in a process with threads (xdist's I/O thread, torch's
    idle helper); the zygote and its children touch none of those threads' state."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*use of fork\\(\\) may lead to deadlocks.*")
        yield
