"""The rows every tabular report shows, computed once from the results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import units
from ..results import BenchmarkResult, Environment


@dataclass(frozen=True)
class Row:
    verdict: str
    test: str
    benchmark: str
    throughput: str
    throughput_change: str
    step: str
    phases: str
    memory: str
    memory_change: str
    note: str


HEADERS = Row(
    verdict="verdict",
    test="test",
    benchmark="benchmark",
    throughput="throughput",
    throughput_change="vs base",
    step="step",
    phases="fwd / bwd / opt",
    memory="peak mem",
    memory_change="vs base",
    note="",
)


def row(result: BenchmarkResult) -> Row:
    m, d = result.measurement, result.decision
    test = result.test_id.split("::", 1)[-1]
    if m is None:
        return Row(
            str(d.verdict), test, result.key, "-", "-", "-", "-", "-", "-", result.error or ""
        )
    spread = m.step
    throughput = units.rate(m.items_per_second, m.unit)
    if spread.n > 1:
        throughput += f" ±{spread.relative_iqr / 2:.0%}"
    phases = [m.phase(name) for name in ("forward", "backward", "optimizer")]
    phase_text = (
        " / ".join(f"{p.median * 1e3:.1f}" for p in phases if p) + " ms" if all(phases) else "-"
    )
    notes = [f"environment changed: {c}" for c in d.environment_changes]
    notes += [n for n in d.notes if n != "no baseline"]
    return Row(
        verdict=str(d.verdict),
        test=test,
        benchmark=result.key,
        throughput=throughput,
        throughput_change=units.change(-d.throughput.change) if d.throughput else "-",
        step=units.seconds(m.step_time_s),
        phases=phase_text,
        memory=units.nbytes(m.peak_allocated_bytes),
        memory_change=units.change(d.memory.change) if d.memory else "-",
        note="; ".join(notes),
    )


def environments(results: Sequence[BenchmarkResult]) -> list[Environment]:
    seen: dict[str, Environment] = {}
    for result in results:
        if result.environment is not None:
            seen.setdefault(result.environment.describe(), result.environment)
    return list(seen.values())
