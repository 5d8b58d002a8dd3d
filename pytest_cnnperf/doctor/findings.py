"""What ``cnnperf doctor`` finds, and how it says it.

Levels: ``warn`` makes figures untrustworthy now (a busy machine, a throttled or shared GPU, a
CPU quota below the threads); ``note`` is worth knowing, as baselines need the same setting
(turbo, SMT, floating GPU clocks); ``ok`` is as it should be.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class Level(str, enum.Enum):
    OK = "ok"
    NOTE = "note"
    WARN = "warn"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Finding:
    topic: str
    level: Level
    #: what was found
    found: str
    why: str = ""
    #: the command that fixes it (or what to do)
    fix: str = ""
    #: a few words for the session's one-line warning
    brief: str = ""


@dataclass(frozen=True)
class Section:
    title: str
    findings: tuple[Finding, ...]


def warnings(sections: Iterable[Section]) -> list[Finding]:
    return [f for s in sections for f in s.findings if f.level is Level.WARN]


def render(sections: Sequence[Section]) -> list[str]:
    """The findings as ``cnnperf doctor`` prints them, with the verdict last."""
    lines = []
    for section in sections:
        lines.append(section.title)
        for f in section.findings:
            lines.append(f"  {f.level!s:<4}  {f.topic}: {f.found}")
            if f.level is not Level.OK:
                if f.why:
                    lines.append(f"        why: {f.why}")
                if f.fix:
                    lines.append(f"        fix: {f.fix}")
        lines.append("")
    found = warnings(sections)
    if found:
        topics = ", ".join(dict.fromkeys(f.topic for f in found))
        n = len(found)
        lines.append(f"not fit to benchmark on: {n} warning{'' if n == 1 else 's'} ({topics})")
    else:
        lines.append("fit to benchmark on: no warnings (the notes are worth knowing)")
    return lines
