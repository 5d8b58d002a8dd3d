"""What a history records about a run besides its results: when and where it ran, the git
commit it measured, the CI job it belonged to; and a stored benchmark result with its run.

A history keeps :class:`RunInfo` as JSON in its ``info`` column and each result in its
``result`` column, both written by ``store.codec``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Result


@dataclass(frozen=True)
class GitState:
    """The checkout a run measured; ``None`` where git could not tell (no repository, no git,
    a checkout owned by another user)."""

    commit: str | None = None
    #: ``None`` on a detached HEAD, as CI checkouts are
    branch: str | None = None
    #: tracked files changed since the commit (untracked ones do not count)
    dirty: bool | None = None
    #: the commit's committer date, ISO 8601
    commit_time: str | None = None


@dataclass(frozen=True)
class CiRun:
    """The CI job a run belonged to, from the variables GitHub Actions or GitLab CI set."""

    provider: str
    run_id: str | None = None
    attempt: str | None = None
    job_id: str | None = None
    #: the commit the job checked out: in a pull request, GitHub's (and GitLab's merged-results)
    #: merge commit, which nobody wrote
    tested_commit: str | None = None
    #: the pull request's head commit, the one its author pushed (else the tested commit)
    head_commit: str | None = None
    branch: str | None = None
    base_branch: str | None = None
    #: the pull (merge) request's number
    pull_request: str | None = None
    project: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class RunInfo:
    """A run as its history records it."""

    #: a unique id, so that a run is never stored twice
    uid: str
    #: when it was recorded (the end of the session), UTC, ISO 8601
    recorded: str
    #: the kind of machine (the baseline partition), e.g. ``cpu-amd-epyc-2t``
    machine: str | None
    host: str
    git: GitState
    ci: CiRun | None
    #: the pytest-cnnperf version that recorded it
    cnnperf: str
    #: the run was started with ``--cnnperf-creep-accept``
    accepted: bool = False

    @property
    def commit(self) -> str | None:
        """The commit a reader knows: a pull request's head, else the checked-out one."""
        if self.ci and self.ci.head_commit:
            return self.ci.head_commit
        return self.git.commit

    @property
    def branch(self) -> str | None:
        return (self.ci.branch if self.ci else None) or self.git.branch

    def short_commit(self) -> str:
        """``a1b2c3d``, ``a1b2c3d+`` for a dirty checkout, ``-`` when unknown."""
        if not self.commit:
            return "-"
        return self.commit[:7] + ("+" if self.git.dirty and self.commit == self.git.commit else "")


@dataclass(frozen=True)
class Entry:
    """One benchmark's result in one stored run."""

    #: the run's number in its history (the database's id)
    run_id: int
    run: RunInfo
    result: Result
