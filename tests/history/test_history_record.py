"""``--cnnperf-history``: every benchmarked run appended at the end of the session, by the
process that ends it; a history out of reach is one message and costs nothing else; the creep
gate. The runs take scripted samples (``tests/scripted.py``) through the real plugin, session,
baselines, gate and history; one run measures for real and is recorded whole. No timing is
asserted."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from scripted import Scripted

from pytest_cnnperf.history import store
from pytest_cnnperf.history.store import open_store
from pytest_cnnperf.store import results_file

BENCH = """
from models import Sleepy

def test_a(cnnperf):
    cnnperf.train_step(Sleepy(name="a"), batch_size=2, image_size=8)

def test_b(cnnperf):
    cnnperf.train_step(Sleepy(name="b"), batch_size=2, image_size=8)
"""


def add_ini(project: pytest.Pytester, lines: str) -> None:
    """Add settings to the project's ini file (``makeini`` writes ``tox.ini``)."""
    ini = project.path / "tox.ini"
    ini.write_text(ini.read_text().rstrip("\n") + "\n" + lines)


def entries(target: Path | str) -> list[tuple[int, str, str]]:
    with open_store(target) as history:
        return [(e.run_id, e.result.test_id, str(e.result.verdict)) for e in history.entries()]


@pytest.fixture
def scripted() -> Scripted:
    """Scripted samples for a project's runs: ``project.runpytest(..., plugins=[scripted])``."""
    return Scripted()


def test_a_measured_run_is_recorded_whole(project: pytest.Pytester) -> None:
    """The end-to-end test that times for real: the history keeps each result as the results
    file has it (environment, samples, decision), with the run's machine."""
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest(
        "--cnnperf",
        "--cnnperf-history=perf/history.db",
        "--cnnperf-json=results.json",
        "test_bench.py::test_a",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["recorded run 1 (1 benchmark) in the history perf/history.db"])
    (written,) = results_file.load(project.path / "results.json").results
    with open_store(project.path / "perf" / "history.db") as history:
        (entry,) = history.entries()
    assert entry.result == written
    assert written.environment is not None
    assert entry.run.machine == written.environment.machine
    assert entry.run.git.commit is None  # pytester's folder is no git checkout
    assert written.measured.samples


def test_every_run_is_appended_at_the_end_of_the_session(
    project: pytest.Pytester, scripted: Scripted
) -> None:
    project.makepyfile(test_bench=BENCH)
    saved = project.runpytest(
        "--cnnperf", "--cnnperf-save", "--cnnperf-history=perf/history.db", plugins=[scripted]
    )
    saved.assert_outcomes(passed=2)
    saved.stdout.fnmatch_lines(["recorded run 1 (2 benchmarks) in the history perf/history.db"])
    gated = project.runpytest(
        "--cnnperf",
        "--cnnperf-history=perf/history.db",
        "test_bench.py::test_a",
        plugins=[scripted],
    )
    gated.assert_outcomes(passed=1)
    gated.stdout.fnmatch_lines(["recorded run 2 (1 benchmark) in the history perf/history.db"])
    target = project.path / "perf" / "history.db"
    assert entries(target) == [
        (1, "test_bench.py::test_a", "saved"),
        (1, "test_bench.py::test_b", "saved"),
        (2, "test_bench.py::test_a", "ok"),
    ]
    with open_store(target) as history:
        first = history.entries()[0]
    assert first.run.machine == first.result.environment.machine  # type: ignore[union-attr]
    assert len(first.result.measured.samples) == 9  # a saving run's samples
    assert [test for test, _ in scripted.script.taken][:2] == ["test_a", "test_b"]  # not timed


def test_the_ini_setting_is_relative_to_the_rootdir(
    project: pytest.Pytester, scripted: Scripted
) -> None:
    project.makepyfile(test_bench=BENCH)
    add_ini(project, "cnnperf_history = .cnnperf/history.db\n")
    sub = project.mkdir("sub")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)
        result = project.runpytest(
            "--cnnperf", f"{project.path}/test_bench.py::test_a", plugins=[scripted]
        )
    result.assert_outcomes(passed=1)
    assert len(entries(project.path / ".cnnperf" / "history.db")) == 1


def test_a_run_without_benchmarks_appends_nothing(project: pytest.Pytester) -> None:
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = project.runpytest("--cnnperf", "--cnnperf-history=history.db")
    result.assert_outcomes(passed=1)
    assert not (project.path / "history.db").exists()


def test_a_bad_target_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--cnnperf", "--cnnperf-history=mysql://db/perf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*argument --cnnperf-history: 'mysql://db/perf' is not a history; use a SQLite file's "
            "path such as .cnnperf/history.db, or a PostgreSQL URL such as "
            "postgresql://user@host:5432/perf"
        ]
    )


def test_a_server_out_of_reach_is_one_message_and_costs_nothing_else(
    project: pytest.Pytester, scripted: Scripted
) -> None:
    pytest.importorskip("psycopg")
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest(
        "--cnnperf",
        "--cnnperf-save",
        "--cnnperf-json=results.json",
        "--cnnperf-history=postgresql://perf:s3cret@127.0.0.1:9/perf",
        plugins=[scripted],
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "saved 2 baseline(s) to *test_bench.json",
            "wrote the results to results.json",
            "error: history postgresql://perf:***@127.0.0.1:9/perf: cannot connect: *; this run "
            "is not in it (its results, reports and baselines were written)",
        ]
    )
    assert "s3cret" not in result.stdout.str()
    assert sum("history postgresql" in line for line in result.stdout.lines) == 1
    assert len(json.loads((project.path / "results.json").read_text())["results"]) == 2


@pytest.mark.parametrize(
    ("prepare", "problem"),
    [
        (
            lambda p: sqlite3.connect(p).execute("PRAGMA user_version = 7").connection.close(),
            "it is a SQLite database of another application, not a history",
        ),
        (
            lambda p: (
                open_store(p, create=True).close(),
                sqlite3.connect(p).execute("PRAGMA user_version = 7").connection.close(),
            ),
            "it was written by a newer pytest-cnnperf (history schema version 7; this one reads "
            "up to 1); upgrade pytest-cnnperf",
        ),
    ],
    ids=["foreign", "newer"],
)
@pytest.mark.slow
def test_a_history_that_cannot_be_read_is_one_message(
    project: pytest.Pytester,
    scripted: Scripted,
    prepare: Callable[[Path], object],
    problem: str,
) -> None:
    project.makepyfile(test_bench=BENCH)
    prepare(project.path / "history.db")
    result = project.runpytest(
        "--cnnperf",
        "--cnnperf-save",
        "--cnnperf-json=r.json",
        "--cnnperf-history=history.db",
        plugins=[scripted],
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"error: history history.db: {problem}; this run is not in it (its results, reports "
            "and baselines were written)"
        ]
    )
    assert (project.path / "r.json").exists()
    assert list((project.path / "baselines").rglob("test_bench.json"))


def test_a_locked_history_is_one_message(
    project: pytest.Pytester, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(test_bench=BENCH)
    path = project.path / "history.db"
    open_store(path, create=True).close()
    monkeypatch.setattr(store, "LOCK_TIMEOUT_S", 0.3)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = project.runpytest(
            "--cnnperf", "--cnnperf-history=history.db", "test_bench.py::test_a", plugins=[scripted]
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "error: history history.db: it stayed locked by another process for 0.3 s (database "
            "is locked); try again when that process has finished; this run is not in it (its "
            "results, reports and baselines were written)"
        ]
    )


def test_a_postgresql_history(project: pytest.Pytester, scripted: Scripted, pg_url: str) -> None:
    project.makepyfile(test_bench=BENCH)
    for _ in range(2):
        result = project.runpytest(
            "--cnnperf", f"--cnnperf-history={pg_url}", "test_bench.py::test_b", plugins=[scripted]
        )
        result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"recorded run 2 (1 benchmark) in the history {store.display(pg_url)}"]
    )
    assert entries(pg_url) == [
        (1, "test_bench.py::test_b", "new"),
        (2, "test_bench.py::test_b", "new"),
    ]


# ---- the creep gate ----


CREEP_INI = "cnnperf_history = history.db\ncnnperf_creep = 30%\ncnnperf_creep_runs = 5\n"


@pytest.fixture
def crept(project: pytest.Pytester, scripted: Scripted) -> pytest.Pytester:
    """A project whose test_a slowed down after its first run, with its baseline re-saved
    after the slowdown: the baseline gate no longer sees it, the history does."""
    project.makepyfile(test_bench=BENCH)
    add_ini(project, CREEP_INI)
    project.runpytest("--cnnperf", "--cnnperf-save", plugins=[scripted]).assert_outcomes(passed=2)
    scripted.slow_down("test_a", 3.0)
    saved = project.runpytest(
        "--cnnperf", "--cnnperf-save", "test_bench.py::test_a", plugins=[scripted]
    )
    saved.assert_outcomes(passed=1)
    return project


def test_the_creep_gate_fails_a_slowdown_the_baseline_was_resaved_over(
    crept: pytest.Pytester, scripted: Scripted
) -> None:
    result = crept.runpytest("--cnnperf", plugins=[scripted])
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Sleepy bs=2 8x8 opt=sgd regressed (throughput against the best "
            "of its recent runs in the history)",
            "*  throughput  * images/s now, * images/s in the baseline: *(fails below -30%)",
            "*  note: creep: worse than the best of its last 2 runs on this machine in the history "
            "(20* *:*): throughput * images/s against * images/s, -*% (fails below -30%)",
            "*  To accept it, run: pytest --cnnperf --cnnperf-creep-accept test_bench.py::test_a",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_bench.py::test_a - *"])


@pytest.mark.slow
def test_an_accepted_run_is_where_the_creep_gate_starts(
    crept: pytest.Pytester, scripted: Scripted
) -> None:
    accepted = crept.runpytest("--cnnperf", "--cnnperf-creep-accept", plugins=[scripted])
    accepted.assert_outcomes(passed=2)
    crept.runpytest("--cnnperf", plugins=[scripted]).assert_outcomes(passed=2)


@pytest.mark.slow
def test_the_creep_gate_passes_a_steady_benchmark(
    project: pytest.Pytester, scripted: Scripted
) -> None:
    project.makepyfile(test_bench=BENCH)
    add_ini(project, CREEP_INI)
    first = project.runpytest("--cnnperf", "test_bench.py::test_b", plugins=[scripted])
    first.assert_outcomes(passed=1)
    result = project.runpytest("--cnnperf", "test_bench.py::test_b", plugins=[scripted])
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*note: creep*")


@pytest.mark.slow
def test_a_history_the_creep_gate_cannot_read_is_one_warning(
    project: pytest.Pytester, scripted: Scripted
) -> None:
    pytest.importorskip("psycopg")
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest(
        "--cnnperf",
        "--cnnperf-creep=10%",
        "--cnnperf-history=postgresql://127.0.0.1:9/perf",
        plugins=[scripted],
    )
    result.assert_outcomes(passed=2)
    warnings = [line for line in result.stdout.lines if line.startswith("warning: history")]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "warning: history postgresql://127.0.0.1:9/perf: cannot connect: "
    )
    assert warnings[0].endswith("; the creep gate (--cnnperf-creep) was not applied")


def test_help_lists_the_history_settings(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    for option in ("--cnnperf-history=TARGET", "--cnnperf-creep=PCT", "--cnnperf-creep-accept"):
        result.stdout.fnmatch_lines([f"  {option}*"])
    for ini in ("cnnperf_history", "cnnperf_creep", "cnnperf_creep_runs"):
        result.stdout.fnmatch_lines([f"  {ini} (string):*"])
    result.stdout.fnmatch_lines(
        ["  cnnperf_creep_runs (string):", "*creep gate takes the best", "*of. Default: 10"]
    )


def test_the_creep_gate_without_a_history_is_a_usage_error(project: pytest.Pytester) -> None:
    add_ini(project, "cnnperf_creep = 10%\n")
    result = project.runpytest("--cnnperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: the creep gate (--cnnperf-creep, cnnperf_creep) compares with a history: give "
            "one with --cnnperf-history=TARGET or the ini setting cnnperf_history"
        ]
    )


def test_an_interrupted_run_is_not_recorded(project: pytest.Pytester, scripted: Scripted) -> None:
    project.makepyfile(test_bench=BENCH + "\ndef test_c():\n    raise KeyboardInterrupt\n")
    result = project.runpytest(
        "--cnnperf",
        "--cnnperf-history=history.db",
        "--cnnperf-json=results.json",
        plugins=[scripted],
        no_reraise_ctrlc=True,  # the interrupt ends the inner run, not the one running this test
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*the run was interrupted: it is not recorded in the history*"])
    assert not (project.path / "history.db").exists()
    # though both benchmarks had measured by then
    measured = results_file.load(project.path / "results.json").measured
    assert [r.test for r in measured] == ["test_a", "test_b"]
