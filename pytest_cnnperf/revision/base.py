"""The revision gated against, as the head's pytest process sees it: a pytest process of its own
in the revision's worktree, with this plugin and the head's settings, that collects the tests
there, forks its own zygote, and takes the samples the head asks for.

A copy of the head's process could not do this: by the time it could be forked, the head's
conftest, test modules and project package are imported. The base process is started with the
same interpreter, the same torch threads and devices, the ``cnnperf_*`` ini values of the head
(``-o``: the revision's ini file does not set them), its paths mapped into the worktree; it
speaks its zygote's protocol (``protocol``), so that :class:`~sampling.manager.Zygote` in this
process drives it as it drives the head's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import Against
from ..sampling.manager import WORKDIR_PREFIX, ProcessSampler, Target, Zygote, tail
from ..sampling.messages import BenchmarkError, Job, TakenSample
from .git import Worktree
from .protocol import ENV, HANDSHAKE, ORDER, Handshake, Order
from .pytest_run import pytest_command

#: how long the base process may take to start, import torch and collect the tests
HANDSHAKE_TIMEOUT_S = 300.0
#: the lines of its output a failure shows
LOG_LINES = 30
#: how long it may take to end on its own, cleaning up, once the head is done with it
CLOSE_GRACE_S = 10.0
#: how long a process that did not start is waited for, for its exit status
EXIT_WAIT_S = 2.0


class BaseProblem(Exception):
    """The revision's side could not be started or used; the message says why and what to do."""


class BaseSampler(ProcessSampler):
    """Samples of the revision's side: the head's jobs, with the test's file in the worktree
    and the head's plan (the revision's own markers and ini do not decide how it is measured)."""

    def __init__(self, zygote: Zygote, timeout: float, worktree: Worktree) -> None:
        super().__init__(zygote, timeout)
        self.worktree = worktree

    def job(self, target: Target, i: int, rank: int, rendezvous: str | None) -> Job:
        job = super().job(target, i, rank, rendezvous)
        path = self.worktree.to_worktree(Path(target.site.path))
        site = dataclasses.replace(job.site, path=str(path) if path else target.site.path)
        return dataclasses.replace(job, site=site, plan=target.plan)

    def take_one(self, target: Target, i: int = 0) -> tuple[TakenSample, str | None]:
        try:
            return super().take_one(target, i)
        except BenchmarkError as exc:
            if exc.problem is not None:
                raise
            where = self.worktree.revision
            raise BenchmarkError(f"at {where}: {exc}") from None


@dataclasses.dataclass(frozen=True)
class Launch:
    """How the base process is started: its command line, folder, and what its environment
    adds to this process's."""

    command: tuple[str, ...]
    cwd: Path
    env: dict[str, str] = dataclasses.field(default_factory=dict)


def launch(
    config: Any,
    worktree: Worktree,
    device: str,
    cudnn: str | None,
    passed: Sequence[str],
) -> Launch | None:
    """The base process's command line, or ``None`` when none of the paths pytest was given
    exists at the revision (every benchmark is then new). ``config``: the head's pytest
    config; ``passed``: the options it passes on (the head's settings, not the revision's).
    Under ``--pyargs`` the modules are passed as given: Python finds them, at the revision
    too (the leak check says where from)."""
    pyargs = bool(getattr(config.option, "pyargs", False))
    paths = [str(arg) for arg in config.args] if pyargs else []
    for arg in () if pyargs else config.args:
        part = Path(str(arg).split("::", 1)[0])
        origin = config.invocation_params.dir if _from_command_line(config) else config.rootpath
        mapped = worktree.to_worktree(part if part.is_absolute() else Path(origin) / part)
        if mapped is not None and mapped.exists() and str(mapped) not in paths:
            paths.append(str(mapped))
    if not paths:
        return None
    cwd = worktree.to_worktree(Path(config.invocation_params.dir))
    if cwd is None or not cwd.is_dir():
        cwd = worktree.path
    rootdir = worktree.to_worktree(Path(config.rootpath)) or worktree.path
    command = pytest_command(
        f"--cnnperf-device={device}",
        f"--rootdir={rootdir}",
        f"--import-mode={config.option.importmode}",
        start=_as_started(),
    )
    inifile = worktree.to_worktree(Path(config.inipath)) if config.inipath else None
    if inifile is not None and inifile.exists():
        command += ["-c", str(inifile)]
    if cudnn:
        command.append(f"--cudnn={cudnn}")
    if pyargs:
        command.append("--pyargs")
    command += passed
    if config.pluginmanager.hasplugin("xdist"):
        command += ["-n", "0"]  # one process: the head's worker (or the head) drives it
    return Launch((*command, *paths), cwd)


#: Popen's arguments that start a process in a new process group of the same session
_OWN_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
)

#: pytest started as the ``pytest`` command starts it: the current folder not on ``sys.path``
AS_COMMAND = "import sys; del sys.path[0]; import pytest; sys.exit(pytest.console_main())"


def _as_started() -> tuple[str, ...]:
    """How to start pytest as the head was started: ``python -m pytest`` puts the current
    folder first on ``sys.path`` (the worktree's, on the revision's side), the ``pytest``
    command does not."""
    if Path(sys.argv[0]).parts[-2:] == ("pytest", "__main__.py"):
        return ("-m", "pytest")
    return ("-c", AS_COMMAND)


def _from_command_line(config: Any) -> bool:
    """Whether pytest's args came from the command line (else from ``testpaths``, which are
    relative to the rootdir)."""
    source = getattr(config, "args_source", None)
    return source is None or getattr(source, "name", "") in ("ARGS", "INVOCATION_DIR")


@dataclasses.dataclass(eq=False)
class BaseSide:
    """The revision's pytest process, its handshake, and the sampler that drives it."""

    against: Against
    worktree: Worktree
    option: str
    _process: subprocess.Popen[bytes] | None
    _zygote: Zygote | None
    _log: Path | None
    _handshake: Handshake | None = None
    _sampler: BaseSampler | None = None

    @classmethod
    def start(
        cls,
        against: Against,
        worktree: Worktree,
        option: str,
        how: Launch | None,
        threads: int | None,
    ) -> BaseSide:
        """Start the base process (``how`` ``None``: there is nothing to start)."""
        if how is None:
            return cls(against, worktree, option, None, None, None)
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-base-"))
        log = workdir / "base.log"
        order = Order(
            requests_fd=requests_read,
            replies_fd=replies_write,
            head_pid=os.getpid(),
            head_top=str(worktree.top),
            worktree=str(worktree.path),
            option=option,
            threads=threads,
        )
        with open(log, "wb") as output:
            process = subprocess.Popen(
                how.command,
                cwd=how.cwd,
                env={**os.environ, **how.env, ENV: json.dumps(ORDER.dump(order))},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=(requests_read, replies_write),
                # a process group of its own (the head's Ctrl-C is the head's to pass on), in
                # the head's session: Linux shares the CPU fairly between sessions, so a new
                # one would give the revision's samples another share than the head's
                **_OWN_GROUP,
            )
        os.close(requests_read)
        os.close(replies_write)
        zygote = Zygote(process.pid, requests_write, replies_read, workdir)
        return cls(against, worktree, option, process, zygote, log)

    def handshake(self) -> Handshake:
        """What the base process collected (waits for it, once); ``BaseProblem`` when it
        failed to start."""
        if self._handshake is not None:
            return self._handshake
        if self._zygote is None:
            self._handshake = Handshake(plugin="")
            return self._handshake
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        message = None
        while message is None and time.monotonic() < deadline:
            try:
                message = self._zygote.receive(timeout=1.0)
            except BenchmarkError:  # it exited
                break
            if message is None and self._exited():
                break
        if message is None:
            raise BaseProblem(self._failed("did not start"))
        self._handshake = handshake = HANDSHAKE.load(message)
        import pytest_cnnperf

        ours = str(Path(pytest_cnnperf.__file__).resolve())
        if handshake.plugin and str(Path(handshake.plugin).resolve()) != ours:
            raise BaseProblem(
                f"{self.option}: the revision's side loaded pytest-cnnperf from "
                f"{handshake.plugin}, not this run's {ours}: the comparison must not measure "
                "changes to the plugin. The revision has its own pytest_cnnperf package where "
                "pytest starts; run pytest from another folder, or install pytest-cnnperf "
                "rather than running it from the checkout"
            )
        if handshake.leak:
            raise BaseProblem(handshake.leak)
        return handshake

    def absent(self, nodeid: str, path: str) -> str | None:
        """Why the test ``nodeid`` (in file ``path``) does not exist at the revision, or
        ``None`` when it does; ``BenchmarkError`` when its file cannot be collected there."""
        handshake = self.handshake()
        if nodeid in handshake.tests:
            return None
        relative = self.worktree.to_worktree(Path(path))
        inside = relative.relative_to(self.worktree.path) if relative else None
        for file, error in handshake.errors:
            if inside is not None and Path(file) == inside:
                raise BenchmarkError(
                    f"at {self.against.base}, {file} cannot be collected:\n{error}"
                )
        if relative is None or not relative.exists():
            return "its test file is not there"
        return "its test is not there"

    def sampler(self, timeout: float) -> BaseSampler:
        """The sampler of the revision's side (``BaseProblem`` when it cannot take samples)."""
        if self._sampler is None:
            zygote = self._zygote
            if zygote is None:
                raise BaseProblem(f"{self.option}: nothing was started to measure the revision")
            self.handshake()
            if not zygote.wait_ready():
                raise BaseProblem(
                    f"{self.option}: the sample processes cannot start: {zygote.unusable}"
                )
            self._sampler = BaseSampler(zygote, timeout, self.worktree)
        return self._sampler

    @property
    def pid(self) -> int | None:
        """The base process's id (``None``: none was started, or it was closed)."""
        return self._process.pid if self._process is not None else None

    def _exited(self) -> bool:
        return self._process is not None and self._process.poll() is not None

    def _failed(self, what: str) -> str:
        code = None
        if self._process is not None:  # its pipe closed as it ended: it has its status soon
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._process.wait(timeout=EXIT_WAIT_S)
        status = f" (exit status {code})" if code is not None else ""
        output = tail(self._log, LOG_LINES) if self._log is not None else ""
        return (
            f"{self.option}: the pytest process of {self.against.base} {what}{status}; its "
            f"output ends:\n{output}"
        )

    def kill(self) -> None:
        """End the base process and its samples at once (safe in a signal handler)."""
        if self._zygote is not None:
            self._zygote.kill()

    def close(self) -> None:
        """End the base process (it ends its own samples and removes their files once its
        pipe closes) and remove its files."""
        if self._zygote is not None:
            self._zygote.close(grace=CLOSE_GRACE_S)  # its log goes with its working folder
        if self._process is not None:
            with contextlib.suppress(ChildProcessError):
                self._process.wait()
            self._process = None
