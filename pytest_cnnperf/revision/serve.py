"""The base revision's pytest process (started by ``revision.base`` with ``protocol.ENV`` set):
it collects the tests in the revision's worktree, tells the head what it found, then takes the
samples the head asks for, through its own zygote, and runs no test itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .git import relative
from .imports import leak_check
from .protocol import HANDSHAKE, Handshake, Order

if TYPE_CHECKING:
    from ..sampling.manager import Sampling


def prepare(order: Order) -> None:
    """At configure time: end with the head, and use its torch threads."""
    from ..sampling.zygote import die_with_parent

    die_with_parent(order.head_pid)
    if order.threads:
        import torch

        torch.set_num_threads(order.threads)


class Serving:
    """The base process's hooks: note the benchmark tests and collection errors, then relay."""

    def __init__(self, order: Order, sampling: Sampling, is_benchmark: object) -> None:
        self.order = order
        self.sampling = sampling
        self.is_benchmark = is_benchmark
        self.tests: list[str] = []
        self.errors: list[tuple[str, str]] = []

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            path = Path(str(report.fspath))
            inside = relative(path, Path(self.order.worktree))
            self.errors.append((str(inside or path), report.longreprtext))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        check = self.is_benchmark
        assert callable(check)
        self.tests = [item.nodeid for item in items if check(item)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        import pytest_cnnperf

        handshake = Handshake(
            plugin=pytest_cnnperf.__file__ or "",
            tests=tuple(self.tests),
            errors=tuple(self.errors),
            leak=leak_check(),
        )
        replies = self.order.replies_fd
        os.write(replies, (json.dumps(HANDSHAKE.dump(handshake)) + "\n").encode())
        zygote = self.sampling.zygote
        if zygote is None:  # no fork here: say so where the head waits for the zygote
            why = "this platform cannot fork, or samples were asked in-process"
            os.write(replies, (json.dumps({"unusable": why}) + "\n").encode())
            return True
        zygote.relay(self.order.requests_fd, replies)
        return True
