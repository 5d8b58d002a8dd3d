"""Which commit a run measured and which CI job it belonged to.

Git is asked the way pytest-benchmark asks it (``rev-parse``, ``symbolic-ref``, ``status``), and
every failure is "unknown", never an error: no git, no repository, a checkout owned by another
user ("dubious ownership"). CI identity comes from the variables GitHub Actions and GitLab CI set.
In a GitHub pull request the checked-out commit is the merge commit GitHub made
(``refs/pull/N/merge``); the author's head commit is in the event file, and both are kept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ..revision.git import GitProblem, run_git
from .runs import CiRun, GitState

#: a run's record waits for git this long at most (gating against a revision waits longer)
GIT_TIMEOUT_S = 10.0


def _git(folder: Path, *args: str) -> str | None:
    """git's answer; ``None`` for every failure (no git, no repository, dubious ownership)."""
    try:
        done = run_git(folder, *args, check=False, timeout=GIT_TIMEOUT_S)
    except (GitProblem, OSError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(folder: Path) -> GitState:
    """The checkout ``folder`` is in; every field ``None`` outside a repository."""
    commit = _git(folder, "rev-parse", "--verify", "-q", "HEAD")
    if not commit:
        return GitState()
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return GitState(
        commit=commit,
        branch=_git(folder, "symbolic-ref", "-q", "--short", "HEAD") or None,
        dirty=None if status is None else bool(status),
        commit_time=_git(folder, "show", "-s", "--format=%cI", "HEAD") or None,
    )


def _get(environ: Mapping[str, str], name: str) -> str | None:
    return environ.get(name, "").strip() or None


def _github_pull_request(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The head commit and number of the pull request the event file describes."""
    path = _get(environ, "GITHUB_EVENT_PATH")
    if not path or not (_get(environ, "GITHUB_EVENT_NAME") or "").startswith("pull_request"):
        return None, None
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
        pull = event["pull_request"]
        return str(pull["head"]["sha"]), str(pull["number"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, None


def ci_run(environ: Mapping[str, str] | None = None) -> CiRun | None:
    """The CI job this process runs in (GitHub Actions, GitLab CI), ``None`` outside CI."""
    env = os.environ if environ is None else environ
    if _get(env, "GITHUB_ACTIONS") == "true":
        server = _get(env, "GITHUB_SERVER_URL") or "https://github.com"
        repository, run_id = _get(env, "GITHUB_REPOSITORY"), _get(env, "GITHUB_RUN_ID")
        attempt = _get(env, "GITHUB_RUN_ATTEMPT")
        head, number = _github_pull_request(env)
        url = None
        if repository and run_id:
            url = f"{server}/{repository}/actions/runs/{run_id}"
            url += f"/attempts/{attempt}" if attempt else ""
        return CiRun(
            provider="github",
            run_id=run_id,
            attempt=attempt,
            job_id=_get(env, "GITHUB_JOB"),
            tested_commit=_get(env, "GITHUB_SHA"),
            head_commit=head or _get(env, "GITHUB_SHA"),
            # GITHUB_HEAD_REF is set in pull requests only; GITHUB_REF_NAME is then "N/merge"
            branch=_get(env, "GITHUB_HEAD_REF") or _get(env, "GITHUB_REF_NAME"),
            base_branch=_get(env, "GITHUB_BASE_REF"),
            pull_request=number,
            project=repository,
            url=url,
        )
    if _get(env, "GITLAB_CI") == "true":
        return CiRun(
            provider="gitlab",
            run_id=_get(env, "CI_PIPELINE_ID"),
            job_id=_get(env, "CI_JOB_ID"),
            tested_commit=_get(env, "CI_COMMIT_SHA"),
            # set in merged-results pipelines, where CI_COMMIT_SHA is the merge commit
            head_commit=_get(env, "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA")
            or _get(env, "CI_COMMIT_SHA"),
            branch=_get(env, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME")
            or _get(env, "CI_COMMIT_REF_NAME"),
            base_branch=_get(env, "CI_MERGE_REQUEST_TARGET_BRANCH_NAME"),
            pull_request=_get(env, "CI_MERGE_REQUEST_IID"),
            project=_get(env, "CI_PROJECT_PATH"),
            url=_get(env, "CI_JOB_URL"),
        )
    return None
