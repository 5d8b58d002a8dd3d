"""How the pytest process stops on SIGINT (Ctrl-C) and SIGTERM while a benchmark session runs.

* SIGTERM (an IDE's stop button, a CI runner's cancel, a supervisor) would end Python at once,
  without cleanup; for the session's duration it interrupts the run as Ctrl-C does, so the
  session ends in order: sample processes ended, nothing saved, reports written.
* On the first interrupt the sample processes are ended at once (the caller's ``stop``); a
  second one, while pytest winds the session down, ends the process at once instead of raising
  a second ``KeyboardInterrupt`` inside pytest's own code.
* While baseline files are written (milliseconds), interrupts wait until they are, so that a
  file is always the old one or the new one and the session says which.

The previous handlers are restored when the session ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn

#: pytest's exit status for an interrupted run
INTERRUPTED = 2


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt (pytest reports it as ``Terminated: ...``)."""

    __module__ = "builtins"


class Stopping:
    """The session's signal handlers; ``stop()`` ends every process the plugin started and
    removes their files (it may be called again, and from a handler)."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop = stop
        self._previous: dict[int, Any] = {}
        self.interrupted = False

    def _install(self, signum: int, handler: Callable[[int, FrameType | None], None]) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread handles signals (and may set handlers)
        self._previous.setdefault(signum, signal.getsignal(signum))
        signal.signal(signum, handler)

    def pytest_keyboard_interrupt(self, excinfo: object) -> None:
        """pytest caught an interrupt (registered as a plugin for this hook)."""
        self.on_interrupt()

    def start(self) -> None:
        """SIGTERM interrupts the run, unless someone else already handles it."""
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._install(signal.SIGTERM, self._terminate)

    @staticmethod
    def _terminate(signum: int, frame: FrameType | None) -> NoReturn:
        raise Terminated("the pytest process got SIGTERM")

    def _at_once(self, signum: int, frame: FrameType | None) -> NoReturn:
        self._stop()
        os.write(2, f"\ncnnperf: {signal.Signals(signum).name} again: stopped at once\n".encode())
        os._exit(INTERRUPTED)

    def on_interrupt(self) -> None:
        """The run was interrupted: end the sample processes now, and stop at once on another
        interrupt."""
        self.interrupted = True
        self._stop()
        self._install(signal.SIGINT, self._at_once)
        self._install(signal.SIGTERM, self._at_once)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[list[int]]:
        """Interrupts that arrive inside the block take effect when it ends (then as
        :meth:`on_interrupt`), so that the block's writes finish; the list it gives holds the
        signals that arrived."""
        received: list[int] = []
        if threading.current_thread() is not threading.main_thread():
            yield received
            return
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for signum in previous:
            signal.signal(signum, lambda signum, frame: received.append(signum))
        try:
            yield received
        finally:
            for signum, handler in previous.items():
                _set(signum, handler)
        if received:
            self.on_interrupt()

    def restore(self) -> None:
        """Put back the handlers this replaced."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in self._previous.items():
            _set(signum, handler)
        self._previous.clear()


def _set(signum: int, handler: Any) -> None:
    """Put back a handler that ``signal.getsignal`` returned (``None``: one set outside Python,
    which cannot be put back; the default is the nearest)."""
    signal.signal(signum, signal.SIG_DFL if handler is None else handler)
