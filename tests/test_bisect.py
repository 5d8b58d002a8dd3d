"""``cnnperf bisect``: the search on scripted verdicts in a real repository, its reports and exit
statuses, and whole bisections of a throw-away project."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from factories import CONFIG, ENV
from repos import checkout_state, git

from pytest_cnnperf.model import (
    Comparison,
    Decision,
    Look,
    Measurement,
    MemoryPeak,
    Result,
    Revision,
    Sample,
    Verdict,
)
from pytest_cnnperf.reports import bisect as report
from pytest_cnnperf.revision import bisect
from pytest_cnnperf.revision.git import WORKTREE_PREFIX, tempfile


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository of 16 commits, oldest first."""
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    shas = []
    for i in range(16):
        (folder / "n.txt").write_text(str(i))
        git(folder, "add", "n.txt")
        git(folder, "commit", "-qm", f"Commit {i}", date=f"2026-01-01T00:{i:02d}:00+00:00")
        shas.append(git(folder, "rev-parse", "HEAD"))
    return folder, shas


def outcome(verdict: Verdict, change: float = 0.0, test_id: str = "t.py::test_a") -> Result:
    """A benchmark's result in one run, with a throughput change (positive: slower)."""
    look = Look(1, 2, 0.005, 0.025)
    comparison = Comparison(
        metric="throughput",
        baseline=100.0,
        current=100.0 * (1 - change),
        change=change,
        threshold=0.10,
        verdict=verdict,
        p_value=0.001,
        low=change - 0.05,
        high=change + 0.05,
        baseline_samples=6,
        current_samples=6,
        look=look,
    )
    sample = Sample(step_time_s=0.01, memory=MemoryPeak(1 << 20, 1 << 20, "test"))
    return Result(
        config=CONFIG,
        test_id=test_id,
        environment=ENV,
        measurement=Measurement(CONFIG.batch_size, (sample,), CONFIG.unit),
        decision=Decision(verdict, throughput=comparison),
    )


def scripted(
    shas: list[str], first_bad: int, unsure: set[int] = frozenset(), broken: set[int] = frozenset()
) -> tuple[bisect.Measure, list[tuple[int, int, tuple[float, float] | None]]]:
    """A ``measure`` whose commits from ``first_bad`` on are 30% slower than before it; those
    in ``unsure`` are inconclusive, those in ``broken`` cannot be collected. Also the list of
    what it measured: (commit, against, thresholds) as indices."""
    asked: list[tuple[int, int, tuple[float, float] | None]] = []

    def measure(
        commit: Revision, against: Revision, thresholds: tuple[float, float] | None
    ) -> bisect.Run:
        i, j = shas.index(commit.sha), shas.index(against.sha)
        asked.append((i, j, thresholds))
        if i in broken:
            return bisect.Run((), "pytest exited with status 2: ImportError", 1.0)
        if i in unsure:
            return bisect.Run((outcome(Verdict.INCONCLUSIVE, 0.1),), None, 1.0)
        slower = (i >= first_bad) != (j >= first_bad)
        verdict = Verdict.REGRESSED if slower else Verdict.OK
        return bisect.Run((outcome(verdict, 0.3 if slower else 0.0),), None, 1.0)

    return measure, asked


def run_bisect(
    repo: Path, shas: list[str], measure: bisect.Measure, good: int = 0, bad: int = 15
) -> bisect.Bisection:
    g, b = bisect.check_range(repo, shas[good], shas[bad])
    return bisect.bisect(repo, g, b, measure)


def test_the_first_bad_commit_is_found_in_log2_steps_and_explained_against_its_parent(
    history: tuple[Path, list[str]],
) -> None:
    repo, shas = history
    measure, asked = scripted(shas, first_bad=9)
    found = run_bisect(repo, shas, measure)
    assert found.status == bisect.FOUND
    assert found.first_bad is not None
    assert found.first_bad.sha == shas[9]
    assert asked[0] == (15, 0, None)  # the confirmation: BAD against GOOD, the gate's thresholds
    assert all(j == 0 and t == (0.10, 0.05) for _, j, t in asked[1:-1])  # half of 30% > 10%
    assert asked[-1][:2] == (9, 8)  # the explanation: against its parent
    measured = {i for i, _, _ in asked}
    assert len(measured) <= 6
    assert [s.role for s in found.steps] == ["confirm", *["bisect"] * (len(asked) - 2), "explain"]


def test_a_small_regression_is_bisected_at_half_its_size() -> None:
    """A 12% slowdown: a midpoint is bad when it is 6% slower, not 10%."""
    result = outcome(Verdict.REGRESSED, 0.12)
    assert bisect.thresholds_for(result) == pytest.approx((0.06, 0.05))


def test_commits_that_cannot_tell_are_skipped_and_the_culprit_still_found(
    history: tuple[Path, list[str]],
) -> None:
    repo, shas = history
    measure, asked = scripted(shas, first_bad=9, unsure={7}, broken={5, 12})
    found = run_bisect(repo, shas, measure)
    assert found.first_bad is not None
    assert found.first_bad.sha == shas[9]
    skipped = [s for s in found.steps if s.bad is None]
    assert skipped
    assert {s.commit.sha for s in skipped} <= {shas[5], shas[7], shas[12]}
    assert {s.why for s in skipped} <= {
        "the comparison was inconclusive",
        "pytest exited with status 2: ImportError",
    }
    assert len({i for i, _, _ in asked}) <= 6 + len(skipped)


def test_skipped_commits_next_to_the_culprit_leave_a_range(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    measure, _ = scripted(shas, first_bad=9, broken={8, 9})
    found = run_bisect(repo, shas, measure)
    assert found.status == bisect.RANGE
    assert found.first_bad is None
    assert [r.sha for r in found.suspects] == [shas[8], shas[9], shas[10]]
    text = report.lines(found)
    assert "the first bad commit is one of 3, the others could not be told:" in text


def test_no_regression_from_good_to_bad_bisects_nothing(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    measure, asked = scripted(shas, first_bad=99)
    found = run_bisect(repo, shas, measure)
    assert found.status == bisect.NOTHING
    assert len(asked) == 1
    assert report.lines(found)[-1] == (
        "no regression from GOOD to BAD: +0.0% (-5.0% to +5.0%); nothing bisected"
    )


def test_an_inconclusive_confirmation_bisects_nothing(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    measure, asked = scripted(shas, first_bad=9, unsure={15})
    found = run_bisect(repo, shas, measure)
    assert found.status == bisect.UNSURE
    assert len(asked) == 1


def test_several_regressed_benchmarks_need_one_chosen() -> None:
    results = [
        outcome(Verdict.REGRESSED, 0.3, "t.py::test_a"),
        outcome(Verdict.REGRESSED, 0.2, "t.py::test_b"),
    ]
    with pytest.raises(bisect.BisectProblem) as caught:
        bisect.pick(results, None)
    assert str(caught.value) == (
        f"2 benchmarks regressed between GOOD and BAD (t.py::test_a [{CONFIG.key}]; "
        f"t.py::test_b [{CONFIG.key}]); bisect one of them: --benchmark KEY, or select its "
        "test in the pytest arguments"
    )
    assert bisect.pick(results, "t.py::test_b").test_id == "t.py::test_b"


def test_good_must_be_an_ancestor_of_bad(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    with pytest.raises(bisect.BisectProblem) as caught:
        bisect.check_range(repo, shas[5], shas[2])
    assert str(caught.value) == (
        f"GOOD={shas[5]} ({shas[5][:10]}) is not an ancestor of BAD={shas[2]} ({shas[2][:10]}); "
        f"give GOOD an older commit of BAD's history (git log {shas[2]})"
    )


def test_the_json_report_names_the_first_bad_commit_by_its_full_sha(
    history: tuple[Path, list[str]],
) -> None:
    repo, shas = history
    measure, _ = scripted(shas, first_bad=4)
    found = run_bisect(repo, shas, measure)
    document = report.document(found)
    assert document["first_bad"] == shas[4]
    assert document["outcome"] == "found"
    assert document["benchmark"] == {"test_id": "t.py::test_a", "key": CONFIG.key}
    assert document["steps"][0]["commit"]["sha"] == shas[15]
    json.dumps(document)
    markdown = report.render_markdown(found)
    assert markdown.startswith(f"### 🔎 cnnperf bisect: `{shas[4][:10]}` Commit 4\n")


# ---- the command, on a throw-away project ----

PACKAGE = '''
import time

from torch import nn


class Net(nn.Module):
    """A tiny net whose step is mostly a sleep of SLEEP_S: repeatable on a busy machine; KEEP
    bytes are kept alive from one step to the next."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 10)
        self.kept = None

    def forward(self, x):
        time.sleep(SLEEP_S)
        if KEEP:
            self.kept = None
            self.kept = torch.ones(KEEP // 4)
        return self.head(self.conv(x).mean(dim=(2, 3)))
'''


def write_package(folder: Path, sleep: float = 0.010, keep: int = 0, broken: bool = False) -> None:
    source = "import torch\n" + textwrap.dedent(PACKAGE) + f"\nSLEEP_S = {sleep}\nKEEP = {keep}\n"
    if broken:
        source = "raise ImportError('a broken commit')\n" + source
    (folder / "src" / "proj" / "__init__.py").write_text(source)


@pytest.fixture
def project(tmp_path: Path) -> Callable[..., tuple[Path, list[str]]]:
    """``project(changes)``: a repository of one commit per entry of ``changes`` (a dict of
    write_package's arguments, or ``{}`` for a commit that changes nothing that runs)."""

    def make(changes: list[dict[str, object]]) -> tuple[Path, list[str]]:
        folder = tmp_path / "project"
        (folder / "src" / "proj").mkdir(parents=True)
        (folder / "pytest.ini").write_text(
            "[pytest]\npythonpath = src\ncnnperf_min_time = 0.05\ncnnperf_calibration = false\n"
        )
        (folder / "test_perf.py").write_text(
            "from proj import Net\n\n\ndef test_net(cnnperf):\n"
            "    cnnperf.train_step(Net(), batch_size=2, image_size=16)\n"
        )
        (folder / ".gitignore").write_text("__pycache__/\n")
        git(folder, "init", "-q", "-b", "main")
        state: dict[str, object] = {}
        shas = []
        for i, change in enumerate(changes):
            state = {**{k: v for k, v in state.items() if k != "broken"}, **change}
            write_package(folder, **state)  # type: ignore[arg-type]
            (folder / "log.txt").write_text(str(i))
            git(folder, "add", "-A")
            git(folder, "commit", "-qm", f"Change {i}: {change or 'nothing that runs'}")
            shas.append(git(folder, "rev-parse", "HEAD"))
        return folder, shas

    return make


def cnnperf(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_cnnperf.cli", *args],
        cwd=folder,
        # one thread, which another process holding a core does not stall (see test_against)
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


def test_no_regression_between_good_and_bad_exits_1_with_the_figures(
    project: Callable[..., tuple[Path, list[str]]],
) -> None:
    folder, shas = project([{}, {}])
    before = checkout_state(folder)
    done = cnnperf(folder, "bisect", shas[0], shas[1], "--", "test_perf.py")
    # unchanged code: "no regression" (1), or "unsure" (4) while another process loads a core
    assert done.returncode in (bisect.NOTHING, bisect.UNSURE), done.stdout + done.stderr
    assert "nothing bisected" in done.stdout.splitlines()[-1]
    assert checkout_state(folder) == before


def test_usage_errors_exit_2_naming_the_fix(
    project: Callable[..., tuple[Path, list[str]]], tmp_path: Path
) -> None:
    folder, shas = project([{}])
    done = cnnperf(folder, "bisect", shas[0], "--", "test_perf.py")
    assert done.returncode == 2
    assert done.stderr == (
        "cnnperf bisect: give GOOD and BAD (got 1 revision): cnnperf bisect GOOD BAD -- "
        "PYTEST_ARGS, or cnnperf bisect --history TARGET TEST_ID -- PYTEST_ARGS\n"
    )
    done = cnnperf(folder, "bisect", "nope", shas[0], "--", "test_perf.py")
    assert done.returncode == 2
    assert "GOOD=nope: git knows no commit 'nope'" in done.stderr
    done = cnnperf(folder, "bisect", shas[0], shas[0])
    assert done.returncode == 2
    assert "give the pytest arguments that select the benchmark after --" in done.stderr


@pytest.mark.slow  # a dozen pytest runs of a few seconds each, both sides measured
def test_a_slowdown_among_sixteen_commits_is_found_with_a_broken_commit_skipped(
    project: Callable[..., tuple[Path, list[str]]], tmp_path: Path
) -> None:
    changes: list[dict[str, object]] = [{} for _ in range(16)]
    changes[9] = {"sleep": 0.030}
    changes[5] = {"broken": True}
    folder, shas = project(changes)
    before = checkout_state(folder)
    output = tmp_path / "bisect.json"
    started = time.perf_counter()
    done = cnnperf(folder, "bisect", shas[0], shas[15], "--json", str(output), "--", "test_perf.py")
    assert done.returncode == bisect.FOUND, done.stdout + done.stderr
    document = json.loads(output.read_text())
    assert document["first_bad"] == shas[9]
    distinct = {s["commit"]["sha"] for s in document["steps"]}
    skipped = sum(1 for s in document["steps"] if s.get("bad") is None and s["role"] == "bisect")
    assert len(distinct) <= 6 + skipped
    assert f"first bad commit: {shas[9]} Change 9" in done.stdout
    assert time.perf_counter() - started < 600
    assert checkout_state(folder) == before


@pytest.mark.slow  # the same, for memory
def test_a_memory_regression_is_bisected_the_same_way(
    project: Callable[..., tuple[Path, list[str]]],
) -> None:
    changes: list[dict[str, object]] = [{} for _ in range(8)]
    changes[3] = {"keep": 64 << 20}
    folder, shas = project(changes)
    done = cnnperf(folder, "bisect", shas[0], shas[7], "--", "test_perf.py")
    assert done.returncode == bisect.FOUND, done.stdout + done.stderr
    assert f"first bad commit: {shas[3]}" in done.stdout


@pytest.mark.slow  # a bisection interrupted while a commit is measured
def test_ctrl_c_leaves_the_checkout_as_it_was(
    project: Callable[..., tuple[Path, list[str]]],
) -> None:
    changes: list[dict[str, object]] = [{} for _ in range(8)]
    changes[4] = {"sleep": 0.030}
    folder, shas = project(changes)
    before = checkout_state(folder)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest_cnnperf.cli",
            "bisect",
            shas[0],
            shas[7],
            "--",
            "test_perf.py",
        ],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the terminal's Ctrl-C reaches the whole group
    )
    time.sleep(12)
    os.killpg(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == bisect.INTERRUPTED, output
    assert checkout_state(folder) == before
    assert list(Path(tempfile.gettempdir()).glob(f"{WORKTREE_PREFIX}{process.pid}-*")) == []
