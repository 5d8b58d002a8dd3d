"""Git, as gating against a revision asks it: which repository, which commit a name means, the
state of the checkout, and detached worktrees made apart from the user's checkout.

Every failure the user can fix is a :class:`GitProblem` whose message names the value and the
fix. Worktrees are made with hooks off (a project's ``post-checkout`` hook must not run on our
behalf) in the temporary directory, named after the process that made them, so that one left by
a killed run is removed by the next (``store.leftovers``) and ``git worktree prune`` forgets it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..model import Revision
from ..store import leftovers

#: a worktree's folder in the temporary directory: pytest-cnnperf-rev-<pid>-<sha>
WORKTREE_PREFIX = "pytest-cnnperf-rev-"
GIT_TIMEOUT_S = 120.0


class GitProblem(Exception):
    """Git cannot give what was asked; the message names the value and the fix."""


def run_git(
    folder: Path, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``folder`` without hooks or the index lock a status would take;
    ``GitProblem`` when git is missing or takes over ``timeout`` s, or (``check``) when it fails."""
    command = ["git", "-c", "core.hooksPath=/dev/null", *args]
    try:
        done = subprocess.run(
            command,
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"},
            check=False,
        )
    except FileNotFoundError:
        raise GitProblem("git is not installed (or not on PATH); install git") from None
    except subprocess.TimeoutExpired:
        raise GitProblem(f"git {' '.join(args)} took longer than {timeout:g} s") from None
    if check and done.returncode != 0:
        raise GitProblem(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def toplevel(folder: Path, option: str) -> Path:
    """The top of the git checkout ``folder`` is in; ``option`` names what needed it."""
    done = run_git(folder, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0:
        raise GitProblem(
            f"{option}: {folder} is not in a git repository ({done.stderr.strip()}); run pytest "
            "inside the project's git checkout, or gate against stored baselines without it"
        )
    return Path(done.stdout.strip())


def resolve(top: Path, name: str, option: str) -> Revision:
    """The commit ``name`` means in the repository at ``top``."""
    done = run_git(
        top,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{name}^{{commit}}",
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        shallow = run_git(top, "rev-parse", "--is-shallow-repository", check=False).stdout.strip()
        if shallow == "true":
            raise GitProblem(
                f"{option}: this clone is shallow and does not have {name}; fetch it "
                f"(git fetch --deepen=50 origin, or git fetch origin {name}), or clone with "
                "the history it needs (actions/checkout: fetch-depth: 0)"
            )
        raise GitProblem(
            f"{option}: git knows no commit {name!r}; give a branch, a tag or a commit "
            "that git rev-parse accepts (git fetch origin first if it is a remote's)"
        )
    return revision(top, done.stdout.strip(), name)


def revision(top: Path, sha: str, name: str | None = None, dirty: bool = False) -> Revision:
    """The commit ``sha``, with its subject; ``name``: as the user gave it (else the sha's
    first ten digits)."""
    subject = run_git(top, "show", "-s", "--format=%s", sha, check=False).stdout.strip()
    return Revision(name=name or sha[:10], sha=sha, subject=subject, dirty=dirty)


def head(top: Path) -> Revision:
    """The checkout's own commit, and whether its tracked files differ from it."""
    done = run_git(top, "rev-parse", "--verify", "--quiet", "HEAD", check=False)
    sha = done.stdout.strip()
    if done.returncode != 0 or not sha:
        raise GitProblem(f"{top} has no commit yet; commit something first")
    status = run_git(top, "status", "--porcelain", "--untracked-files=no", check=False)
    return revision(top, sha, "HEAD", dirty=bool(status.stdout.strip()))


def relative(path: Path, top: Path) -> Path | None:
    """``path`` relative to the checkout's top (``None``: outside it), symbolic links resolved
    on both, as git sees them."""
    try:
        return path.resolve().relative_to(top.resolve())
    except (ValueError, OSError):
        return None


class Worktree:
    """A detached worktree of one revision, in the temporary directory, until :meth:`remove`."""

    def __init__(self, top: Path, revision: Revision, path: Path) -> None:
        self.top = top
        self.revision = revision
        self.path = path

    @classmethod
    def add(cls, top: Path, revision: Revision) -> Worktree:
        """Make the worktree (after removing those that killed runs left)."""
        prune(top)
        folder = Path(tempfile.gettempdir()) / f"{WORKTREE_PREFIX}{os.getpid()}-{revision.short}"
        if folder.exists():  # this process made it already: the same revision, reused
            return cls(top, revision, folder)
        made = cls(top, revision, folder)
        try:
            done = run_git(
                top,
                "worktree",
                "add",
                "--detach",
                "--quiet",
                str(folder),
                revision.sha,
                check=False,
            )
        except BaseException:  # interrupted while git made it: leave nothing half made
            made.remove()
            raise
        if done.returncode != 0:
            made.remove()
            raise GitProblem(
                f"could not check out {revision} into a worktree at {folder}: {done.stderr.strip()}"
            )
        return made

    def remove(self) -> None:
        """Remove the folder and git's record of it (again: nothing)."""
        if self.path.exists():
            run_git(
                self.top, "worktree", "remove", "--force", "--force", str(self.path), check=False
            )
            shutil.rmtree(self.path, ignore_errors=True)
        run_git(self.top, "worktree", "prune", check=False)

    def to_worktree(self, path: Path) -> Path | None:
        """Where ``path`` of the checkout is in the worktree (``None``: outside the checkout)."""
        inside = relative(path, self.top)
        return None if inside is None else self.path / inside


def prune(top: Path) -> None:
    """Remove the worktrees of runs that were killed, and git's records of them."""
    leftovers.remove_folders_of_dead(Path(tempfile.gettempdir()), WORKTREE_PREFIX)
    run_git(top, "worktree", "prune", check=False)
