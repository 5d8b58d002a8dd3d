"""The counting process of ``--cnnperf-metric=instructions``: this checkout's pytest process
again, under Valgrind's callgrind, that collects the same tests and takes the counted samples
the run asks for (``measuring.instructions``), through its own zygote, as the revision's process
of ``--cnnperf-against`` takes its samples (``revision.base``).

It is started once per session (per xdist worker), when the first benchmark is counted, so
Valgrind's start and torch's import, uninstrumented, are paid once. What moves counts is
pinned: address-space randomisation off (``setarch -R``), Python's hash seed, one torch thread
(callgrind collects per thread), and the kernels torch, oneDNN, MKL and glibc's maths dispatch
to (:data:`NO_FMA` or :data:`AVX2`, by the Valgrind it runs under). Valgrind shows the program
a CPU of its own, never the host's, so under the same pins the libraries pick the same kernels
on every x86-64 host.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from .base import BaseProblem, BaseSampler, BaseSide, Launch, _as_started
from .base import launch as base_launch
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


def launch(config: Any, passed: Sequence[str]) -> Launch:
    """The counting process's pytest command line: this run's tests, as given (``--pyargs``
    too), with the options the run passes on (its settings)."""
    command = [sys.executable, *_as_started(), "-p", "no:cacheprovider", "-q"]
    command += ["--cnnperf", "--cnnperf-device=cpu", f"--rootdir={config.rootpath}"]
    command += [f"--import-mode={config.option.importmode}"]
    if config.inipath:
        command += ["-c", str(config.inipath)]
    if getattr(config.option, "pyargs", False):
        command.append("--pyargs")
    command += passed
    if config.pluginmanager.hasplugin("xdist"):
        command += ["-n", "0"]  # one process: the worker (or the head) that counts drives it
    return Launch((*command, *map(str, config.args)), Path(config.invocation_params.dir))


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
                how: Launch | None = launch(config, passed)
            else:
                tree, against = self.revision.worktree, self.revision.against
                how = base_launch(config, tree, "cpu", None, passed)
            if how is None:
                raise BaseProblem(f"{option}: none of this run's tests exist at {against.base}")
            how = under_callgrind(how, self.folder)
            self.side = BaseSide.start(against, tree, option, how, threads=1)
        return self.side.sampler(timeout)

    def kill(self) -> None:
        if self.side is not None:
            self.side.kill()

    def close(self) -> None:
        if self.side is not None:
            self.side.close()
            self.side = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
