"""What every reason of a decision has: its ``kind`` in files and its sentence. A reason is data
(a ``kind`` and its numbers) that words itself (``str(reason)``): files keep the data, so the
wording can change without changing a format."""

from __future__ import annotations

from typing import ClassVar


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


class Because:
    """What every reason has: its ``kind`` in files, its sentence (``str(reason)``), and what it
    fails a benchmark for, if anything (:attr:`fails_as`). A reason is one by being a subclass
    with a ``kind``: files and the manual know it from :meth:`kinds`, which lists them all in
    the order they are defined."""

    kind: ClassVar[str]
    _kinds: ClassVar[dict[str, type[Because]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in vars(cls):
            if cls.kind in Because._kinds:
                raise TypeError(f"two reasons of kind {cls.kind!r}")
            Because._kinds[cls.kind] = cls

    @classmethod
    def kinds(cls) -> tuple[type[Because], ...]:
        """Every reason, in the order they are defined (``model.conditions``, then
        ``model.findings``)."""
        return tuple(Because._kinds.values())

    @property
    def fails_as(self) -> str | None:
        """What it fails a benchmark for beside its throughput and memory, as a failure message
        names it (``graph breaks``, ``host-device synchronisations``); ``None``: nothing."""
        return None

    def __str__(self) -> str:
        raise NotImplementedError


def speed(ratio: float) -> str:
    """``8% slower`` for a calibration ratio of 1.08, ``10% faster`` for 1/1.1."""
    return f"{ratio - 1:.0%} slower" if ratio >= 1 else f"{1 / ratio - 1:.0%} faster"


#: the fixes that several reasons' sentences name, each worded once: what accepts an intended
#: change of a step's counts or numbers; what gives a verdict the machine's noise withheld; what
#: has no between-run noise; what gives a baseline instruction counts to gate against
ACCEPT = "record the baseline again (--cnnperf-save) if the change is intended"
QUIETER = "re-run it when the machine is quieter"
AGAINST = "gate it against the base revision in the same job (--cnnperf-against=REV)"
RECOUNT = "record it again with --cnnperf-save --cnnperf-metric=instructions"
