"""The ``cnnperf history``, ``cnnperf dashboard`` and ``cnnperf comment`` commands.

Each finds the history the way a pytest run would (``--history TARGET``, else the
``cnnperf_history`` ini setting of the pytest configuration found from the current folder up),
reads it once, and renders what it found; ``history`` and ``dashboard`` also take a PATTERN that
can only be a history (an existing history file, a ``postgresql://`` URL) as one, as a new user
types ``cnnperf history h.sqlite``. Every problem is a :class:`CommandProblem` whose
message names the file or history; the ``cnnperf`` command prints it and exits with status 2.
"""

from __future__ import annotations

import configparser
import datetime
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import parsers
from ..reports.text import some
from .runs import Entry
from .series import Analysis, analyse, build
from .store import APPLICATION_ID, HistoryProblem, display, open_store

#: pytest's configuration files, in the order it looks for them in each folder, and the
#: section that holds its settings (``None``: pyproject.toml's ``[tool.pytest.ini_options]``)
CONFIG_FILES = (
    ("pytest.ini", "pytest"),
    (".pytest.ini", "pytest"),
    ("pyproject.toml", None),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)
NO_TARGET = (
    "no history given: use --history TARGET (a SQLite file or a postgresql:// URL), or set "
    "cnnperf_history in the pytest configuration ([tool.pytest.ini_options] or pytest.ini)"
)


class CommandProblem(Exception):
    """What the command cannot do with what it was given; the message says why."""


def _toml(path: Path) -> dict[str, Any] | None:
    """``[tool.pytest.ini_options]`` of a pyproject.toml, ``None`` when it has none."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    section = data.get("tool", {}).get("pytest", {}).get("ini_options")
    return section if isinstance(section, dict) else None


def configured_target(folder: Path) -> Path | str | None:
    """``cnnperf_history`` from the pytest configuration file that applies in ``folder`` (the
    first of pytest's files with a pytest section, from ``folder`` up), relative to its folder;
    ``None`` when it sets none."""
    for directory in (folder, *folder.parents):
        for name, section in CONFIG_FILES:
            path = directory / name
            if not path.is_file():
                continue
            if section is None:
                options = _toml(path)
                if options is None:
                    continue
                value = options.get("cnnperf_history")
            else:
                parser = configparser.ConfigParser(interpolation=None)
                try:
                    parser.read(path, encoding="utf-8")
                except configparser.Error:
                    continue
                if not parser.has_section(section):
                    if name.endswith("pytest.ini"):
                        return None  # pytest.ini is pytest's even without a [pytest] section
                    continue
                value = parser.get(section, "cnnperf_history", fallback=None)
            if not value or not str(value).strip():
                return None
            try:
                target = parsers.parse_history(value)
            except ValueError as exc:
                raise CommandProblem(f"{path}: cnnperf_history = {value!r}: {exc}") from None
            return directory / target if isinstance(target, Path) else target
    return None


def resolve_target(given: str | None, folder: Path) -> Path | str:
    if given is not None:
        try:
            return parsers.parse_history(given)
        except ValueError as exc:
            raise CommandProblem(f"--history: {exc}") from None
    target = configured_target(folder)
    if target is None:
        raise CommandProblem(NO_TARGET)
    return target


def _written_by_us(path: Path) -> bool:
    """Whether ``path`` is an existing SQLite file that pytest-cnnperf marked as a history
    (``PRAGMA application_id``, bytes 68-71 of the file's header), read without changing it."""
    try:
        with path.open("rb") as stream:
            header = stream.read(100)
    except OSError:
        return False
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return False
    if int.from_bytes(header[68:72], "big") == APPLICATION_ID:
        return True
    wal = path.with_name(path.name + "-wal")
    if not wal.is_file():
        return False
    # a history still open since it was made may hold its header in the write-ahead log alone;
    # SQLite reads it there (with the log present, a read-only look leaves no file behind)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return False
    try:
        return int(conn.execute("PRAGMA application_id").fetchone()[0]) == APPLICATION_ID
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def as_history(argument: str) -> Path | str | None:
    """``argument`` as a history target where it can be nothing else: a ``postgresql://`` URL,
    or an existing SQLite file that pytest-cnnperf wrote; ``None`` otherwise (a pattern, a folder,
    a test file's path)."""
    if "://" in argument:
        try:
            return parsers.parse_history(argument)
        except ValueError:
            return None
    path = Path(argument)
    return path if _written_by_us(path) else None


def did_you_mean(target: Path | str) -> str:
    what = "a history file" if isinstance(target, Path) else "a history"
    return f"{display(target)} is {what}: did you mean --history {display(target)}?"


def resolve_pattern(
    given: str | None, pattern: str | None, folder: Path
) -> tuple[Path | str, str | None]:
    """The history and the pattern of ``cnnperf history [PATTERN]`` and ``cnnperf dashboard
    OUT_DIR [PATTERN]``. A PATTERN that can only be a history (:func:`as_history`) is taken as
    the history, as a new user types ``cnnperf history h.sqlite``, unless --history names one."""
    named = as_history(pattern) if pattern is not None else None
    if given is not None:
        target = resolve_target(given, folder)
        if named is not None:
            raise CommandProblem(
                f"{did_you_mean(named)} PATTERN selects the benchmarks to show, and --history "
                f"already names {display(target)}"
            )
        return target, pattern
    if named is not None:
        return named, None
    configured = configured_target(folder)
    if configured is None:
        if pattern is None:
            raise CommandProblem(NO_TARGET)
        raise CommandProblem(
            f"{NO_TARGET}; {pattern} was taken as PATTERN (the benchmarks to show): it is "
            "neither a history file of pytest-cnnperf nor a postgresql:// URL"
        )
    return configured, pattern


def require_ruptures() -> None:
    try:
        import ruptures  # noqa: F401
    except ImportError:
        raise CommandProblem(
            "the history's change points are found with ruptures, which is not installed; "
            "install it with pip install 'pytest-cnnperf[history]'"
        ) from None


def _entries(target: Path | str, machine: str | None = None) -> list[Entry]:
    """Every stored result of the history (on ``machine``), to be analysed."""
    require_ruptures()
    try:
        with open_store(target) as store:
            return store.entries(machine)
    except HistoryProblem as exc:
        raise CommandProblem(str(exc)) from None


def read(
    target: Path | str, pattern: str | None, machine: str | None, window: int
) -> tuple[list[Analysis], int]:
    """The analysed series of the history and how many runs it holds."""
    entries = _entries(target, machine)
    runs = len({e.run_id for e in entries})
    series = build(entries, pattern, machine)
    if not series:
        what = f"no benchmark matching {pattern!r}" if pattern else "no measured benchmark"
        where = f" on {machine}" if machine else ""
        raise CommandProblem(f"history {display(target)}: {what}{where} ({runs} runs in it)")
    return [analyse(s, window) for s in series], runs


def history(
    given: str | None, pattern: str | None, machine: str | None, window: int, rows: int
) -> list[str]:
    from .views import lines

    target, pattern = resolve_pattern(given, pattern, Path.cwd())
    analyses, runs = read(target, pattern, machine, window)
    return lines(display(target), analyses, runs, rows)


def dashboard(
    out_dir: Path | str, given: str | None, pattern: str | None, machine: str | None, window: int
) -> list[str]:
    from . import dashboard as site

    named = as_history(str(out_dir))
    if named is not None:
        raise CommandProblem(
            f"{did_you_mean(named)} OUT_DIR is the folder the dashboard is written to, e.g. "
            f"cnnperf dashboard site --history {display(named)}"
        )
    folder = Path(out_dir)
    target, pattern = resolve_pattern(given, pattern, Path.cwd())
    analyses, runs = read(target, pattern, machine, window)
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        written = site.write(folder, analyses, display(target), runs, generated)
    except site.DashboardError as exc:
        raise CommandProblem(str(exc)) from None
    except OSError as exc:
        raise CommandProblem(f"{folder}: cannot write the dashboard ({exc.strerror})") from None
    return [f"wrote {written[0]} and {len(written) - 1} page(s) for {len(analyses)} series"]


def comment(
    files: Sequence[Path | str], given: str | None, window: int, output: Path | None
) -> list[str]:
    """The comment's Markdown (printed, or written to ``output``) of one run, whose results
    may come in several files (the shards of a CI matrix)."""
    from ..store.results_file import FileProblem, load, merged
    from .comment import render

    for results in files:
        named = as_history(str(results))
        if named is not None:
            raise CommandProblem(
                f"{did_you_mean(named)} RESULTS is the results file of the run (pytest --cnnperf "
                f"--cnnperf-json=PATH), e.g. cnnperf comment results.json --history "
                f"{display(named)}"
            )
    try:
        found = merged(load(Path(results)) for results in files)
    except FileProblem as exc:
        problem = exc.problem
        if problem.startswith("it holds no benchmark results"):
            problem = (
                "it holds no benchmark results; give the file of pytest --cnnperf "
                "--cnnperf-json=PATH"
            )
        raise CommandProblem(f"{exc.path}: {problem}") from None
    target: Path | str | None
    try:
        target = resolve_target(given, Path.cwd())
    except CommandProblem:
        if given is not None:
            raise
        target = None  # no history configured: the comment is this run alone
    analyses: Sequence[Analysis] | None = None
    if target is not None:
        entries = _entries(target)
        wanted = {(r.test_id, r.key, r.environment.machine) for r in found if r.environment}
        analyses = [
            analyse(s, window) for s in build(entries) if (s.test_id, s.key, s.machine) in wanted
        ]
    text = render(found, analyses, display(target) if target else None, window)
    if output is None:
        return text.rstrip("\n").split("\n")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandProblem(f"{output}: cannot write the comment ({exc.strerror})") from None
    return [f"wrote {output}"]


def bisect_range(given: str | None, test_id: str, branch: str | None) -> tuple[str, str, str]:
    """GOOD and BAD for ``cnnperf bisect --history``: the commits of the runs on either side of
    the latest change point the history found in the benchmark ``test_id`` (its throughput),
    among one branch's runs (``branch``, else the latest run's); pull requests' runs are left
    out, their commits being merge commits nobody wrote. Also a line saying what was found."""
    from .series import Series

    target = resolve_target(given, Path.cwd())
    entries = _entries(target)
    mine = [
        e
        for e in entries
        if e.result.test_id == test_id and not (e.run.ci and e.run.ci.pull_request)
    ]
    if not mine:
        named = some(sorted({e.result.test_id for e in entries}), 5)
        raise CommandProblem(
            f"{display(target)} has no run of {test_id} outside pull requests (it has: "
            f"{named or 'none'}); give a test id as cnnperf history lists them"
        )
    wanted = branch or mine[-1].run.branch
    on_branch = [e for e in mine if e.run.branch == wanted]
    found = []
    for series in build(on_branch):
        points = tuple(p for p in series.points if p.run.commit)
        analysis = analyse(Series(series.test_id, series.key, series.machine, points))
        if analysis.change_points:
            found.append((points[analysis.change_points[-1].index].run.recorded, analysis))
    if not found:
        raise CommandProblem(
            f"the history found no change point in {test_id} among the runs of branch "
            f"{wanted or '(none)'}; give GOOD and BAD yourself: cnnperf bisect GOOD BAD -- ..."
        )
    _, analysis = max(found, key=lambda f: f[0])
    point = analysis.change_points[-1]
    runs = analysis.series.points
    good, bad = runs[point.index - 1].run.commit, runs[point.index].run.commit
    assert good is not None
    assert bad is not None
    said = (
        f"the history's latest change point in {analysis.series.name} on branch {wanted}: "
        f"{point.change:+.1%} between {good[:10]} and {bad[:10]} (p = {point.p_value:.2g})"
    )
    return good, bad, said
