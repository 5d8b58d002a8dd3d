"""Servers and browsers for the history's tests: a PostgreSQL server of the tests' own, and
headless Chromium through Playwright.

PostgreSQL is started from the machine's server binaries (``CNNPERF_PG_BIN``, default the newest
of Debian's ``/usr/lib/postgresql/*/bin``; ``apt-get install postgresql``), in a folder of its own, never
the machine's cluster. ``initdb`` and ``postgres`` refuse to run as root, so as root they run as
the ``postgres`` user (else ``nobody``) through ``subprocess``'s ``user=``/``group=``.
pytest-postgresql was tried and fails as root (its ``initdb`` cannot reach pytest's 0700 temp
folders). Chromium is Debian's (``apt-get install chromium``), driven by Playwright without
``playwright install``. Tests that need either skip, saying what is missing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import socket
import sqlite3  # noqa: F401  (imported once, for in-process pytester runs)
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

with contextlib.suppress(ImportError):  # C extensions: imported once, for in-process runs
    import psycopg  # noqa: F401


def _server_binaries() -> Path:
    """``$CNNPERF_PG_BIN``, else the newest of Debian's ``/usr/lib/postgresql/*/bin``."""
    if os.environ.get("CNNPERF_PG_BIN"):
        return Path(os.environ["CNNPERF_PG_BIN"])
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _server_binaries()
PASSWORD = "cnnperf-secret"
_DATABASES = itertools.count()
CHROMIUM = os.environ.get("CNNPERF_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unprivileged() -> dict[str, Any]:
    """``subprocess`` arguments that run the server as an ordinary user when we are root."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return {
            "user": entry.pw_uid,
            "group": entry.pw_gid,
            "extra_groups": [],
            "home": entry.pw_dir,
        }
    pytest.skip("running as root, with no unprivileged user to run PostgreSQL as")


@pytest.fixture(scope="session")
def postgres() -> Iterator[dict[str, Any]]:
    """A PostgreSQL server for this session: ``{"url": ..., "port": ..., "socket": ...}``.
    The ``postgres`` role has a password, required over TCP; the URL carries it."""
    pytest.importorskip(
        "psycopg", reason="the PostgreSQL tests need psycopg (pip install 'psycopg[binary]')"
    )
    if not (PG_BIN / "postgres").exists():
        pytest.skip(f"no PostgreSQL server binaries in {PG_BIN} (apt-get install postgresql)")
    credentials = _unprivileged()
    home = credentials.pop("home", None)
    base = Path(tempfile.mkdtemp(prefix="cnnperf-pg-"))
    data, sockets = base / "data", base / "sock"
    sockets.mkdir()
    if credentials:
        for folder in (base, sockets):
            os.chown(folder, credentials["user"], credentials["group"])
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    env.pop("PGDATA", None)
    if home:
        env["HOME"] = home
    subprocess.run(
        [
            PG_BIN / "initdb",
            "-D",
            data,
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ],
        check=True,
        capture_output=True,
        env=env,
        cwd=base,
        **credentials,
    )
    port = _free_port()
    with open(base / "postgres.log", "wb") as log:
        server = subprocess.Popen(
            [
                PG_BIN / "postgres",
                "-D",
                data,
                "-p",
                str(port),
                "-k",
                sockets,
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "shared_buffers=16MB",
                "-c",
                "max_connections=60",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=base,
            **credentials,
        )
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(
            [PG_BIN / "pg_isready", "-q", "-h", sockets, "-p", str(port)], check=False
        ).returncode:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "PostgreSQL did not start:\n" + (base / "postgres.log").read_text()
                )
            time.sleep(0.1)
        import psycopg

        with psycopg.connect(
            host=str(sockets), port=port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f"ALTER ROLE postgres PASSWORD '{PASSWORD}'")
        yield {
            "port": port,
            "socket": sockets,
            "url": f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}",
        }
    finally:
        server.send_signal(signal.SIGINT)  # fast shutdown
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(postgres: dict[str, Any]) -> str:
    """The URL of a fresh, empty database on the session's server."""
    import psycopg

    name = f"test_{os.getpid()}_{next(_DATABASES)}"
    with psycopg.connect(
        host=str(postgres["socket"]),
        port=postgres["port"],
        user="postgres",
        dbname="postgres",
        autocommit=True,
    ) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres['url']}/{name}"


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium (Debian's) through Playwright, with a fresh profile."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the browser tests need playwright (pip install playwright)"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[[Path], tuple[Any, list[str]]]]:
    """Open a file in the browser; returns the page and every problem it had: console errors,
    uncaught exceptions, failed loads, and any request that would leave the disk (the dashboard
    must work offline)."""
    pages = []

    def open_(path: Path) -> tuple[Any, list[str]]:
        page = browser.new_page()
        pages.append(page)
        problems: list[str] = []
        page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))

        def route(r: Any) -> None:
            if r.request.url.startswith(("file:", "data:", "blob:")):
                r.continue_()
            else:
                problems.append(f"external: {r.request.url}")
                r.abort()

        page.route("**/*", route)
        page.goto(path.resolve().as_uri(), wait_until="load")
        return page, problems

    yield open_
    for page in pages:
        page.close()
