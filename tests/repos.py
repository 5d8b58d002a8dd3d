"""Throw-away git repositories for the tests of gating against a revision and of bisection."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(folder: Path, *args: str, date: str | None = None) -> str:
    """``git ARGS`` in ``folder`` as a made-up user; ``date``: the commit's, so that a
    history's shas (and the midpoints git picks among equals) are the same in every run."""
    dated = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **dated},
    )
    return done.stdout.strip()


def checkout_state(folder: Path) -> tuple[str, ...]:
    """What a user of the checkout would notice changing: HEAD, the branch, the working tree
    and ignored files, the refs, the stash, ``git bisect``'s log and the worktrees."""
    bisecting = subprocess.run(
        ["git", "bisect", "log"], cwd=folder, capture_output=True, text=True, check=False
    )
    return (
        git(folder, "rev-parse", "HEAD"),
        git(folder, "symbolic-ref", "-q", "HEAD"),
        git(folder, "status", "--porcelain", "--ignored"),
        git(folder, "for-each-ref"),
        git(folder, "stash", "list"),
        bisecting.stdout,
        git(folder, "worktree", "list", "--porcelain"),
    )
