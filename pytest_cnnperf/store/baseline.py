"""Baseline files: one JSON file per test module and kind of machine, committed with the code.

Layout: ``<baselines>/<machine>/<module path>.json``, e.g.
``baselines/nvidia-h100-80gb-hbm3/tests/perf/test_models.json``. Inside, entries are keyed by
test name, then by benchmark configuration, in sorted order, with the per-sample figures the gate
needs on one line each, so that a refreshed baseline reads well in a diff.

A file that cannot be read (not JSON, not ours, from a newer schema, malformed) raises
:class:`BaselineFileError` naming the file and the problem; it is never overwritten. Writes take
a lock, re-read the file, merge, and replace it atomically, so entries that were not re-measured
are kept (as they are in the file, with any fields this version does not know) and concurrent
writers lose nothing. A file that cannot be written raises :class:`BaselineSaveError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Result
from . import leftovers
from .codec import Document, DocumentProblem, FileError, dump
from .locations import safe_name

SIGNIFICANT_DIGITS = 5


@dataclass(frozen=True)
class BaselineFile:
    """The baselines of one test module on one kind of machine: test -> key -> result (a result
    without its decision, each sample without its steps).

    The file names its machine and its test module itself, so that a copy or a download of it
    compares and gates like the original (one that lacks it, written by hand, takes its module
    from its path)."""

    machine: str
    entries: dict[str, dict[str, Result]]
    #: the test module's key, e.g. ``tests/perf/test_models`` (see ``locations.module_key``)
    module: str | None = None

    def results(self) -> list[Result]:
        """Every entry, with its test's node id (``<module>.py::<test>``), sorted."""
        return [
            entry for _, keys in sorted(self.entries.items()) for _, entry in sorted(keys.items())
        ]


BASELINE: Document[BaselineFile] = Document("pytest-cnnperf/baseline", 2, BaselineFile, "")


class BaselineFileError(FileError):
    """A baseline file exists but cannot be used."""

    WORDING = (
        "baseline file {path} cannot be used: {problem}. Mend it (or delete it) and record new "
        "baselines with --cnnperf-save; it is left untouched until then."
    )


class BaselineSaveError(FileError):
    """A baseline file cannot be written (a folder that cannot be created or written to, a
    lock that cannot be taken)."""

    WORDING = "cannot save baselines to {path}: {problem}"


def os_problem(exc: OSError) -> str:
    """An operating-system error as a reason: what failed, on which path."""
    what = exc.strerror or str(exc)
    return f"{what} ({exc.filename})" if exc.filename else what


def render(document: BaselineFile) -> str:
    """Stable, diff-friendly JSON: sorted keys, rounded numbers, number lists and each sample on
    one line."""
    return _render_data(_rounded(BASELINE.dump(document)))


def _render_data(data: Mapping[str, Any]) -> str:
    samples: list[str] = []

    def lift(value: Any) -> Any:  # each sample becomes a token, replaced by its one-line JSON
        if isinstance(value, dict):
            out = {k: lift(v) for k, v in value.items()}
            if isinstance(out.get("samples"), list):
                tokens = []
                for sample in out["samples"]:
                    samples.append(json.dumps(sample, sort_keys=True))
                    tokens.append(f"@@sample-{len(samples) - 1}@@")
                out["samples"] = tokens
            return out
        if isinstance(value, list):
            return [lift(v) for v in value]
        return value

    text = json.dumps(lift(data), indent=2, sort_keys=True)
    text = re.sub(r"\[\s+([-+0-9.eE,\s]+?)\s+\]", _one_line, text)
    text = re.sub(r'"@@sample-(\d+)@@"', lambda m: samples[int(m.group(1))], text)
    return text + "\n"


def _one_line(match: re.Match[str]) -> str:
    return "[" + ", ".join(x.strip() for x in match.group(1).split(",")) + "]"


def _rounded(data: Any) -> Any:
    if isinstance(data, float):
        return float(f"{data:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(data, list):
        return [_rounded(v) for v in data]
    if isinstance(data, dict):
        return {k: _rounded(v) for k, v in data.items()}
    return data


def read_text(path: Path, error: type[FileError]) -> str | None:
    """The file's text, ``None`` if there is none; ``error`` if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        in_the_way = next((p for p in path.parents if p.is_file()), path.parent)
        problem = f"it cannot be read: {in_the_way} is a file, not a folder"
    except UnicodeDecodeError:
        problem = "it is not a text file (expected JSON)"
    except OSError as exc:
        problem = f"it cannot be read ({exc.strerror})"
    raise error(path, problem)


def module_of(path: Path, machine: str) -> str:
    """The test module of a file that does not name it, from its path below its machine's
    folder (``baselines/<machine>/tests/test_models.json`` -> ``tests/test_models``)."""
    parts = path.parts
    if machine in parts[:-1]:
        start = len(parts) - 1 - parts[::-1].index(machine, 1)
        return "/".join(parts[start + 1 :]).removesuffix(".json")
    return path.name.removesuffix(".json")


def parse(text: str, path: Path, machine: str | None = None) -> BaselineFile:
    """Read a baseline document; ``BaselineFileError`` says what is wrong with it."""
    try:
        document = BASELINE.parse(text, "baseline file")
    except DocumentProblem as exc:
        raise BaselineFileError(path, str(exc)) from None
    if machine is not None and document.machine != machine:
        raise BaselineFileError(
            path, f"it holds baselines of machine {document.machine!r}, not {machine!r}"
        )
    module = document.module or module_of(path, document.machine)
    entries = {
        test: {
            key: dataclasses.replace(r, test_id=f"{module}.py::{test}") for key, r in keys.items()
        }
        for test, keys in document.entries.items()
    }
    return dataclasses.replace(document, entries=entries)


#: how long a save waits for another process's save of the same file
LOCK_TIMEOUT_S = 60.0


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the lock of the baseline file ``path`` (kept in the temporary folder, so that no
    lock file lands in the repository); ``BaselineSaveError`` when it cannot be taken."""
    from filelock import FileLock, Timeout

    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "pytest-cnnperf-locks"
    lock = FileLock(str(folder / f"{digest}.lock"), timeout=LOCK_TIMEOUT_S)
    problem = None
    try:
        folder.mkdir(exist_ok=True)
        lock.acquire()
    except Timeout:
        problem = f"another process held its lock {lock.lock_file} for {LOCK_TIMEOUT_S:g} s"
    except OSError as exc:
        problem = f"its lock in {folder} cannot be used: {os_problem(exc)}"
    if problem:
        raise BaselineSaveError(path, problem)
    try:
        yield
    finally:
        lock.release()


def _temporary(path: Path) -> tuple[int, Path]:
    """A new file beside ``path`` to write it in, named for this process (so that a later save
    can tell a killed writer's leftover), with the mode of any new file (0644 under umask 022)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temporary


def _remove_leftovers(path: Path) -> None:
    """Remove the temporary files of saves of ``path`` that were killed before their rename.
    Called under the lock, when only a live process's can be in use (files of versions that
    did not name them for their process are leftovers too)."""
    prefix = f".{path.name}."
    for leftover in path.parent.glob(glob.escape(prefix) + "*.tmp"):
        pid = leftovers.owner(leftover.name, prefix)
        if pid is None or not leftovers.alive(pid):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = _temporary(path)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class SaveOutcome:
    path: Path
    written: int
    removed: tuple[str, ...]


class BaselineStore:
    """Reads baseline files (cached for the session) and merges new entries into them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[Path, BaselineFile | BaselineFileError | None] = {}
        self._writable: dict[Path, BaselineSaveError | None] = {}

    def path(self, machine: str, module: str) -> Path:
        return self.root / safe_name(machine) / f"{module}.json"

    def load(self, path: Path, machine: str | None = None) -> BaselineFile | None:
        """The file at ``path``, ``None`` if there is none; raises ``BaselineFileError``."""
        if path not in self._cache:
            try:
                text = read_text(path, BaselineFileError)
                self._cache[path] = None if text is None else parse(text, path, machine)
            except BaselineFileError as exc:
                self._cache[path] = exc
        cached = self._cache[path]
        if isinstance(cached, BaselineFileError):
            raise cached
        return cached

    def entry(self, machine: str, module: str, test: str, key: str) -> Result | None:
        document = self.load(self.path(machine, module), machine)
        if document is None:
            return None
        return document.entries.get(test, {}).get(key)

    def check_writable(self, path: Path) -> None:
        """Raise ``BaselineSaveError`` now if ``path`` could not be saved at the end of the
        session: its folder cannot be made or written to, or its lock cannot be taken."""
        if path not in self._writable:
            problem = None
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                handle, temporary = _temporary(path)
                os.close(handle)
                temporary.unlink()
                with _locked(path):
                    pass
            except BaselineSaveError as exc:
                problem = exc
            except OSError as exc:
                problem = BaselineSaveError(path, os_problem(exc))
            self._writable[path] = problem
        checked = self._writable[path]
        if checked is not None:
            raise checked

    def save(
        self,
        machine: str,
        module: str,
        updates: Mapping[str, Mapping[str, Result]],
        remove_tests: Iterable[str] = (),
    ) -> SaveOutcome:
        """Merge ``updates`` (test -> key -> entry) into the module's file and drop
        ``remove_tests``; everything else in the file is kept as it is, fields that this
        version does not know included. ``BaselineFileError`` for a file that cannot be read
        (it is left alone), ``BaselineSaveError`` for one that cannot be written."""
        path = self.path(machine, module)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BaselineSaveError(path, os_problem(exc)) from None
        with _locked(path):
            _remove_leftovers(path)
            self._cache.pop(path, None)
            text = read_text(path, BaselineFileError)
            data: dict[str, Any] = {}
            if text is not None:
                parse(text, path, machine)  # refuses a file it cannot use
                data = json.loads(text)
            entries: dict[str, dict[str, Any]] = data.get("entries", {})
            removed = tuple(sorted(t for t in remove_tests if t in entries))
            for test in removed:
                del entries[test]
            written = 0
            for test, keys in updates.items():
                for key, entry in keys.items():
                    entries.setdefault(test, {})[key] = _rounded(dump(entry.as_baseline()))
                    written += 1
            header = BASELINE.dump(BaselineFile(machine, {}, module))
            text = _render_data({**data, **header, "entries": entries})
            try:
                _write_atomically(path, text)
            except OSError as exc:
                raise BaselineSaveError(path, os_problem(exc)) from None
            self._cache[path] = parse(text, path, machine)
        return SaveOutcome(path=path, written=written, removed=removed)

    def machines_with(self, module: str, test: str, key: str) -> list[tuple[str, Result]]:
        """The kinds of machine whose baselines include ``test``'s ``key``, with their entry
        (files that cannot be read are passed over)."""
        found = []
        folders = sorted(p for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []
        for folder in folders:
            path = folder / f"{module}.json"
            if not path.is_file():
                continue
            try:
                document = self.load(path)
            except BaselineFileError:
                continue
            entry = document.entries.get(test, {}).get(key) if document is not None else None
            if document is not None and entry is not None:
                found.append((document.machine, entry))
        return found

    def files(self) -> list[Path]:
        return sorted(self.root.rglob("*.json")) if self.root.is_dir() else []


def folder_problem(root: Path) -> str | None:
    """Why ``root`` cannot be the baselines folder (a file in its place), or ``None``."""
    if root.exists() and not root.is_dir():
        return f"{root} is a file, not a folder"
    return None
