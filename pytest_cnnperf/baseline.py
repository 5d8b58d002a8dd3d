"""Baseline files: one JSON file per test module and kind of machine, committed with the code.

Layout: ``<baselines>/<machine>/<module path>.json``, e.g.
``baselines/nvidia-h100-80gb-hbm3/tests/perf/test_models.json``. Inside, entries are keyed by
test name, then by benchmark configuration, in sorted order, with the per-sample figures the gate
needs on one line each, so that a refreshed baseline reads well in a diff.

A file that cannot be read (not JSON, not ours, from a newer schema, malformed) raises
:class:`BaselineFileError` naming the file and the problem; it is never overwritten. Writes take
a lock, re-read the file, merge, and replace it atomically, so entries that were not re-measured
are kept and concurrent writers lose nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import formats
from .results import BaselineEntry, BaselineFile

SIGNIFICANT_DIGITS = 5


class BaselineFileError(Exception):
    """A baseline file exists but cannot be used."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"baseline file {path} cannot be used: {problem}. Mend it (or delete it) and record "
            "new baselines with --cnnperf-save; it is left untouched until then."
        )


def render(document: BaselineFile) -> str:
    """Stable, diff-friendly JSON: sorted keys, rounded numbers, number lists on one line."""
    text = json.dumps(_rounded(formats.BASELINE.dump(document)), indent=2, sort_keys=True)
    return re.sub(r"\[\s+([-+0-9.eE,\s]+?)\s+\]", _one_line, text) + "\n"


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


def parse(text: str, path: Path, machine: str | None = None) -> BaselineFile:
    """Read a baseline document; ``BaselineFileError`` says what is wrong with it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineFileError(path, f"it is not valid JSON ({exc})") from None
    schema = formats.BASELINE.schema
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise BaselineFileError(
            path, f'it is not a pytest-cnnperf baseline file (it lacks "schema": "{schema}")'
        )
    problem = formats.BASELINE.version_problem(data)
    if problem:
        raise BaselineFileError(path, problem)
    try:
        document = formats.BASELINE.load(data)
    except formats.DataError as exc:
        raise BaselineFileError(path, f"it is malformed: {exc}") from None
    if machine is not None and document.machine != machine:
        raise BaselineFileError(
            path, f"it holds baselines of machine {document.machine!r}, not {machine!r}"
        )
    return document


def safe_name(part: str) -> str:
    """A path component with anything outside ``[A-Za-z0-9._-]`` replaced, so that no test id
    or machine name can make a strange file name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", part).strip(".") or "_"


def _lock_path(path: Path) -> Path:
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "pytest-cnnperf-locks"
    folder.mkdir(exist_ok=True)
    return folder / f"{digest}.lock"


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

    def path(self, machine: str, module: str) -> Path:
        return self.root / safe_name(machine) / f"{module}.json"

    def load(self, path: Path, machine: str | None = None) -> BaselineFile | None:
        """The file at ``path``, ``None`` if there is none; raises ``BaselineFileError``."""
        if path not in self._cache:
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                self._cache[path] = None
            except OSError as exc:
                self._cache[path] = BaselineFileError(path, f"it cannot be read ({exc.strerror})")
            else:
                try:
                    self._cache[path] = parse(text, path, machine)
                except BaselineFileError as exc:
                    self._cache[path] = exc
        cached = self._cache[path]
        if isinstance(cached, BaselineFileError):
            raise cached
        return cached

    def entry(self, machine: str, module: str, test: str, key: str) -> BaselineEntry | None:
        document = self.load(self.path(machine, module), machine)
        if document is None:
            return None
        return document.entries.get(test, {}).get(key)

    def save(
        self,
        machine: str,
        module: str,
        updates: Mapping[str, Mapping[str, BaselineEntry]],
        remove_tests: Iterable[str] = (),
    ) -> SaveOutcome:
        """Merge ``updates`` (test -> key -> entry) into the module's file and drop
        ``remove_tests``; everything else in the file is kept."""
        from filelock import FileLock

        path = self.path(machine, module)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(_lock_path(path))):
            self._cache.pop(path, None)
            current = self.load(path, machine)
            entries = {
                test: dict(keys) for test, keys in (current.entries if current else {}).items()
            }
            removed = tuple(sorted(t for t in remove_tests if t in entries))
            for test in removed:
                del entries[test]
            written = 0
            for test, keys in updates.items():
                entries.setdefault(test, {}).update(keys)
                written += len(keys)
            document = BaselineFile(machine, entries, module)
            _write_atomically(path, render(document))
            self._cache[path] = document
        return SaveOutcome(path=path, written=written, removed=removed)

    def machines_with(self, module: str, test: str, key: str) -> list[str]:
        """The kinds of machine whose baselines include ``test``'s ``key`` (files that cannot
        be read are passed over)."""
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
            if document is not None and key in document.entries.get(test, {}):
                found.append(document.machine)
        return found

    def files(self) -> list[Path]:
        return sorted(self.root.rglob("*.json")) if self.root.is_dir() else []


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
