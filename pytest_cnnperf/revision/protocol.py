"""What the head's pytest process and the base revision's tell each other.

The head starts the base process with an :class:`Order` in the environment variable
:data:`ENV` (its sample processes inherit it); once the base process has collected, it answers
with a :class:`Handshake` on the pipe the order names, then relays the head's sample requests to
its zygote and the zygote's replies back, line by line, in the zygote's own protocol
(``sampling.zygote``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..store.codec import Document

#: the environment variable that makes a pytest process the base side of a comparison
ENV = "CNNPERF_BASE"


@dataclass(frozen=True)
class Order:
    """What the head tells the base process."""

    #: the pipes: the head's requests in, the replies out
    requests_fd: int
    replies_fd: int
    #: the head's pytest process: the base process ends with it
    head_pid: int
    #: the checkout under test, and the revision's worktree
    head_top: str
    worktree: str
    #: the option as the user gave it (``--cnnperf-against=main``), for messages
    option: str
    #: torch's threads, where the head set them (a pytest-xdist worker's share)
    threads: int | None = None


@dataclass(frozen=True)
class Handshake:
    """What the base process answers once it has collected."""

    #: where it imported pytest_cnnperf from (the head checks it is its own)
    plugin: str
    #: the benchmark tests it collected, by node id
    tests: tuple[str, ...] = ()
    #: collection errors, by the file they are in (relative to the worktree's top)
    errors: tuple[tuple[str, str], ...] = ()
    #: why the run must stop: the project's code imported from outside the worktree
    leak: str | None = None


ORDER: Document[Order] = Document("pytest-cnnperf/base-order", 1, Order, "base order")
HANDSHAKE: Document[Handshake] = Document(
    "pytest-cnnperf/base-handshake", 1, Handshake, "base handshake"
)


def current_order() -> Order | None:
    """The order this process runs under, when it is (or descends from) a base process."""
    text = os.environ.get(ENV)
    return ORDER.load(json.loads(text)) if text else None
