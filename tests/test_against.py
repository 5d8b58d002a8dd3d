"""Gating against a git revision measured in the same run (``--cnnperf-against``): the paired
design and verdicts on scripted samples, the leak check, git's answers and worktrees, and whole
runs in throw-away repositories."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time
import types
import uuid
from pathlib import Path

import pytest
from factories import CONFIG, ENV
from repos import checkout_state
from repos import git as git_

from pytest_cnnperf.gate.policy import CPU, CUDA, GateSettings
from pytest_cnnperf.gate.sequential import Next, Pairing
from pytest_cnnperf.model import (
    Against,
    Decision,
    Measurement,
    MemoryPeak,
    NotAtRevision,
    Result,
    Revision,
    Sample,
    UnequalPairs,
    Verdict,
)
from pytest_cnnperf.parsers import parse_revision
from pytest_cnnperf.revision import git
from pytest_cnnperf.revision.imports import leak_message, leaks

SETTINGS = GateSettings(CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False)
DESIGN = CPU.sampling.design(CPU.gate)
AGAINST = Against(
    Revision("main", "0123456789abcdef0123456789abcdef01234567", "Faster stem"),
    Revision("HEAD", "89abcdef0123456789abcdef0123456789abcdef", "Wider"),
)


# ---- the paired design and its verdicts, on scripted samples ----


def test_paired_looks_start_where_equal_counts_can_reach_their_share_of_alpha() -> None:
    """Three against three can never give p below 1/20; six against six can (1/924)."""
    assert DESIGN.looks == (3, 6, 12)
    assert DESIGN.paired().looks == (6, 12)
    assert CUDA.sampling.design(CUDA.gate).paired().looks == (6,)


def _sample(step: float, index: int, asked: Next, contention: float = 0.0) -> Sample:
    return Sample(
        step_time_s=step,
        step_times_s=(step,) * 4,
        calibration_s=1e-3,
        memory=MemoryPeak(100 << 20, 100 << 20, "test") if index < asked.memory else None,
        cpu_contention=contention,
    )


def _result(samples: list[Sample]) -> Result:
    return Result(
        config=CONFIG,
        test_id="tests/test_m.py::test_m",
        environment=ENV,
        measurement=Measurement(CONFIG.batch_size, tuple(samples), CONFIG.unit),
    )


def follow_pairs(
    course: Pairing,
    head: list[float],
    base: list[float],
    head_denied: list[float] | None = None,
    base_denied: list[float] | None = None,
) -> tuple[Decision, list[Next]]:
    """Run ``course`` as the runner does, the two sides' samples drawn from the lists in order."""
    ours: list[Sample] = []
    theirs: list[Sample] = []
    asked: list[Next] = []
    step: Next | None = course.first()
    decision = None
    while step is not None:
        asked.append(step)
        for i in range(step.samples):
            k = len(ours)
            ours.append(_sample(head[k], i, step, (head_denied or [0.0] * 99)[k]))
            if step.paired:
                theirs.append(_sample(base[k], i, step, (base_denied or [0.0] * 99)[k]))
        decision, step = course.look(_result(ours), _result(theirs) if theirs else None)
    assert decision is not None
    return decision, asked


def pairing(absent: str | None = None) -> Pairing:
    return Pairing(SETTINGS, DESIGN, AGAINST, profiled=False, absent=absent)


def test_both_sides_are_sampled_alike_and_a_clear_slowdown_regresses_at_the_first_look() -> None:
    decision, asked = follow_pairs(pairing(), head=[0.030] * 12, base=[0.020] * 12)
    assert decision.verdict is Verdict.REGRESSED
    assert [(n.samples, n.paired) for n in asked] == [(6, True)]
    assert decision.against == AGAINST
    assert decision.throughput is not None
    assert (decision.throughput.current_samples, decision.throughput.baseline_samples) == (6, 6)
    assert decision.throughput.machine_factor == 1.0  # no drift to allow for between the sides


def test_identical_sides_are_ok_and_no_drift_is_allowed_for() -> None:
    steps = [0.020 * (1 + 0.01 * (i % 3)) for i in range(12)]
    decision, _ = follow_pairs(pairing(), head=steps, base=list(reversed(steps)))
    assert decision.verdict is Verdict.OK
    assert decision.reasons == ()


def test_pairs_disturbed_unequally_cannot_show_a_change() -> None:
    """A neighbour that denied the head's samples a core made them slower than their pairs:
    that is the neighbour's doing, not the code's."""
    denied = [0.8] * 12
    decision, asked = follow_pairs(
        pairing(), head=[0.030] * 12, base=[0.020] * 12, head_denied=denied
    )
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert len(asked) == 1  # no pair was disturbed alike: more samples cannot help
    (reason,) = decision.reasons
    assert isinstance(reason, UnequalPairs)
    assert str(reason) == (
        "the machine was busy: 6 of 6 pairs of samples were disturbed unequally (one side's "
        "threads kept waiting for the CPU, or its GPU reporting a problem, more than the "
        "other's), so none can tell a change: no throughput verdict; re-run it when the "
        "machine is quieter"
    )


def test_pairs_whose_revision_side_was_starved_are_left_out_and_fake_no_improvement() -> None:
    """Every third pair's revision side was denied a core and ran 30 times slower (as its
    OpenMP threads do, spinning for a thread that cannot run): those pairs would make the code
    under test look far faster; left out, the other four decide."""
    starved = [i % 3 == 0 for i in range(12)]
    decision, asked = follow_pairs(
        pairing(),
        head=[0.020] * 12,
        base=[0.6 if s else 0.020 for s in starved],
        base_denied=[1.0 if s else 0.0 for s in starved],
    )
    assert decision.verdict is Verdict.OK
    assert [n.samples for n in asked] == [6]
    (reason,) = decision.reasons
    assert str(reason).endswith("; they were left out, and the other 4 decided")


def test_pairs_disturbed_alike_still_show_a_regression() -> None:
    """A busy neighbour slows both sides of a pair alike; the code's slowdown still shows."""
    decision, _ = follow_pairs(
        pairing(),
        head=[0.060] * 12,
        base=[0.040] * 12,
        head_denied=[0.7] * 12,
        base_denied=[0.72] * 12,
    )
    assert decision.verdict is Verdict.REGRESSED
    assert decision.reasons == ()


def test_a_benchmark_the_revision_lacks_is_new_after_a_first_look_of_its_own() -> None:
    decision, asked = follow_pairs(pairing("its test is not there"), head=[0.02] * 12, base=[])
    assert decision.verdict is Verdict.NEW
    assert [(n.samples, n.paired) for n in asked] == [(3, False)]
    (reason,) = decision.reasons
    assert reason == NotAtRevision("main (0123456789)", "its test is not there")
    assert str(reason) == "new since main (0123456789): its test is not there"


def test_a_revision_that_turns_out_to_make_other_calls_makes_the_benchmark_new() -> None:
    course = pairing()
    course.first()
    course.lost("the test ended before it reached benchmark #1 (m)")
    head = _result([_sample(0.02, i, Next(6, memory=1)) for i in range(6)])
    decision, step = course.look(head, None)
    assert step is None
    assert decision.verdict is Verdict.NEW
    assert "new since main (0123456789): the test ended" in str(decision.reasons[0])


# ---- the leak check ----


def _module(name: str, file: Path) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(file)
    return module


@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout with a src-layout package and its revision's worktree."""
    head, worktree = tmp_path / "head", tmp_path / "worktree"
    for top in (head, worktree):
        (top / "src" / "proj").mkdir(parents=True)
        (top / "src" / "proj" / "__init__.py").write_text("")
        (top / "tests").mkdir()
        (top / "tests" / "test_perf.py").write_text("")
        (top / "profile.py").write_text("")  # shadows the standard library's
    return head, worktree


def test_the_projects_modules_imported_from_the_worktree_are_no_leak(
    checkout: tuple[Path, Path],
) -> None:
    head, worktree = checkout
    modules = {
        "proj": _module("proj", worktree / "src" / "proj" / "__init__.py"),
        "test_perf": _module("test_perf", worktree / "tests" / "test_perf.py"),
        "profile": _module("profile", Path(sysconfig.get_path("stdlib")) / "profile.py"),
        "pytest_cnnperf": _module("pytest_cnnperf", head / "pytest_cnnperf" / "__init__.py"),
    }
    path = [str(worktree / "src"), str(worktree / "tests")]
    assert leaks(worktree, head, modules, path, environ={}) == []


@pytest.mark.parametrize(
    ("origin", "pythonpath", "how"),
    [("head", "", "checkout"), ("head", "HEAD_SRC", "pythonpath"), ("site", "", "installed")],
    ids=["editable", "pythonpath", "installed"],
)
def test_a_project_module_imported_from_elsewhere_is_a_leak_saying_where_and_the_fix(
    checkout: tuple[Path, Path], origin: str, pythonpath: str, how: str
) -> None:
    head, worktree = checkout
    site = Path(sysconfig.get_path("purelib"))
    file = (head / "src" if origin == "head" else site) / "proj" / "__init__.py"
    environ = {"PYTHONPATH": str(head / "src")} if pythonpath else {}
    found = leaks(worktree, head, {"proj": _module("proj", file)}, [str(worktree)], environ)
    assert [(leak.module, leak.how) for leak in found] == [("proj", how)]
    message = leak_message(found, "--cnnperf-against=main", worktree)
    assert message.startswith(
        f"--cnnperf-against=main: the revision's side imported the project's code from outside "
        f"its worktree ({worktree}): proj from {file}, "
    )
    assert "It would measure the code under test against itself." in message
    if how == "pythonpath":
        assert message.endswith(
            "Give PYTHONPATH relative paths (they resolve inside the worktree)."
        )
    else:
        assert message.endswith(
            "Uninstall the project from this environment (pip uninstall NAME) and let pytest "
            "put it on the path (pythonpath = src, or the project's folder, in the ini file)."
        )


# ---- git ----


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    git_(folder, "init", "-q", "-b", "main")
    (folder / "a.txt").write_text("a")
    git_(folder, "add", "a.txt")
    git_(folder, "commit", "-qm", "First")
    (folder / "a.txt").write_text("b")
    git_(folder, "commit", "-qam", "Second")
    return folder


def test_a_revision_is_resolved_with_its_subject_and_the_head_says_local_changes(
    repo: Path,
) -> None:
    base = git.resolve(repo, "HEAD~1", "--cnnperf-against=HEAD~1")
    assert (base.name, base.subject, len(base.sha)) == ("HEAD~1", "First", 40)
    assert str(base) == f"HEAD~1 ({base.sha[:10]})"
    assert not git.head(repo).dirty
    (repo / "a.txt").write_text("c")
    head = git.head(repo)
    assert head.dirty
    assert str(head) == f"{head.sha[:10]} with local changes"


def test_an_unknown_revision_is_refused_naming_it_and_the_forms(repo: Path) -> None:
    with pytest.raises(git.GitProblem) as caught:
        git.resolve(repo, "mian", "--cnnperf-against=mian")
    assert str(caught.value) == (
        "--cnnperf-against=mian: git knows no commit 'mian'; give a branch, a tag or a commit "
        "that git rev-parse accepts (git fetch origin first if it is a remote's)"
    )


def test_a_shallow_clone_without_the_revision_says_what_to_fetch(
    repo: Path, tmp_path: Path
) -> None:
    shallow = tmp_path / "shallow"
    git_(tmp_path, "clone", "-q", "--depth=1", f"file://{repo}", str(shallow))
    first = git_(repo, "rev-parse", "HEAD~1")
    with pytest.raises(git.GitProblem) as caught:
        git.resolve(shallow, first, f"--cnnperf-against={first}")
    assert str(caught.value) == (
        f"--cnnperf-against={first}: this clone is shallow and does not have {first}; fetch it "
        f"(git fetch --deepen=50 origin, or git fetch origin {first}), or clone with the "
        "history it needs (actions/checkout: fetch-depth: 0)"
    )


def test_outside_a_repository_the_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(git.GitProblem) as caught:
        git.toplevel(tmp_path, "--cnnperf-against=main")
    assert str(caught.value).startswith(f"--cnnperf-against=main: {tmp_path} is not in a git ")
    assert str(caught.value).endswith(
        "run pytest inside the project's git checkout, or gate against stored baselines without it"
    )


def test_a_worktree_is_made_apart_and_removed_leaving_the_checkout_as_it_was(repo: Path) -> None:
    before = checkout_state(repo)
    base = git.resolve(repo, "HEAD~1", "--cnnperf-against=HEAD~1")
    tree = git.Worktree.add(repo, base)
    assert tree.path.name.startswith(f"{git.WORKTREE_PREFIX}{os.getpid()}-")
    assert (tree.path / "a.txt").read_text() == "a"
    assert git.Worktree.add(repo, base).path == tree.path  # made once, reused by its sha
    assert tree.to_worktree(repo / "x" / "y.py") == tree.path / "x" / "y.py"
    tree.remove()
    assert not tree.path.exists()
    assert checkout_state(repo) == before


def test_the_worktree_of_a_killed_run_is_removed_by_the_next(repo: Path) -> None:
    base = git.resolve(repo, "HEAD~1", "--cnnperf-against=HEAD~1")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    left = (
        Path(git.tempfile.gettempdir()) / f"{git.WORKTREE_PREFIX}{dead.stdout.strip()}-{base.short}"
    )
    git_(repo, "worktree", "add", "--detach", "-q", str(left), base.sha)
    tree = git.Worktree.add(repo, base)
    assert not left.exists()
    assert str(left) not in git_(repo, "worktree", "list")
    tree.remove()


def test_a_revision_is_written_as_git_takes_it() -> None:
    assert parse_revision(" origin/main ") == "origin/main"
    for bad in ("", "--all", "main branch"):
        with pytest.raises(ValueError) as caught:
            parse_revision(bad)
        assert str(caught.value) == (
            f"{bad!r} is not a git revision; give a branch, a tag or a commit, such as main, "
            "origin/main, HEAD~1 or a sha"
        )


# ---- whole runs in a throw-away repository ----

PACKAGE = '''
import time

from torch import nn

SLEEP_S = {sleep}


class Net(nn.Module):
    """A tiny conv net whose step time is mostly a sleep: repeatable on a busy machine."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        time.sleep(SLEEP_S)
        return self.head(self.conv(x).mean(dim=(2, 3)))
'''

#: a benchmark of its own net, as the package's was first: a commit to the package leaves it be
UNCHANGED = (
    PACKAGE.format(sleep=0.010)
    + """

def test_same(cnnperf):
    cnnperf.train_step(Net(), batch_size=2, image_size=16)
"""
)

INI = """
[pytest]
{path}
cnnperf_min_time = 0.05
cnnperf_calibration = false
cnnperf_attribution = off
"""

TEST = """
from {package} import Net


def test_net(cnnperf):
    cnnperf.train_step(Net(), batch_size=2, image_size=16)
"""


@dataclasses.dataclass
class Project:
    pytester: pytest.Pytester
    package: str

    @property
    def path(self) -> Path:
        return self.pytester.path

    def git(self, *args: str) -> str:
        return git_(self.path, *args)

    def commit(self, message: str, sleep: float | None = None, **files: str) -> None:
        if sleep is not None:
            init = self.path / "src" / self.package / "__init__.py"
            init.write_text(textwrap.dedent(PACKAGE.format(sleep=sleep)))
        for name, text in files.items():
            (self.path / name).write_text(textwrap.dedent(text))
        self.git("add", "-A")
        self.git("commit", "-qm", message)

    def against(self, revision: str, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess(
            "--cnnperf",
            f"--cnnperf-against={revision}",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            *args,
            timeout=300,
        )


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A git repository with a src-layout package (a name of its own: the leak tests install
    it) and a benchmark test importing it; committed once, with a 10 ms step. Its runs train on
    one thread, which another process holding a core does not stall (two threads wait for
    each other there, tens of times their step): the outcomes hold on a busy machine."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    package = f"proj_{uuid.uuid4().hex[:8]}"
    (pytester.path / "src" / package).mkdir(parents=True)
    pytester.makeini(INI.format(path="pythonpath = src"))
    # what pytester itself writes beside the project
    (pytester.path / ".gitignore").write_text("__pycache__/\nstdout\nstderr\nrunpytest-current\n")
    for name in ("stdout", "stderr", "runpytest-current"):
        (pytester.path / name).touch()
    project = Project(pytester, package)
    project.git("init", "-q", "-b", "main")
    project.commit("A small net", sleep=0.010, **{"test_perf.py": TEST.format(package=package)})
    return project


def test_a_slower_commit_regresses_and_an_unchanged_benchmark_passes_leaving_nothing_behind(
    project: Project,
) -> None:
    """Ten times one benchmark's step, caught whatever else the machine runs (sleeping needs no
    CPU); beside it, a benchmark the commit does not touch is ok, or inconclusive on a busy
    machine: never a change (one run: each run starts two pytest processes)."""
    project.commit("An unchanged benchmark", **{"test_same.py": UNCHANGED})
    project.commit("Sleep ten times as long", sleep=0.100)
    before = checkout_state(project.path)
    report, summary, junit = (project.path.parent / name for name in ("r.json", "r.md", "r.xml"))
    slower = project.against(
        "HEAD~1", f"--cnnperf-json={report}", f"--cnnperf-markdown={summary}", f"--junitxml={junit}"
    )
    slower.assert_outcomes(failed=1, passed=1)
    base = project.git("rev-parse", "HEAD~1")
    slower.stdout.fnmatch_lines(
        [
            "cnnperf: train_step Net bs=2 16x16 opt=sgd regressed (throughput)",
            f"  throughput  * now, * at HEAD~1 ({base[:10]}): -* (fails below -10%)",
            "              * samples now against * (look 1 of 2): *",  # pairs disturbed unequally are left out
            f"  against     * against HEAD~1 ({base[:10]}), both measured in this run",
            f"  Compared with HEAD~1 ({base[:10]}) in the same run, so the machine's speed is not "
            "the cause. If the change is intended, merge it: *",
            f"gated against HEAD~1 ({base[:10]}) measured in this run: An unchanged benchmark; "
            "the code under test is *",
        ]
    )
    results = {r["test_id"]: r for r in json.loads(report.read_text())["results"]}
    assert results["test_same.py::test_same"]["decision"]["verdict"] in ("ok", "inconclusive")
    result = results["test_perf.py::test_net"]
    decision = result["decision"]
    assert decision["verdict"] == "regressed"
    assert decision["against"]["base"] == {
        "name": "HEAD~1",
        "sha": base,
        "subject": "An unchanged benchmark",
    }
    assert decision["against"]["head"]["sha"] == project.git("rev-parse", "HEAD")
    taken = len(result["measurement"]["samples"])
    assert len(decision["reference"]["samples"]) == taken
    assert taken in DESIGN.paired().looks  # the two sides look together
    head = project.git("rev-parse", "HEAD")
    assert summary.read_text().splitlines()[2] == (
        f"Gated against HEAD\\~1 ({base[:10]}) measured in this run: An unchanged benchmark; "
        f"the code under test is {head[:10]}."
    )
    xml = junit.read_text()
    for name, value in (("against", "HEAD~1"), ("against_sha", base), ("head_sha", head)):
        assert f'<property name="cnnperf.{name}" value="{value}" />' in xml
    assert checkout_state(project.path) == before
    assert project.git("worktree", "list").count("\n") == 0


def test_a_new_sync_fails_against_the_revision_and_a_marker_accepts_it(project: Project) -> None:
    """Both sides are counted: a ``.item()`` the commit added fails, whatever the clock says;
    beside it, the same step marked ``allowed_syncs=1`` is accepted where there is no baseline
    to record again (one run: each run starts two pytest processes)."""
    marked = (project.path / "test_perf.py").read_text()
    marked = marked.replace(
        "def test_net", "@pytest.mark.cnnperf(allowed_syncs=1)\ndef test_marked"
    )
    project.commit(
        "The same step, a sync allowed", **{"test_marked.py": "import pytest\n" + marked}
    )
    init = project.path / "src" / project.package / "__init__.py"
    init.write_text(
        init.read_text().replace(
            "time.sleep(SLEEP_S)", "time.sleep(SLEEP_S)\n        float(x.mean())"
        )
    )
    project.commit("Log the input's mean")
    report = project.path.parent / "r.json"
    synced = project.against("HEAD~1", f"--cnnperf-json={report}")
    synced.assert_outcomes(failed=1, passed=1)
    synced.stdout.fnmatch_lines(
        [
            "cnnperf: train_step Net bs=2 16x16 opt=sgd regressed (*host-device synchronisations)",
            "  structure: 1 new aten::_local_scalar_dense (*) per step, in Net (*allowed_syncs=1*",
        ]
    )
    synced.stdout.fnmatch_lines(
        ["*structure: 1 new aten::_local_scalar_dense * per step, in Net; * (reported*"]
    )
    synced.stdout.fnmatch_lines(["FAILED test_perf.py::test_net*"])
    results = {r["test_id"]: r for r in json.loads(report.read_text())["results"]}
    assert results["test_perf.py::test_net"]["decision"]["verdict"] == "regressed"
    assert results["test_marked.py::test_marked"]["decision"]["verdict"] != "regressed"
    assert results["test_perf.py::test_net"]["decision"]["reference"]["samples"][0]["structure"][
        "counts"
    ]


@pytest.mark.parametrize(
    "options",
    [
        ("--cnnperf-save",),
        ("--pyargs", "pytest_cnnperf.zoo"),
        ("--cnnperf-inprocess",),
    ],
    ids=["save", "pyargs", "inprocess"],
)
def test_what_cannot_be_gated_against_a_revision_is_a_usage_error(
    project: Project, options: tuple[str, ...]
) -> None:
    result = project.pytester.runpytest("--cnnperf", "--cnnperf-against=HEAD", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    expected = {
        "--cnnperf-save": "*--cnnperf-against=HEAD with --cnnperf-save: a run gated against a "
        "revision records no baselines; drop one of them*",
        "--pyargs": "*--cnnperf-against=HEAD with --pyargs: --pyargs imports the tests from an "
        "installed package, which the revision's worktree cannot replace, so both sides would "
        "run the same code; name the tests by their paths in the checkout*",
        "--cnnperf-inprocess": "*--cnnperf-against=HEAD with --cnnperf-inprocess (or "
        "cnnperf_inprocess = true): the revision's samples are taken in processes of their "
        "own, and both sides must be measured alike; drop --cnnperf-inprocess*",
    }[options[0]]
    result.stderr.fnmatch_lines([expected])


def test_a_benchmark_the_revision_lacks_is_new_and_a_data_parallel_step_is_refused(
    project: Project,
) -> None:
    """One commit adds a benchmark's test file and makes the other benchmark data-parallel; one
    run against its parent shows both (each run starts two pytest processes, whose imports of
    torch take most of its time)."""
    project.commit(
        "Another benchmark, and two ranks",
        **{
            "test_more.py": f"""
                from {project.package} import Net


                def test_more(cnnperf):
                    cnnperf.train_step(Net(), batch_size=2, image_size=16)
                """,
            "test_perf.py": f"""
                from {project.package} import Net


                def test_net(cnnperf):
                    cnnperf.train_step(Net(), batch_size=2, image_size=16, world_size=2)
                """,
        },
    )
    result = project.against("HEAD~1", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_more.py::test_more PASSED*",
            "2 benchmarks: 1 error (test_net), 1 new",
            "note: test_more: new since HEAD~1 (*): its test file is not there",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "cnnperf: measuring train_step Net bs=4 16x16 opt=sgd world=2 on cpu failed: "
            "world_size=2 with --cnnperf-against=HEAD~1: data-parallel steps are gated against "
            "stored baselines only (each side's ranks would need the GPUs at once); gate it "
            "without --cnnperf-against, or measure it with world_size=1"
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_perf.py::test_net*"])


def test_an_unknown_revision_is_a_usage_error(project: Project) -> None:
    result = project.pytester.runpytest("--cnnperf", "--cnnperf-against=mian")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--cnnperf-against=mian: git knows no commit 'mian'; *"])


def _install(project: Project, how: str) -> Path:
    site = Path(sysconfig.get_path("purelib"))
    if how == "editable":
        path = site / f"__editable__.{project.package}.pth"
        path.write_text(str(project.path / "src") + "\n")
        return path
    path = site / project.package
    path.mkdir()
    (path / "__init__.py").write_text(
        (project.path / "src" / project.package / "__init__.py").read_text()
    )
    return path


@pytest.mark.parametrize(
    "how",
    [
        "editable",
        # the same run and stop for a copy in site-packages: its message is checked without a
        # run by test_a_project_module_imported_from_elsewhere_is_a_leak_saying_where_and_the_fix
        # [installed], and the run stopped end to end by [editable]
        pytest.param("copy", marks=pytest.mark.slow),
    ],
)
def test_a_package_installed_outside_the_worktree_stops_the_run(project: Project, how: str) -> None:
    """A project that relies on its installed package (no ``pythonpath`` in its ini): both
    sides would import the installed one."""
    project.commit("The package as installed", **{"tox.ini": INI.format(path="")})
    # ten times the step: caught whatever else the machine runs (sleeping needs no CPU)
    project.commit("Sleep ten times as long", sleep=0.100)
    installed = _install(project, how)
    try:
        result = project.against("HEAD~1")
    finally:
        if installed.is_dir():
            shutil.rmtree(installed)
        else:
            installed.unlink()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    where = (
        f"{project.path}/src/{project.package}/__init__.py, the checkout under test (an "
        "editable install or a .pth file points at it)"
        if how == "editable"
        else f"{sysconfig.get_path('purelib')}/{project.package}/__init__.py, an installed copy "
        "in site-packages"
    )
    result.stdout.fnmatch_lines(
        [
            f"*cnnperf: --cnnperf-against=HEAD~1: the revision's side imported the project's code "
            f"from outside its worktree (*): {project.package} from {where}. It would measure "
            "the code under test against itself. Uninstall the project from this environment "
            "(pip uninstall NAME) and let pytest put it on the path (pythonpath = src, or the "
            "project's folder, in the ini file).*"
        ]
    )
    assert project.git("worktree", "list").count("\n") == 0


def _processes(pattern: str) -> list[str]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return done.stdout.split()


@pytest.mark.slow  # pytest and its revision's process started, interrupted, started again
def test_ctrl_c_and_a_kill_leave_no_worktree_process_or_file_behind(project: Project) -> None:
    # ten times the step: caught whatever else the machine runs (sleeping needs no CPU)
    project.commit("Sleep ten times as long", sleep=0.100)
    before = checkout_state(project.path)
    command = [sys.executable, "-m", "pytest", "--cnnperf", "--cnnperf-against=HEAD~1"]
    command += ["-p", "no:cacheprovider"]
    for signum in (signal.SIGINT, signal.SIGKILL):
        process = subprocess.Popen(
            [*command, "-p", "no:randomly"],
            cwd=project.path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        made = f"{git.WORKTREE_PREFIX}{process.pid}-"
        deadline = time.monotonic() + 60
        while made not in project.git("worktree", "list") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(4)  # both sides sampling by now
        process.send_signal(signum)
        process.wait(timeout=60)
        time.sleep(0.5)  # the kernel ends what a kill leaves (their parent's death signal)
        assert _processes(made) == []
        if signum == signal.SIGINT:
            assert process.returncode == pytest.ExitCode.INTERRUPTED
            assert checkout_state(project.path) == before
            assert list(Path(git.tempfile.gettempdir()).glob(f"{made}*")) == []
    # the killed run could remove nothing: the next run removes its worktree
    assert made in project.git("worktree", "list")
    project.against("HEAD~1").assert_outcomes(failed=1)
    assert checkout_state(project.path) == before
    assert list(Path(git.tempfile.gettempdir()).glob(f"{made}*")) == []


@pytest.mark.slow  # two workers, each with its revision's process
def test_under_xdist_each_worker_has_its_own_revision_process_and_one_worktree(
    project: Project,
) -> None:
    # ten times the step: caught whatever else the machine runs (sleeping needs no CPU)
    project.commit("Sleep ten times as long", sleep=0.100)
    result = project.against("HEAD~1", "-n", "2", "-p", "xdist")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gated against HEAD~1 (*) measured in this run*"])
    assert project.git("worktree", "list").count("\n") == 0
