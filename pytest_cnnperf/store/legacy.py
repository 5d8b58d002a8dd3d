"""Readers of the files version 1 wrote, turning them into today's records.

Version 1 kept a baseline entry as per-sample lists (``step_time_s``, ``calibration_s``,
``peak_allocated_bytes``) beside medians (``phases_s``), and a decision's reasons as sentences
(``notes``). A baseline entry is read in its own shape first, so that a bad value is named by its
path in the file, then turned into a result without a decision; a sentence becomes a
:class:`~pytest_cnnperf.model.Remark`, with the role its opening words give it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from ..model import (
    BenchConfig,
    Compilation,
    Environment,
    GraphBreak,
    Measurement,
    MemoryPeak,
    Result,
    Sample,
)
from ..model.conditions import NO_BASELINE
from ..model.values import NONEMPTY, Bytes, NonNegative, PositiveInt, Seconds
from .codec import load


@dataclass(frozen=True)
class EntryV1:
    """A baseline entry as version 1 wrote it."""

    recorded: str
    config: BenchConfig
    environment: Environment
    items_per_step: PositiveInt
    step_time_s: Annotated[tuple[Seconds, ...], NONEMPTY]
    calibration_s: tuple[Seconds, ...] = ()
    calibration_unit: str | None = None
    peak_allocated_bytes: tuple[Bytes, ...] = ()
    peak_reserved_bytes: Bytes | None = None
    memory_source: str | None = None
    phases_s: dict[str, NonNegative] = field(default_factory=dict)
    cold_step_s: NonNegative | None = None
    in_process: bool = False
    compile_cold_s: NonNegative | None = None
    compile_warm_s: NonNegative | None = None
    graph_breaks: tuple[GraphBreak, ...] = ()


@dataclass(frozen=True)
class BaselineFileV1:
    machine: str
    entries: dict[str, dict[str, EntryV1]]
    module: str | None = None


def _compilation(entry: EntryV1, index: int) -> Compilation | None:
    """The compile figures of a compiled entry, spread over its samples as today's keep them:
    the cold compile time in the first sample, the warm one in the next."""
    if entry.config.compile is None:
        return None
    cold, warm = entry.compile_cold_s, entry.compile_warm_s
    warm_at = 1 if cold is not None and len(entry.step_time_s) > 1 else 0
    if index == 0 and cold is not None:
        seconds, cache = cold, "cold"
    elif index == warm_at and warm is not None:
        seconds, cache = warm, "warm"
    else:
        seconds, cache = None, None
    return Compilation(compile_s=seconds, cache=cache, graph_breaks=entry.graph_breaks)


def result_of_entry(entry: EntryV1) -> Result:
    """A version-1 baseline entry as a result without a decision (the file's keys name its
    test)."""
    samples = []
    for i, step_time in enumerate(entry.step_time_s):
        memory = None
        if i < len(entry.peak_allocated_bytes):
            memory = MemoryPeak(
                allocated_bytes=entry.peak_allocated_bytes[i],
                reserved_bytes=entry.peak_reserved_bytes,
                source=entry.memory_source or "unknown",
            )
        samples.append(
            Sample(
                step_time_s=step_time,
                phases={name: (median,) for name, median in entry.phases_s.items()},
                cold_step_s=entry.cold_step_s,
                calibration_s=entry.calibration_s[i] if i < len(entry.calibration_s) else None,
                calibration_unit=entry.calibration_unit,
                memory=memory,
                in_process=entry.in_process,
                compilation=_compilation(entry, i),
            )
        )
    return Result(
        config=entry.config,
        recorded=entry.recorded,
        environment=entry.environment,
        measurement=Measurement(entry.items_per_step, tuple(samples), entry.config.unit),
    )


def baseline_file(data: dict[str, Any], path: str) -> BaselineFileV1:
    value: BaselineFileV1 = load(BaselineFileV1, data, path)
    return value


#: how version 1's sentences began, by the role they played
_OPENINGS = {
    "creep: ": "creep",
    "graph breaks: ": "graph breaks",
    "recompiles: ": "recompiles",
    "compile time: ": "compile time",
}


def remark(text: str) -> dict[str, Any]:
    """A version-1 note as today's reason data."""
    role = next((r for opening, r in _OPENINGS.items() if text.startswith(opening)), None)
    if text == NO_BASELINE:
        role = "no-baseline"
    return {"kind": "remark", "text": text, **({"role": role} if role else {})}


def result_data(data: Any) -> Any:
    """A version-1 result's data in today's shape (its notes as reasons), for reading."""
    if not isinstance(data, dict) or not isinstance(data.get("decision"), dict):
        return data
    decision = dict(data["decision"])
    notes = decision.pop("notes", [])
    decision["reasons"] = (
        [remark(n) if isinstance(n, str) else n for n in notes]
        if isinstance(notes, list)
        else notes
    )
    return {**data, "decision": decision}


def results_file_data(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 results file's data in today's shape."""
    results = data.get("results")
    if isinstance(results, list):
        return {**data, "results": [result_data(r) for r in results]}
    return data
