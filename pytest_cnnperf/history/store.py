"""A history on disk or on a server: runs appended, results read back.

Two backends with one schema. A SQLite file (the standard library's ``sqlite3``) is the default:
one file, no server; it runs in WAL mode, every write is one ``BEGIN IMMEDIATE`` transaction (a
deferred one that reads and then writes fails at once when another writer got there first), and a
writer waits up to :data:`LOCK_TIMEOUT_S` for another's lock. A PostgreSQL database (``psycopg``
3, the ``history-postgres`` extra, imported only for a ``postgresql://`` URL) serves a team's many
runners: one transaction per run; plain inserts never conflict.

The schema has a version. SQLite keeps it in ``PRAGMA user_version`` (and marks the file as
ours with ``PRAGMA application_id``), PostgreSQL in a ``cnnperf_schema`` table; opening a history
applies the migrations it lacks, in one transaction (under an advisory lock on PostgreSQL), and
refuses a history written by a newer pytest-cnnperf. A run's result is kept as the JSON
``store.codec`` writes (with its ``schema_version``, which rows recorded before pytest-cnnperf
0.1.0 lack: such a history is not read), next to the columns the queries need.

Every problem (no server, a wrong password, a newer schema, a locked or foreign file) is a
:class:`HistoryProblem` whose message names the history (a URL's password masked) and the cause.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from ..model import Result
from ..store import codec, results_file
from ..store.locations import display_path
from .runs import Entry, RunInfo

#: seconds a SQLite writer waits for another writer's lock
LOCK_TIMEOUT_S = 30.0
#: seconds to wait for a PostgreSQL server to answer
CONNECT_TIMEOUT_S = 10
#: ``PRAGMA application_id`` of a SQLite history: "cnnp"
APPLICATION_ID = 0x636E6E70

#: Migration ``i`` takes the schema from version ``i`` to ``i + 1``; append, never edit. Column
#: types are spelled per backend (``{id}``, ``{bigint}``, ``{real}``, ``{bool}``).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE cnnperf_runs (
            id {id},
            uid TEXT NOT NULL UNIQUE,
            recorded TEXT NOT NULL,
            machine TEXT,
            host TEXT NOT NULL,
            commit_sha TEXT,
            branch TEXT,
            dirty {bool},
            ci_provider TEXT,
            ci_url TEXT,
            accepted {bool} NOT NULL,
            info TEXT NOT NULL
        )""",
        """CREATE TABLE cnnperf_results (
            id {id},
            run_id {bigint} NOT NULL REFERENCES cnnperf_runs (id),
            test_id TEXT NOT NULL,
            bench_key TEXT NOT NULL,
            machine TEXT NOT NULL,
            verdict TEXT NOT NULL,
            items_per_second {real},
            peak_allocated_bytes {bigint},
            result TEXT NOT NULL,
            UNIQUE (run_id, test_id, bench_key)
        )""",
        "CREATE INDEX cnnperf_results_series "
        "ON cnnperf_results (test_id, bench_key, machine, run_id)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

SQLITE_TYPES = {"id": "INTEGER PRIMARY KEY", "bigint": "INTEGER", "real": "REAL", "bool": "INTEGER"}
POSTGRES_TYPES = {
    "id": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    "bigint": "BIGINT",
    "real": "DOUBLE PRECISION",
    "bool": "BOOLEAN",
}

POSTGRES_EXTRA = "pip install 'pytest-cnnperf[history-postgres]'"
#: what to do with a history whose results this version does not read
NEW_HISTORY = (
    "a history recorded before pytest-cnnperf 0.1.0 is not read: record into a new one "
    "(--cnnperf-history=PATH)"
)


class HistoryProblem(Exception):
    """A history that cannot be used: the message names it and says why."""

    def __init__(self, target: str, problem: str) -> None:
        self.target = target
        self.problem = problem
        super().__init__(f"history {target}: {problem}")


def display(target: Path | str) -> str:
    """The history as messages name it: a path relative to here, a URL without its password."""
    if isinstance(target, Path):
        return display_path(target)
    parts = urllib.parse.urlsplit(target)
    netloc = parts.netloc
    if "@" in netloc:
        credentials, host = netloc.rsplit("@", 1)
        if ":" in credentials:
            netloc = f"{credentials.split(':', 1)[0]}:***@{host}"
    query = urllib.parse.urlencode(
        [
            (k, "***" if k == "password" else v)
            for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*/",
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _newer(version: int) -> str:
    return (
        f"it was written by a newer pytest-cnnperf (history schema version {version}; this one "
        f"reads up to {SCHEMA_VERSION}); upgrade pytest-cnnperf"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


_SELECT = (
    "SELECT r.id, r.info, x.result FROM cnnperf_results x JOIN cnnperf_runs r ON r.id = x.run_id"
)
_RECENT = (
    _SELECT + " WHERE x.test_id = ? AND x.bench_key = ? AND x.machine = ? "
    "AND x.items_per_second IS NOT NULL AND r.id >= coalesce(("
    "SELECT max(a.id) FROM cnnperf_results y JOIN cnnperf_runs a ON a.id = y.run_id "
    "WHERE y.test_id = ? AND y.bench_key = ? AND y.machine = ? AND a.accepted), 0) "
    "ORDER BY r.id DESC LIMIT ?"
)


def _run_row(run: RunInfo) -> tuple[Any, ...]:
    return (
        run.uid,
        run.recorded,
        run.machine,
        run.host,
        run.commit,
        run.branch,
        run.git.dirty,
        run.ci.provider if run.ci else None,
        run.ci.url if run.ci else None,
        run.accepted,
        json.dumps(codec.dump(run), sort_keys=True),
    )


_INSERT_RUN = (
    "INSERT INTO cnnperf_runs (uid, recorded, machine, host, commit_sha, branch, dirty, "
    "ci_provider, ci_url, accepted, info) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_RESULT = (
    "INSERT INTO cnnperf_results (run_id, test_id, bench_key, machine, verdict, "
    "items_per_second, peak_allocated_bytes, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def _result_rows(name: str, run: RunInfo, results: Sequence[Result]) -> list[tuple[Any, ...]]:
    """The rows of ``results``, without their run's id (first in the table); a problem for a
    result JSON cannot hold (a non-finite number)."""
    rows = []
    for result in results:
        m = result.measurement
        machine = result.environment.machine if result.environment else run.machine
        try:
            data = json.dumps(results_file.result_data(result), sort_keys=True)
        except ValueError as exc:
            raise HistoryProblem(name, f"a result cannot be stored: {exc}") from None
        rows.append(
            (
                result.test_id,
                result.key,
                machine or "unknown",
                result.verdict.value if result.verdict else "none",
                m.items_per_second if m else None,
                m.peak_allocated_bytes if m else None,
                data,
            )
        )
    return rows


class Store(AbstractContextManager["Store"]):
    """An open history. Use as a context manager, or :meth:`close` it."""

    #: how messages name it
    name: str

    def append(self, run: RunInfo, results: Sequence[Result]) -> int:
        """Store ``run`` with its results in one transaction; returns the run's number."""
        raise NotImplementedError

    def _query(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of ``sql``, written with ``?`` placeholders."""
        raise NotImplementedError

    def entries(self, machine: str | None = None) -> list[Entry]:
        """Every stored result with its run, oldest run first."""
        where = " WHERE x.machine = ?" if machine else ""
        rows = self._query(_SELECT + where + " ORDER BY r.id, x.id", [machine] if machine else [])
        return self._entries(rows)

    def recent(self, test_id: str, key: str, machine: str, runs: int) -> list[Entry]:
        """The newest ``runs`` measured results of one benchmark on one machine, newest first,
        none older than the newest run that accepted it (``--cnnperf-creep-accept``)."""
        rows = self._query(_RECENT, [test_id, key, machine, test_id, key, machine, runs])
        return self._entries(rows)

    def close(self) -> None:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _entries(self, rows: Sequence[tuple[Any, ...]]) -> list[Entry]:
        """Rows of ``(run id, run info JSON, result JSON)`` as entries; a value this version
        cannot read is a problem naming the run."""
        entries = []
        for run_id, info, result in rows:
            try:
                entries.append(
                    Entry(
                        int(run_id),
                        codec.load(RunInfo, json.loads(info), "info"),
                        results_file.read_result(json.loads(result), "result", NEW_HISTORY),
                    )
                )
            except (ValueError, codec.DataError) as exc:
                raise HistoryProblem(self.name, f"run {run_id} cannot be read: {exc}") from None
        return entries


# ---- SQLite ----


class SqliteStore(Store):
    def __init__(self, path: Path, create: bool) -> None:
        self.path = path
        self.name = display(path)
        if path.is_dir():
            why = "it is a directory; give a SQLite file's path, e.g. .cnnperf/history.db"
            raise HistoryProblem(self.name, why)
        if not create and not path.exists():
            why = "no such file; record runs into it with pytest --cnnperf --cnnperf-history=PATH"
            raise HistoryProblem(self.name, why)
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = f"its folder cannot be made ({exc.strerror}: {exc.filename})"
            raise HistoryProblem(self.name, why) from None
        try:
            self.conn = sqlite3.connect(path, timeout=LOCK_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            why = f"it cannot be opened ({_first_line(exc)})"
            raise HistoryProblem(self.name, why) from None
        try:
            self._prepare()
        except (sqlite3.Error, HistoryProblem) as exc:
            self.conn.close()
            why = exc.problem if isinstance(exc, HistoryProblem) else self._explain(exc)
            raise HistoryProblem(self.name, why) from None

    def _explain(self, exc: sqlite3.Error) -> str:
        text = _first_line(exc)
        if "locked" in text or "busy" in text:
            return (
                f"it stayed locked by another process for {LOCK_TIMEOUT_S:g} s ({text}); "
                "try again when that process has finished"
            )
        if "not a database" in text or "malformed" in text:
            return f"it is not a SQLite database of pytest-cnnperf ({text})"
        return f"SQLite failed: {text}"

    def _prepare(self) -> None:
        conn = self.conn
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")  # readers never block the writer
        conn.execute("PRAGMA synchronous = NORMAL")  # durable enough with WAL
        if self._version() == SCHEMA_VERSION:
            return
        with self._write():  # the write lock first, then the version: one migrator at a time
            version = self._version()
            for migration in MIGRATIONS[version:]:
                for statement in migration:
                    conn.execute(statement.format(**SQLITE_TYPES))
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _version(self) -> int:
        """The schema version; raises :class:`HistoryProblem` for another application's file or
        a newer schema."""
        application = int(self.conn.execute("PRAGMA application_id").fetchone()[0])
        version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
        tables = int(self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
        if application not in (0, APPLICATION_ID) or (application == 0 and (version or tables)):
            raise HistoryProblem(
                self.name, "it is a SQLite database of another application, not a history"
            )
        if version > SCHEMA_VERSION:
            raise HistoryProblem(self.name, _newer(version))
        return version

    @contextmanager
    def _write(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def append(self, run: RunInfo, results: Sequence[Result]) -> int:
        rows = _result_rows(self.name, run, results)
        try:
            with self._write():
                cursor = self.conn.execute(_INSERT_RUN, _run_row(run))
                run_id = int(cursor.lastrowid or 0)
                self.conn.executemany(_INSERT_RESULT, [(run_id, *row) for row in rows])
        except sqlite3.Error as exc:
            raise HistoryProblem(self.name, self._explain(exc)) from None
        return run_id

    def _query(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        try:
            return self.conn.execute(sql, parameters).fetchall()
        except sqlite3.Error as exc:
            raise HistoryProblem(self.name, self._explain(exc)) from None

    def close(self) -> None:
        self.conn.close()


# ---- PostgreSQL ----


class PostgresStore(Store):
    def __init__(self, url: str) -> None:
        self.url = url
        self.name = display(url)
        try:
            import psycopg
        except ImportError:
            why = f"a PostgreSQL history needs psycopg 3: {POSTGRES_EXTRA}"
            raise HistoryProblem(self.name, why) from None
        self._errors = psycopg.Error
        try:
            self.conn: Any = psycopg.connect(
                url, connect_timeout=CONNECT_TIMEOUT_S, application_name="pytest-cnnperf"
            )
        except psycopg.Error as exc:
            raise HistoryProblem(self.name, f"cannot connect: {_first_line(exc)}") from None
        try:
            self._migrate()
        except (psycopg.Error, HistoryProblem) as exc:
            self.conn.close()
            why = (
                exc.problem
                if isinstance(exc, HistoryProblem)
                else f"PostgreSQL failed: {_first_line(exc)}"
            )
            raise HistoryProblem(self.name, why) from None

    def _migrate(self) -> None:
        conn = self.conn
        with conn.transaction():
            # one migrator at a time across every runner sharing the database
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('cnnperf-schema'))")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS cnnperf_schema "
                "(version INTEGER PRIMARY KEY, applied TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            version = int(
                conn.execute("SELECT coalesce(max(version), 0) FROM cnnperf_schema").fetchone()[0]
            )
            if version > SCHEMA_VERSION:
                raise HistoryProblem(self.name, _newer(version))
            for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in migration:
                    conn.execute(statement.format(**POSTGRES_TYPES))
                conn.execute("INSERT INTO cnnperf_schema (version) VALUES (%s)", (number,))

    def _run(self, work: Any) -> Any:
        """``work(connection)`` in one transaction."""
        try:
            with self.conn.transaction():
                return work(self.conn)
        except self._errors as exc:
            raise HistoryProblem(self.name, f"PostgreSQL failed: {_first_line(exc)}") from None

    def append(self, run: RunInfo, results: Sequence[Result]) -> int:
        rows = _result_rows(self.name, run, results)

        def insert(conn: Any) -> int:
            run_id = int(
                conn.execute(_sql(_INSERT_RUN) + " RETURNING id", _run_row(run)).fetchone()[0]
            )
            with conn.cursor() as cursor:
                cursor.executemany(_sql(_INSERT_RESULT), [(run_id, *row) for row in rows])
            return run_id

        run_id: int = self._run(insert)
        return run_id

    def _query(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._run(
            lambda conn: conn.execute(_sql(sql), parameters).fetchall()
        )
        return rows

    def close(self) -> None:
        self.conn.close()


def _sql(statement: str) -> str:
    """A statement written with ``?`` placeholders, for psycopg."""
    return statement.replace("?", "%s")


def open_store(target: Path | str, *, create: bool = False) -> Store:
    """Open the history at ``target`` (a SQLite file's path, or a ``postgresql://`` URL);
    ``create``: make a SQLite file that does not exist yet (a PostgreSQL database must)."""
    if isinstance(target, Path):
        return SqliteStore(target, create)
    return PostgresStore(target)
