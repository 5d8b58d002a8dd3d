"""What a same-job comparison compared: git revisions as the user named them and git resolved
them (``--cnnperf-against``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Revision:
    """A git commit, as the user named it and as git resolved it."""

    #: as given: ``main``, ``HEAD~3``, a sha
    name: str
    sha: str
    #: its subject line
    subject: str = ""
    #: the checkout's tracked files differ from the commit (the code under test only)
    dirty: bool = False

    @property
    def short(self) -> str:
        """The sha's first ten digits; a name that is no sha (``this checkout``) whole."""
        is_sha = len(self.sha) in (40, 64) and all(c in "0123456789abcdef" for c in self.sha)
        return self.sha[:10] if is_sha else self.sha

    def __str__(self) -> str:
        """``main (0123456789)``, ``0123456789 with local changes``."""
        shown = f"{self.name} ({self.short})"
        named = self.short if self.name in (self.sha, self.short, "HEAD") else shown
        return named + (" with local changes" if self.dirty else "")


@dataclass(frozen=True)
class Against:
    """What a same-job comparison compared (``--cnnperf-against``): the revision its reference
    was measured at, in the same run, and the code under test."""

    base: Revision
    head: Revision

    def __str__(self) -> str:
        return f"{self.head} against {self.base}, both measured in this run"
