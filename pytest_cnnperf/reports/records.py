"""Benchmarks read back from results and baseline files, in one shape for the ``cnnperf`` command.

A results file (``--cnnperf-json``) and a baseline file both hold, per benchmark, its test, its
configuration, its environment and per-sample step times and peak memory; :class:`Record` is
what they have in common. :func:`load` tells the two apart by their ``schema`` and turns anything
else (a missing file, another tool's JSON, a corrupt document) into a :class:`FileProblem` whose
message names the file and what is wrong.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import baseline, formats
from ..results import BaselineFile, BenchConfig, BenchmarkResult, Environment, Verdict


class FileProblem(Exception):
    """A file the command was given cannot be used; the message says why."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


@dataclass(frozen=True)
class Record:
    """One benchmark's figures, whichever kind of file they came from."""

    #: ``path/to/test_module.py::test_name[params]``
    test_id: str
    key: str
    config: BenchConfig
    environment: Environment | None
    items_per_step: int
    #: one figure per sample (fresh process)
    step_times_s: tuple[float, ...]
    peak_bytes: tuple[int, ...] = ()
    verdict: Verdict | None = None
    #: compiled benchmarks: compile time with the cache cold and warm, graph breaks
    compile_cold_s: float | None = None
    compile_warm_s: float | None = None
    graph_breaks: int | None = None
    #: the step's counted FLOPs per item, where a results file has them
    flops_per_item: float | None = None
    #: the device's peak for the precision used, where it is known
    peak_flops_per_s: float | None = None
    #: energy per item over the timed steps, where the window was long enough to show it
    joules_per_item: float | None = None

    @property
    def test(self) -> str:
        return self.test_id.split("::", 1)[-1]

    @property
    def module(self) -> str:
        """The test module's file name without its folder and suffix: ``test_models``."""
        return Path(self.test_id.split("::", 1)[0]).stem

    @property
    def unit(self) -> str:
        return self.config.unit

    @property
    def step_time_s(self) -> float:
        return statistics.median(self.step_times_s)

    @property
    def items_per_second(self) -> float:
        return self.items_per_step / self.step_time_s

    @property
    def rates(self) -> tuple[float, ...]:
        """Throughput of each sample."""
        return tuple(self.items_per_step / t for t in self.step_times_s)

    @property
    def peak_allocated_bytes(self) -> int | None:
        return int(statistics.median(self.peak_bytes)) if self.peak_bytes else None

    @property
    def achieved_flops_per_s(self) -> float | None:
        if self.flops_per_item is None:
            return None
        return self.flops_per_item * self.items_per_second

    @property
    def utilisation(self) -> float | None:
        achieved = self.achieved_flops_per_s
        if achieved is None or not self.peak_flops_per_s:
            return None
        return achieved / self.peak_flops_per_s


def from_result(result: BenchmarkResult) -> Record | None:
    """The record of a result that has a measurement (``None`` for one that failed)."""
    m = result.measurement
    if m is None or not m.samples:
        return None
    return Record(
        test_id=result.test_id,
        key=result.key,
        config=result.config,
        environment=result.environment,
        items_per_step=m.items_per_step,
        step_times_s=m.step_times,
        peak_bytes=tuple(s.memory.allocated_bytes for s in m.samples if s.memory),
        verdict=result.decision.verdict,
        compile_cold_s=m.compile_time("cold"),
        compile_warm_s=m.compile_time("warm"),
        graph_breaks=len(m.graph_breaks) if m.compilations else None,
        flops_per_item=m.flops.per_item if m.flops else None,
        peak_flops_per_s=m.peak.flops_per_s if m.peak else None,
        joules_per_item=energy.joules_per_item
        if (energy := m.energy) and energy.long_enough
        else None,
    )


def from_baseline(document: BaselineFile, path: Path) -> list[Record]:
    """Records of a baseline file. The test module is the one the file names; a file from
    before files named it is read by its path below its machine's folder
    (``baselines/<machine>/tests/test_models.json`` -> ``tests/test_models.py``)."""
    if document.module is not None:
        module = document.module
    elif document.machine in path.parts[:-1]:
        parts = path.parts
        start = len(parts) - 1 - parts[::-1].index(document.machine, 1)
        module = "/".join(parts[start + 1 :])
    else:
        module = path.name
    module = module.removesuffix(".json") + ".py"
    return [
        Record(
            test_id=f"{module}::{test}",
            key=key,
            config=entry.config,
            environment=entry.environment,
            items_per_step=entry.items_per_step,
            step_times_s=entry.step_time_s,
            peak_bytes=entry.peak_allocated_bytes,
            compile_cold_s=entry.compile_cold_s,
            compile_warm_s=entry.compile_warm_s,
            graph_breaks=len(entry.graph_breaks) if entry.config.compile else None,
        )
        for test, entries in sorted(document.entries.items())
        for key, entry in sorted(entries.items())
        if entry.step_time_s
    ]


@dataclass(frozen=True)
class Loaded:
    """A file the command read: its kind (``results`` or ``baseline``) and its benchmarks."""

    path: Path
    kind: str
    records: tuple[Record, ...]
    #: the results of a results file (with verdicts and notes); empty for a baseline file
    results: tuple[BenchmarkResult, ...] = ()
    machine: str | None = None
    created: str | None = None


def _read(path: Path) -> tuple[str, object]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileProblem(path, "no such file") from None
    except IsADirectoryError:
        raise FileProblem(path, "it is a directory, not a results or baseline file") from None
    except UnicodeDecodeError:
        raise FileProblem(path, "it is not a text file (expected JSON)") from None
    except OSError as exc:
        raise FileProblem(path, f"it cannot be read ({exc.strerror})") from None
    try:
        return text, json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileProblem(path, f"it is not valid JSON ({exc})") from None
    except RecursionError:
        raise FileProblem(path, "it is not valid JSON (nested too deeply)") from None


def _foreign(path: Path, data: object) -> FileProblem:
    expected = f'"schema": "{formats.RESULTS.schema}" or "{formats.BASELINE.schema}"'
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


def _results(path: Path, data: dict[str, object]) -> Loaded:
    problem = formats.RESULTS.version_problem(data)
    if problem:
        raise FileProblem(path, problem)
    try:
        document = formats.RESULTS.load(data)
    except formats.DataError as exc:
        raise FileProblem(path, f"it is a malformed results file: {exc}") from None
    records = [r for r in map(from_result, document.results) if r is not None]
    return Loaded(
        path=path,
        kind="results",
        records=tuple(records),
        results=document.results,
        machine=document.machine,
        created=document.created,
    )


def load(path: Path | str) -> Loaded:
    """Read a results or baseline file; :class:`FileProblem` says what is wrong with it."""
    path = Path(path)
    text, data = _read(path)
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(data, dict) and schema == formats.RESULTS.schema:
        return _results(path, data)
    if schema == formats.BASELINE.schema:
        try:
            document = baseline.parse(text, path)
        except baseline.BaselineFileError as exc:
            raise FileProblem(path, exc.problem) from None
        return Loaded(
            path=path,
            kind="baseline",
            records=tuple(from_baseline(document, path)),
            machine=document.machine,
        )
    raise _foreign(path, data)


@dataclass(frozen=True)
class Matching:
    pairs: tuple[tuple[Record, Record], ...]
    only_old: tuple[Record, ...]
    only_new: tuple[Record, ...]


def match(old: Sequence[Record], new: Sequence[Record]) -> Matching:
    """Pair benchmarks by test id and configuration key; those left over are then paired by
    test module name, test name and key, so that runs from different folders (or a results
    file against a baseline file) still match."""
    pairs: list[tuple[Record, Record]] = []
    left_old, left_new = list(old), list(new)
    keys: list[Callable[[Record], tuple[str, ...]]] = [
        lambda r: (r.test_id, r.key),
        lambda r: (r.module, r.test, r.key),
    ]
    for key in keys:
        new_by_key: dict[tuple[str, ...], list[Record]] = {}
        for record in left_new:
            new_by_key.setdefault(key(record), []).append(record)
        old_count: dict[tuple[str, ...], int] = {}
        for record in left_old:
            old_count[key(record)] = old_count.get(key(record), 0) + 1
        unmatched = []
        for record in left_old:
            k = key(record)
            candidates = new_by_key.get(k, [])
            if len(candidates) == 1 and old_count[k] == 1:
                pairs.append((record, candidates[0]))
                left_new.remove(candidates[0])
            else:
                unmatched.append(record)
        left_old = unmatched
    return Matching(tuple(pairs), tuple(left_old), tuple(left_new))


def baselines_of(
    results: Sequence[BenchmarkResult], folders: Iterable[Path] = (Path(),)
) -> dict[tuple[str, str], Record]:
    """The baseline record each result was gated against, by ``(test_id, key)``, read from the
    baseline file its decision names (relative to the first of ``folders`` that has it); files
    that cannot be read are passed over."""
    current = [r for r in map(from_result, results) if r is not None]
    found: dict[tuple[str, str], Record] = {}
    for file in dict.fromkeys(r.decision.baseline_file for r in results):
        if not file:
            continue
        for folder in folders:
            try:
                document = load(folder / file)
            except FileProblem:
                continue
            for old, new in match(document.records, current).pairs:
                found.setdefault((new.test_id, new.key), old)
            break
    return found


def distinct(values: Sequence[str | None]) -> str:
    """Different values joined (``2.5, 2.6``), one value as it is, nothing as ``-``."""
    seen = list(dict.fromkeys(v for v in values if v))
    return ", ".join(seen) if seen else "-"
