"""Which commit a run measured and which CI job it belonged to: git in a real repository (clean,
dirty, detached, none), and the variables GitHub Actions and GitLab CI set."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_cnnperf.history.identity import ci_run, git_state
from pytest_cnnperf.history.record import run_info
from pytest_cnnperf.history.runs import CiRun, GitState

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "model.py").write_text("x = 1\n")
    git(tmp_path, "add", "model.py")
    git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_a_clean_checkout(repo: Path) -> None:
    state = git_state(repo)
    assert state.commit == git(repo, "rev-parse", "HEAD")
    assert state.branch == "main"
    assert state.dirty is False
    assert state.commit_time == git(repo, "show", "-s", "--format=%cI", "HEAD")


def test_a_changed_tracked_file_is_dirty_an_untracked_one_is_not(repo: Path) -> None:
    (repo / "notes.txt").write_text("untracked\n")
    assert git_state(repo).dirty is False
    (repo / "model.py").write_text("x = 2\n")
    assert git_state(repo).dirty is True


def test_a_detached_head_has_no_branch(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    state = git_state(repo)
    assert state.branch is None
    assert state.commit == git(repo, "rev-parse", "HEAD")


def test_a_subfolder_belongs_to_its_repository(repo: Path) -> None:
    (repo / "tests").mkdir()
    assert git_state(repo / "tests").commit == git(repo, "rev-parse", "HEAD")


def test_no_repository_is_unknown_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert git_state(tmp_path) == GitState()


def test_no_git_is_unknown_not_an_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert git_state(repo) == GitState()


def test_a_github_pull_request_keeps_the_merge_and_the_head_commit(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": "a" * 40}}}))
    environ = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "team/models",
        "GITHUB_RUN_ID": "123",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_JOB": "perf",
        "GITHUB_SHA": "m" * 40,
        "GITHUB_REF_NAME": "7/merge",
        "GITHUB_HEAD_REF": "faster-stem",
        "GITHUB_BASE_REF": "main",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
    }
    assert ci_run(environ) == CiRun(
        provider="github",
        run_id="123",
        attempt="2",
        job_id="perf",
        tested_commit="m" * 40,
        head_commit="a" * 40,
        branch="faster-stem",
        base_branch="main",
        pull_request="7",
        project="team/models",
        url="https://github.com/team/models/actions/runs/123/attempts/2",
    )


def test_a_github_push_is_its_own_head() -> None:
    environ = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "team/models",
        "GITHUB_RUN_ID": "9",
        "GITHUB_SHA": "c" * 40,
        "GITHUB_REF_NAME": "main",
        "GITHUB_EVENT_NAME": "push",
    }
    run = ci_run(environ)
    assert run is not None
    assert (run.tested_commit, run.head_commit, run.branch, run.pull_request) == (
        "c" * 40,
        "c" * 40,
        "main",
        None,
    )
    assert run.url == "https://github.com/team/models/actions/runs/9"


def test_a_gitlab_merged_results_pipeline() -> None:
    environ = {
        "GITLAB_CI": "true",
        "CI_PIPELINE_ID": "41",
        "CI_JOB_ID": "410",
        "CI_COMMIT_SHA": "m" * 40,
        "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": "a" * 40,
        "CI_COMMIT_REF_NAME": "refs/merge-requests/3/merge",
        "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "faster-stem",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_MERGE_REQUEST_IID": "3",
        "CI_PROJECT_PATH": "team/models",
        "CI_JOB_URL": "https://gitlab.example/team/models/-/jobs/410",
    }
    assert ci_run(environ) == CiRun(
        provider="gitlab",
        run_id="41",
        job_id="410",
        tested_commit="m" * 40,
        head_commit="a" * 40,
        branch="faster-stem",
        base_branch="main",
        pull_request="3",
        project="team/models",
        url="https://gitlab.example/team/models/-/jobs/410",
    )


def test_outside_ci_there_is_no_ci_run() -> None:
    assert ci_run({"PATH": "/usr/bin"}) is None


def test_a_run_names_the_pull_requests_head_as_its_commit(repo: Path) -> None:
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_SHA": "m" * 40}
    info = run_info(repo, "cpu-test-2t", environ=environ)
    assert info.git.commit == git(repo, "rev-parse", "HEAD")
    assert info.commit == "m" * 40
    local = run_info(repo, "cpu-test-2t", environ={})
    assert local.commit == info.git.commit
    assert local.short_commit() == info.git.commit[:7]  # type: ignore[index]
    (repo / "model.py").write_text("x = 3\n")
    assert run_info(repo, None, environ={}).short_commit().endswith("+")
