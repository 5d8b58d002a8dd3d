"""Results files (``--cnnperf-json``), and reading any file of ours for the ``cnnperf`` command.

A results file is a :class:`~pytest_cnnperf.model.ResultsFile` under the schema
``pytest-cnnperf/results``: every result of a session, with its environment, samples, decision
and headline figures. :func:`load` reads a results or a baseline file alike, and turns anything
else (a missing file, another tool's JSON, a corrupt document) into a :class:`FileProblem` whose
message names the file and what is wrong.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Result, ResultsFile
from . import baseline
from .codec import DataError, Document, DocumentProblem, FileError, dump, json_data
from .codec import load as load_data

RESULTS: Document[ResultsFile] = Document("pytest-cnnperf/results", 2, ResultsFile, "results")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write(path: Path, results: Sequence[Result], machine: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = ResultsFile(created=now(), machine=machine, results=tuple(results))
    text = json.dumps(RESULTS.dump(document), indent=1, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")


def result_data(result: Result) -> dict[str, Any]:
    """One result as JSON data with its schema version, as a history keeps it."""
    return {"schema_version": RESULTS.version, **dump(result)}


def read_result(data: Any, path: str, again: str = "") -> Result:
    """A result a history kept; :class:`DataError` for one of a version this one does not read
    (with ``again``: how to get one it does)."""
    problem = RESULTS.version_problem(data, again) if isinstance(data, dict) else None
    if problem:
        raise DataError(f"{path}: {problem}")
    return load_data(Result, data, path)


class FileProblem(FileError):
    """A file the command was given cannot be used; the message says why."""


@dataclass(frozen=True)
class Loaded:
    """A file the command read: its kind (``results`` or ``baseline``) and its results (those
    of a baseline file without decisions)."""

    path: Path
    kind: str
    results: tuple[Result, ...]
    machine: str | None = None
    created: str | None = None

    @property
    def measured(self) -> tuple[Result, ...]:
        """The results that have a measurement (not those that failed)."""
        return tuple(r for r in self.results if r.measurement is not None)


def _read(path: Path) -> tuple[str, object]:
    if path.is_dir():
        raise FileProblem(path, "it is a directory, not a results or baseline file")
    text = baseline.read_text(path, FileProblem)
    if text is None:
        raise FileProblem(path, "no such file")
    try:
        return text, json_data(text)
    except DocumentProblem as exc:
        raise FileProblem(path, str(exc)) from None


def _foreign(path: Path, data: object) -> FileProblem:
    expected = f'"schema": "{RESULTS.schema}" or "{baseline.BASELINE.schema}"'
    if isinstance(data, dict) and "benchmarks" in data and "machine_info" in data:
        return FileProblem(
            path,
            "it is a pytest-benchmark file, not a pytest-cnnperf results or baseline file "
            f"(those have {expected}); write one with --cnnperf-json=PATH",
        )
    schema = data.get("schema") if isinstance(data, dict) else None
    found = f" (its schema is {schema!r})" if schema is not None else ""
    return FileProblem(
        path,
        f"it is not a pytest-cnnperf results or baseline file{found}; those have {expected}. "
        "Write one with --cnnperf-json=PATH, or pass a file from the baselines folder",
    )


def _results(path: Path, data: dict[str, Any]) -> Loaded:
    problem = RESULTS.version_problem(data, "measure it again with --cnnperf-json=PATH")
    if problem:
        raise FileProblem(path, problem)
    try:
        document = RESULTS.load(data)
    except DataError as exc:
        raise FileProblem(path, f"it is a malformed results file: {exc}") from None
    return Loaded(path, "results", document.results, document.machine, document.created)


def load(path: Path | str) -> Loaded:
    """Read a results or baseline file; :class:`FileProblem` says what is wrong with it."""
    path = Path(path)
    text, data = _read(path)
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(data, dict) and schema == RESULTS.schema:
        return _results(path, data)
    if isinstance(data, dict) and schema == baseline.BASELINE.schema:
        again = "record its baselines again with --cnnperf-save"
        problem = baseline.BASELINE.version_problem(data, again)
        if problem:
            raise FileProblem(path, problem)
        try:
            document = baseline.parse(text, path)
        except baseline.BaselineFileError as exc:
            raise FileProblem(path, exc.problem) from None
        return Loaded(path, "baseline", tuple(document.results()), document.machine)
    raise _foreign(path, data)


def merged(files: Iterable[Loaded]) -> tuple[Result, ...]:
    """The results of several results files as one run's (the shards of a CI matrix, each
    running some of the tests): :class:`FileProblem` for a baseline file, an empty one, or a
    benchmark that two of them measured."""
    results: list[Result] = []
    seen: dict[tuple[str, str], Path] = {}
    for loaded in files:
        if loaded.kind != "results" or not loaded.results:
            raise FileProblem(
                loaded.path,
                "it holds no benchmark results; give the results files (--cnnperf-json) of the "
                "shards to show as one run",
            )
        for result in loaded.results:
            key = (result.test_id, result.key)
            if key in seen:
                raise FileProblem(
                    loaded.path,
                    f"{result.test_id} [{result.key}] is in {seen[key]} too: the shards of one "
                    "run must measure each benchmark once (split the tests, e.g. with -k or "
                    "pytest-split)",
                )
            seen[key] = loaded.path
            results.append(result)
    return tuple(results)
