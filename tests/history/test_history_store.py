"""The history's storage on SQLite and a real PostgreSQL server: what goes in comes back, the
schema has a version and migrations, and every way a history can be out of reach is one message
naming it."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import known
import pytest

from pytest_cnnperf.history import store
from pytest_cnnperf.history.runs import CiRun, GitState, RunInfo
from pytest_cnnperf.history.store import HistoryProblem, open_store
from pytest_cnnperf.model import MachineDrift


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A new history of each kind: a SQLite file's path or a PostgreSQL database's URL."""
    if request.param == "sqlite":
        return tmp_path / "history.db"
    url: str = request.getfixturevalue("pg_url")
    return url


def test_runs_and_results_come_back_as_they_went_in(target: Path | str) -> None:
    first, second = known.run_info(0), known.run_info(1, accepted=True)
    results = [known.result(kind, 0) for kind in known.KINDS]
    with open_store(target, create=True) as history:
        assert history.append(first, results) == 1
        assert history.append(second, results[:1]) == 2
        entries = history.entries()
    assert [(e.run_id, e.result.test_id) for e in entries] == [
        (1, "test_history.py::test_step"),
        (1, "test_history.py::test_creep"),
        (1, "test_history.py::test_flat"),
        (2, "test_history.py::test_step"),
    ]
    assert entries[0].run == first
    assert entries[3].run == second
    assert [e.result for e in entries[:3]] == results


def test_recent_runs_are_the_newest_since_the_last_accepted_one(target: Path | str) -> None:
    step = "test_history.py::test_step"
    key = known.result("step", 0).key
    machine = known.environment().machine
    with open_store(target, create=True) as history:
        for run in range(6):
            history.append(known.run_info(run, accepted=run == 2), [known.result("step", run)])
        history.append(known.run_info(6), [known.result("flat", 6)])
        recent = history.recent(step, key, machine, runs=2)
        since_accepted = history.recent(step, key, machine, runs=10)
        elsewhere = history.recent(step, key, "another-machine", runs=10)
    assert [e.run_id for e in recent] == [6, 5]
    assert [e.run_id for e in since_accepted] == [6, 5, 4, 3]
    assert elsewhere == []


def test_a_result_that_failed_to_run_is_kept(target: Path | str) -> None:
    failed = dataclasses.replace(known.result("step", 0), measurement=None, error="boom")
    with open_store(target, create=True) as history:
        history.append(known.run_info(0), [failed])
        (entry,) = history.entries()
    assert entry.result.error == "boom"


def test_every_field_of_a_run_comes_back(target: Path | str) -> None:
    """A run with every field set (a pull request's CI job on a dirty checkout, accepted) is
    read back whole: its JSON is derived from the dataclasses, nothing is left out."""
    info = known.run_info(
        0,
        git=GitState("c" * 40, "faster-stem", True, "2026-11-01T00:00:00+00:00"),
        ci=CiRun(
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
        ),
        accepted=True,
    )
    assert info.ci is not None
    parts: tuple[RunInfo, GitState, CiRun] = (info, info.git, info.ci)
    for part in parts:
        unset = [f.name for f in dataclasses.fields(part) if getattr(part, f.name) is None]
        assert unset == [], f"set {unset} of {type(part).__name__} above"
    with open_store(target, create=True) as history:
        history.append(info, [known.result("flat", 0)])
        (entry,) = history.entries()
    assert entry.run == info


def test_a_new_sqlite_history_is_marked_with_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "history.db"
    open_store(path, create=True).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert conn.execute("PRAGMA application_id").fetchone()[0] == store.APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_newer_schema_is_refused(target: Path | str, monkeypatch: pytest.MonkeyPatch) -> None:
    open_store(target, create=True).close()
    newer = (*store.MIGRATIONS, ("CREATE TABLE cnnperf_later (id INTEGER)",))
    monkeypatch.setattr(store, "MIGRATIONS", newer)
    monkeypatch.setattr(store, "SCHEMA_VERSION", len(newer))
    open_store(target).close()  # migrated to version 2
    monkeypatch.setattr(store, "MIGRATIONS", newer[:1])
    monkeypatch.setattr(store, "SCHEMA_VERSION", 1)
    with pytest.raises(HistoryProblem) as raised:
        open_store(target)
    assert str(raised.value) == (
        f"history {store.display(target)}: it was written by a newer pytest-cnnperf (history "
        "schema version 2; this one reads up to 1); upgrade pytest-cnnperf"
    )


def test_results_recorded_before_0_1_0_are_refused_with_the_fix(tmp_path: Path) -> None:
    """Their JSON has no ``schema_version``: the message names the history, the run and what
    is missing, and says to record into a new history."""
    path = tmp_path / "history.db"
    with open_store(path, create=True) as history:
        history.append(known.run_info(0), [known.result("flat", 0)])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE cnnperf_results SET result = json_remove(result, '$.schema_version')")
    conn.commit()
    conn.close()
    with open_store(path) as history, pytest.raises(HistoryProblem) as raised:
        history.entries()
    assert str(raised.value) == (
        f"history {store.display(path)}: run 1 cannot be read: result: its schema_version is "
        "missing or not a number; a history recorded before pytest-cnnperf 0.1.0 is not read: "
        "record into a new one (--cnnperf-history=PATH)"
    )


def test_an_older_schema_is_migrated_keeping_its_runs(
    target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(target, create=True) as history:
        history.append(known.run_info(0), [known.result("flat", 0)])
    later = (
        *store.MIGRATIONS,
        ("CREATE INDEX cnnperf_runs_commit ON cnnperf_runs (commit_sha)",),
    )
    monkeypatch.setattr(store, "MIGRATIONS", later)
    monkeypatch.setattr(store, "SCHEMA_VERSION", 2)
    with open_store(target) as history:
        history.append(known.run_info(1), [known.result("flat", 1)])
        assert [e.run_id for e in history.entries()] == [1, 2]
    if isinstance(target, Path):
        conn = sqlite3.connect(target)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        conn.close()
    else:
        import psycopg

        with psycopg.connect(target) as conn:
            versions = [row[0] for row in conn.execute("SELECT version FROM cnnperf_schema")]
        assert sorted(versions) == [1, 2]


def test_a_missing_file_is_not_created_when_reading(tmp_path: Path) -> None:
    with pytest.raises(HistoryProblem) as raised:
        open_store(tmp_path / "none.db")
    assert str(raised.value) == (
        f"history {store.display(tmp_path / 'none.db')}: no such file; record runs into it "
        "with pytest --cnnperf --cnnperf-history=PATH"
    )
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (
            lambda p: p.mkdir(),
            "it is a directory; give a SQLite file's path, e.g. .cnnperf/history.db",
        ),
        (
            lambda p: p.write_text("results,of,something\n" * 100),
            "it is not a SQLite database of pytest-cnnperf (file is not a database)",
        ),
        (
            lambda p: (
                sqlite3.connect(p).execute("CREATE TABLE notes (text TEXT)").connection.commit()
            ),
            "it is a SQLite database of another application, not a history",
        ),
    ],
    ids=["directory", "not-sqlite", "foreign"],
)
def test_a_file_that_is_not_a_history_is_refused(
    tmp_path: Path, make: Callable[[Path], object], problem: str
) -> None:
    path = tmp_path / "history.db"
    make(path)
    with pytest.raises(HistoryProblem) as raised:
        open_store(path, create=True)
    assert str(raised.value) == f"history {store.display(path)}: {problem}"


def test_a_file_in_the_way_of_the_folder_is_one_message(tmp_path: Path) -> None:
    (tmp_path / "perf").write_text("")
    path = tmp_path / "perf" / "history.db"
    with pytest.raises(HistoryProblem) as raised:
        open_store(path, create=True)
    assert str(raised.value) == (
        f"history {store.display(path)}: its folder cannot be made (File exists: "
        f"{tmp_path / 'perf'})"
    )


def test_a_result_json_cannot_hold_is_one_message(tmp_path: Path) -> None:
    result = known.result("flat", 0)
    assert result.decision is not None
    broken = dataclasses.replace(
        result, decision=dataclasses.replace(result.decision, reasons=(MachineDrift(float("nan")),))
    )
    with open_store(tmp_path / "h.db", create=True) as history:
        with pytest.raises(HistoryProblem) as raised:
            history.append(known.run_info(0), [broken])
        assert history.entries() == []
    assert str(raised.value).endswith(
        "h.db: a result cannot be stored: cannot store the non-finite number nan"
    )


def test_a_locked_file_is_a_problem_after_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "history.db"
    open_store(path, create=True).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(store, "LOCK_TIMEOUT_S", 0.2)
    try:
        with pytest.raises(HistoryProblem) as raised, open_store(path) as history:
            history.append(known.run_info(0), [known.result("flat", 0)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(raised.value) == (
        f"history {store.display(path)}: it stayed locked by another process for 0.2 s "
        "(database is locked); try again when that process has finished"
    )


def test_no_server_is_one_message_with_the_password_masked() -> None:
    pytest.importorskip("psycopg")
    url = "postgresql://perf:s3cret@127.0.0.1:9/perf?sslmode=disable"
    with pytest.raises(HistoryProblem) as raised:
        open_store(url)
    message = str(raised.value)
    assert message.startswith(
        "history postgresql://perf:***@127.0.0.1:9/perf?sslmode=disable: cannot connect: "
    )
    assert "s3cret" not in message
    assert "\n" not in message


def test_a_wrong_password_is_one_message(pg_url: str) -> None:
    wrong = pg_url.replace(":cnnperf-secret@", ":wrong@")
    with pytest.raises(HistoryProblem) as raised:
        open_store(wrong)
    message = str(raised.value)
    assert message.startswith(
        f"history {store.display(wrong)}: cannot connect: connection failed: "
    )
    # then libpq's own words, which differ by the libpq psycopg-binary bundles: 3.1.4's libpq 15
    # says 'FATAL: ...', 3.3.9's libpq 18 names the server first ('connection to server at ...')
    port = wrong.split(":")[3].split("/")[0]
    assert message.endswith('FATAL:  password authentication failed for user "postgres"')
    middle = message.split(": cannot connect: connection failed: ", 1)[1].split("FATAL:", 1)[0]
    assert middle in ("", f'connection to server at "127.0.0.1", port {port} failed: ')


def test_a_postgresql_history_without_psycopg_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(HistoryProblem) as raised:
        open_store("postgresql://db.example/perf")
    assert str(raised.value) == (
        "history postgresql://db.example/perf: a PostgreSQL history needs psycopg 3: "
        "pip install 'pytest-cnnperf[history-postgres]'"
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:p@h:5432/d", "postgresql://u:***@h:5432/d"),
        ("postgresql://u@h/d", "postgresql://u@h/d"),
        (
            "postgres://h/d?password=p&sslmode=require",
            "postgres://h/d?password=***&sslmode=require",
        ),
    ],
)
def test_urls_are_shown_without_their_passwords(url: str, shown: str) -> None:
    assert store.display(url) == shown


# ---- concurrent writers ----


def _append_many(target: Path | str, writer: int, count: int) -> None:
    with open_store(target, create=True) as history:
        for i in range(count):
            info = dataclasses.replace(known.run_info(i), uid=f"w{writer}-{i}")
            history.append(info, [known.result(kind, i) for kind in known.KINDS])


@pytest.fixture
def spawn() -> multiprocessing.context.SpawnContext:
    return multiprocessing.get_context("spawn")


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(
    target: Path | str, spawn: multiprocessing.context.SpawnContext
) -> None:
    """Four processes open a new history at once (each running the migration) and append 25
    runs each: 100 runs, 300 results, each once."""
    writers = [spawn.Process(target=_append_many, args=(target, w, 25)) for w in range(4)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(120)
        assert process.exitcode == 0
    with open_store(target) as history:
        entries = history.entries()
    assert len({e.run.uid for e in entries}) == 100
    assert len(entries) == 300
    assert len({(e.run_id, e.result.test_id) for e in entries}) == 300
