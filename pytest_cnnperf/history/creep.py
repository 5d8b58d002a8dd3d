"""The creep gate (``--cnnperf-creep=PCT``, opt-in): a benchmark also fails when it is worse
than the best of its recent runs on the same machine in the history by more than the threshold.

A baseline file answers "is this run worse than the last accepted one?"; re-saving it after each
of six changes that each cost 2% hides a 12% loss. The history keeps every run, so the gate
compares with the best of the last ``cnnperf_creep_runs`` runs (since the newest run recorded
with ``--cnnperf-creep-accept``) however often the baseline was re-saved. The best run's samples
stand in for a baseline, and the comparison is the gate's own (significance, the machine's drift,
disturbed samples), at the creep threshold for both throughput and peak memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .. import gate
from ..results import (
    BaselineEntry,
    Creep,
    Decision,
    Environment,
    Measurement,
    Verdict,
)
from .runs import Entry


def best_run(recent: Sequence[Entry]) -> Entry | None:
    """The run with the highest throughput among ``recent`` (those that measured it)."""
    measured = [e for e in recent if e.result.measurement and e.result.environment]
    if not measured:
        return None
    return max(measured, key=lambda e: e.result.measurement.items_per_second)  # type: ignore[union-attr]


def judge(
    decision: Decision,
    measurement: Measurement,
    environment: Environment,
    recent: Sequence[Entry],
    settings: gate.GateSettings,
    threshold: float,
) -> Decision:
    """``decision`` (the baseline gate's) with the creep gate's verdict added: regressed, with a
    :class:`~pytest_cnnperf.results.Creep` reason, when this run is past ``threshold`` against
    the best of ``recent``; re-measured first when the comparison is in doubt."""
    best = best_run(recent)
    if best is None:
        return decision
    result = best.result
    assert result.measurement is not None
    assert result.environment is not None
    reference = BaselineEntry.of(
        best.run.recorded, result.config, result.environment, result.measurement
    )
    settings = dataclasses.replace(
        settings, throughput_threshold=threshold, memory_threshold=threshold, strict=False
    )
    against = gate.decide(measurement, environment, reference, settings)
    regressed = tuple(
        c for c in (against.throughput, against.memory) if c and c.verdict is Verdict.REGRESSED
    )
    if against.verdict is Verdict.REGRESSED and regressed:
        reason = Creep(
            comparisons=regressed,
            runs=len(recent),
            best_commit=best.run.commit,
            best_recorded=best.run.recorded,
            unit=measurement.unit,
        )
        return dataclasses.replace(
            decision,
            verdict=Verdict.REGRESSED,
            failed=True,
            reasons=(*decision.reasons, reason),
            remeasure=decision.remeasure or against.remeasure,
        )
    return dataclasses.replace(decision, remeasure=decision.remeasure or against.remeasure)
