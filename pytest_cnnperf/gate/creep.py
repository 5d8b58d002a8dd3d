"""The creep gate (``--cnnperf-creep=PCT``, opt-in): a benchmark also fails when it is worse
than the best of its recent runs on the same machine in the history by more than the threshold.

A baseline file answers "is this run worse than the last accepted one?"; re-saving it after each
of six changes that each cost 2% hides a 12% loss. The history keeps every run, so the gate
compares with the best of the last ``cnnperf_creep_runs`` runs (since the newest run recorded
with ``--cnnperf-creep-accept``) however often the baseline was re-saved. The best run's samples
stand in for a baseline, and the comparison is the gate's own (significance, the machine's drift,
disturbed samples, the look's shares of the error rates), at the creep threshold for both
throughput and peak memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..model import Creep, Decision, Look, NoiseProfile, Result, Verdict
from .decide import decide
from .policy import GateSettings
from .throughput import throughput_at


@dataclass(frozen=True)
class Run:
    """A run of the benchmark in the history, as the creep gate reads it."""

    result: Result
    #: the commit it measured (``None`` when unknown) and when it was recorded
    commit: str | None
    recorded: str


class History(Protocol):
    """Where the creep gate finds a benchmark's recent runs (``history.record.HistoryLink``)."""

    #: why the history could not be read, once it could not
    problem: str | None

    def recent(self, test_id: str, key: str, machine: str, runs: int) -> list[Run] | None:
        """The benchmark's newest ``runs`` runs on ``machine``, newest first; ``None`` when the
        history cannot be read."""


def best_run(recent: Sequence[Run]) -> Run | None:
    """The run with the highest throughput among ``recent`` (those that measured it)."""
    measured = [r for r in recent if r.result.measurement and r.result.environment]
    if not measured:
        return None
    return max(measured, key=lambda r: r.result.measurement.items_per_second)  # type: ignore[union-attr]


def judge(
    decision: Decision,
    current: Result,
    recent: Sequence[Run],
    settings: GateSettings,
    threshold: float,
    look: Look,
    profile: NoiseProfile | None = None,
) -> tuple[Decision, bool]:
    """``decision`` (the baseline gate's at ``look``) with the creep gate's verdict added:
    regressed, with a :class:`~pytest_cnnperf.model.Creep` reason, when ``current`` is past
    ``threshold`` against the best of ``recent`` (another run: its bounds allow for the kind of
    machine's noise ``profile``, the device's default where ``None``); and whether the creep
    gate's comparison is still undecided at this look (more samples could decide it)."""
    best = best_run(recent)
    if best is None:
        return decision, False
    settings = dataclasses.replace(
        settings, throughput_threshold=threshold, memory_threshold=threshold, strict=False
    )
    throughput = throughput_at(current, best.result, settings, look, profile)
    against = decide(current, best.result, settings, look, throughput=throughput)
    regressed = tuple(
        c for c in (against.throughput, against.memory) if c and c.verdict is Verdict.REGRESSED
    )
    if against.verdict is not Verdict.REGRESSED or not regressed:
        return decision, against.verdict is Verdict.INCONCLUSIVE
    reason = Creep(
        comparisons=regressed,
        runs=len(recent),
        best_commit=best.commit,
        best_recorded=best.recorded,
        unit=current.unit,
    )
    return dataclasses.replace(
        decision,
        verdict=Verdict.REGRESSED,
        failed=True,
        reasons=(*decision.reasons, reason),
    ), False
