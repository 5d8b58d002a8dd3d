"""A run gated against a git revision (``--cnnperf-against=REV``): checked when pytest
configures, the revision's worktree made once (by the only process, or pytest-xdist's
controller, which hands it to its workers), the revision's pytest process started in every
process that takes samples, and everything removed when the run ends, Ctrl-C included.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Against
from .base import BaseProblem, BaseSide, launch
from .git import GitProblem, Worktree, head, resolve, toplevel


class AgainstProblem(Exception):
    """The run cannot be gated against the revision; the message names the value and the fix."""


@dataclass
class AgainstRun:
    """The revision gated against, its worktree and (where samples are taken) its process."""

    against: Against
    worktree: Worktree
    #: the option as given, for messages: ``--cnnperf-against=main``
    option: str
    #: whether this process made the worktree (and removes it)
    owner: bool
    base: BaseSide | None = None

    def start(
        self,
        config: Any,
        device: str,
        cudnn: str | None,
        passed: Sequence[str],
        threads: int | None,
    ) -> None:
        """Start the revision's pytest process (it collects while the head does)."""
        how = launch(config, self.worktree, device, cudnn, passed)
        self.base = BaseSide.start(self.against, self.worktree, self.option, how, threads)

    def side(self) -> BaseSide:
        """The revision's process, started by :meth:`start`."""
        if self.base is None:
            raise BaseProblem(f"{self.option}: the revision's side was not started")
        return self.base

    def kill(self) -> None:
        """End the revision's process at once (safe in a signal handler)."""
        if self.base is not None:
            self.base.kill()

    def close(self) -> None:
        """End the revision's process, and remove the worktree where this process made it."""
        if self.base is not None:
            self.base.close()
            self.base = None
        if self.owner:
            self.worktree.remove()


def prepare(
    config: Any, name: str, *, save: bool, inprocess: bool, worktree: str | None
) -> AgainstRun:
    """Check the run and find (or make) the revision's worktree; ``worktree``: the one
    pytest-xdist's controller made, in a worker."""
    option = f"--cnnperf-against={name}"
    if save:
        raise AgainstProblem(
            f"{option} with --cnnperf-save: a run gated against a revision records no "
            "baselines; drop one of them"
        )
    if getattr(config.option, "pyargs", False):
        raise AgainstProblem(
            f"{option} with --pyargs: --pyargs imports the tests from an installed package, "
            "which the revision's worktree cannot replace, so both sides would run the same "
            "code; name the tests by their paths in the checkout"
        )
    if inprocess:
        raise AgainstProblem(
            f"{option} with --cnnperf-inprocess (or cnnperf_inprocess = true): the revision's "
            "samples are taken in processes of their own, and both sides must be measured "
            "alike; drop --cnnperf-inprocess"
        )
    try:
        top = toplevel(Path(config.rootpath), option)
        base = resolve(top, name, option)
        against = Against(base=base, head=head(top))
        if worktree is not None:
            return AgainstRun(against, Worktree(top, base, Path(worktree)), option, owner=False)
        return AgainstRun(against, Worktree.add(top, base), option, owner=True)
    except GitProblem as exc:
        raise AgainstProblem(str(exc)) from None


def threads_set() -> int | None:
    """torch's threads, where this process set them (a pytest-xdist worker's share)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None
