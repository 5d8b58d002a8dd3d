"""The gate at one look: a fresh measurement against its reference, decided in both directions.

Throughput as ``gate.throughput`` judges it, or by the step's instructions where they gate it
(``--cnnperf-metric=instructions``, ``gate.counts``: counts have no noise, so a growth past the
threshold is a regression). Memory: past its threshold,
confirmed in three samples, every one above every baseline sample. Compiled benchmarks: new
graph breaks and any recompile while timed fail; compile time only past its own threshold. The
manual's "How the gate decides" page has the whole method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..model import (
    Against,
    Attribution,
    Comparison,
    CompileComparison,
    CountedElsewhere,
    CountedOtherwise,
    CountsMoved,
    CudaGraphsSkipped,
    Decision,
    Disturbance,
    Environment,
    Look,
    Measurement,
    NewGraphBreaks,
    NoBaseline,
    NoCounts,
    NoProfile,
    OperatorCountsChanged,
    OtherKernels,
    ProfileFailed,
    Reason,
    Recompiled,
    Result,
    SamplingChanged,
    SlowerCompile,
    Verdict,
)
from ..model.findings import ComputesOtherwise
from . import stats, structure
from .attribute import attribute
from .counts import INSTRUCTIONS_SPREAD, compare_instructions, identity_changes, operator_counts
from .policy import GateSettings
from .throughput import CHANGES, Throughput, measured, noted, throughput_at

#: memory barely varies, so one sample that agrees with the baseline settles it; a change must
#: show in this many samples, every one past every baseline sample
MEMORY_CONFIRMATIONS = 3


def compare_memory(
    baseline: Sequence[int],
    current: Sequence[int],
    settings: GateSettings,
    confirmations: int = MEMORY_CONFIRMATIONS,
) -> Comparison:
    """Peak memory: a change past the threshold and the slack is a regression (or an
    improvement) once ``confirmations`` samples show it, every one beyond every baseline
    sample; with fewer it is inconclusive: not decided yet."""
    threshold, slack = settings.memory_threshold, settings.policy.memory_slack_bytes
    base, cur = stats.median(baseline), stats.median(current)
    growth = cur / base - 1 if base else 0.0
    confirmed = len(current) >= confirmations
    if growth > threshold and cur - base > slack:
        shown = confirmed and min(current) > max(baseline)
        verdict = Verdict.REGRESSED if shown else Verdict.INCONCLUSIVE
    elif growth < -threshold and base - cur > slack:
        shown = confirmed and max(current) < min(baseline)
        verdict = Verdict.IMPROVED if shown else Verdict.INCONCLUSIVE
    else:
        verdict = Verdict.OK
    return Comparison(
        metric="memory",
        baseline=base,
        current=cur,
        change=growth,
        threshold=threshold,
        verdict=verdict,
        baseline_samples=len(baseline),
        current_samples=len(current),
    )


def combine(*verdicts: Verdict) -> Verdict:
    """A benchmark's verdict from its metrics': any regression, else any doubt, else any gain."""
    for verdict in (Verdict.REGRESSED, Verdict.INCONCLUSIVE, Verdict.IMPROVED):
        if verdict in verdicts:
            return verdict
    return Verdict.OK


def _compile_times(
    measurement: Measurement, baseline: Measurement | None
) -> tuple[str | None, float | None, float | None]:
    """The compile times to compare: cold against cold where both have one, else warm."""
    cold, warm = measurement.compile_time("cold"), measurement.compile_time("warm")
    if baseline is not None:
        for cache, now in (("cold", cold), ("warm", warm)):
            then = baseline.compile_time(cache)
            if now is not None and then is not None:
                return cache, now, then
    return ("cold", cold, None) if cold is not None else ("warm", warm, None)


def judge_compile(
    measurement: Measurement,
    baseline: Measurement | None,
    settings: GateSettings,
    device: str,
) -> tuple[CompileComparison | None, tuple[Reason, ...]]:
    """A compiled benchmark's graph breaks, recompiles and compile time against its baseline
    (``None``: there is none); ``None`` for a benchmark that was not compiled."""
    if not measurement.compilations:
        return None, ()
    reasons: list[Reason] = []
    breaks = measurement.graph_breaks
    baseline_breaks = baseline.graph_breaks if baseline is not None else None
    verdict = Verdict.OK
    if baseline_breaks is not None and len(breaks) > len(baseline_breaks):
        known = {(b.reason, b.location) for b in baseline_breaks}
        added = tuple(b for b in breaks if (b.reason, b.location) not in known)
        reasons.append(NewGraphBreaks(len(breaks), len(baseline_breaks), added or breaks))
        verdict = Verdict.REGRESSED
    if measurement.recompiles or measurement.eager_frames:
        reasons.append(
            Recompiled(
                measurement.recompiles, measurement.recompile_reasons, measurement.eager_frames
            )
        )
        verdict = Verdict.REGRESSED
    cache, now, then = _compile_times(measurement, baseline)
    threshold = settings.compile_time_threshold
    if threshold is not None and now is not None and then and now > then * (1 + threshold):
        reasons.append(SlowerCompile(now, then, threshold, cache or "cold"))
        verdict = Verdict.REGRESSED
    if measurement.cudagraph_skips:
        reasons.append(CudaGraphsSkipped(measurement.cudagraph_skips, device))
    comparison = CompileComparison(
        graph_breaks=len(breaks),
        baseline_graph_breaks=None if baseline_breaks is None else len(baseline_breaks),
        recompiles=measurement.recompiles,
        eager_frames=measurement.eager_frames,
        warmup_recompiles=measurement.warmup_recompiles,
        cache=cache if now is not None else None,
        compile_s=now,
        baseline_compile_s=then,
        threshold=threshold,
        verdict=verdict,
    )
    return comparison, tuple(reasons)


def kernels_differ(environment: Environment, other: Result) -> str:
    """What picks other kernels on the machine ``other`` was measured on than on this one
    (``CPU capability AVX2 -> AVX512``), ``""`` where nothing known does: the figures of
    another kind of machine are never judged against these."""
    then = other.environment
    if then is None:
        return ""
    return "; ".join(environment.kernel_changes(then))


def decide(
    current: Result,
    reference: Result | None,
    settings: GateSettings,
    look: Look,
    baseline_file: str | None = None,
    *,
    throughput: Throughput | None = None,
    against: Against | None = None,
    absent: Reason | None = None,
) -> Decision:
    """The verdict on ``current`` against ``reference`` at ``look`` (``reference`` ``None``:
    there is none, and ``absent`` says why). ``throughput``: the verdict an earlier look made
    final, which later samples (taken for memory or a profile) do not decide again.
    ``against``: the reference was measured at another revision in this run. A reference
    measured where other hardware picks the kernels shows no change of speed or memory."""
    measurement, environment = measured(current)
    baseline = measured(reference) if reference is not None else None
    compiled, compile_reasons = judge_compile(
        measurement, baseline[0] if baseline else None, settings, environment.device
    )
    compile_failed = compiled is not None and compiled.verdict is Verdict.REGRESSED

    def new(reasons: Sequence[Reason], timed: Comparison | None = None) -> Decision:
        """Nothing to compare with: new, failing in strict mode (or on a compile regression)."""
        return Decision(
            verdict=Verdict.NEW,
            throughput=timed,
            failed=settings.strict or compile_failed,
            baseline_file=baseline_file,
            reasons=tuple(reasons),
            compile=compiled,
            against=against,
        )

    if baseline is None:  # a disturbed run's figures are the machine's as much as the code's
        busy = noted(measurement, Disturbance.NOTED)
        return new([absent or NoBaseline(environment.machine), *busy, *compile_reasons])
    before, then = baseline
    # counts gated against another kind of machine's, counted the same way (gate.counts)
    elsewhere = settings.metric == "instructions" and then.machine != environment.machine
    changes = () if elsewhere else environment.changes_from(then)
    if throughput is None:
        assert reference is not None
        throughput = throughput_at(current, reference, settings, look)
    structure_regressed, structure_reasons = structure.judge(measurement, before, settings)
    kernels = environment.kernel_changes(then)
    cause = "; ".join(kernels or changes) or None
    structure_reasons = tuple(
        dataclasses.replace(r, likely_cause=cause) if isinstance(r, ComputesOtherwise) else r
        for r in structure_reasons
    )
    # with the counts gating throughput, the time's reasons (the machine's drift and noise)
    # explain a figure that decides nothing
    timed = throughput.reasons if settings.metric == "time" else ()
    reasons = [*timed, *compile_reasons, *structure_reasons]
    memory = None
    if before.memory_peaks and measurement.memory_peaks:
        memory = compare_memory(before.memory_peaks, measurement.memory_peaks, settings)
    speed = throughput.verdict
    counts = None
    if settings.metric == "instructions":  # the counts gate throughput; the time is reported
        was, now = before.instructions, measurement.instructions
        if was is None or now is None:
            return new([NoCounts(), *reasons], throughput.comparison)
        otherwise = identity_changes((environment, now), (then, was))
        if otherwise:
            return new([CountedOtherwise(otherwise), *reasons], throughput.comparison)
        counts = compare_instructions(was, now, settings.instructions_threshold)
        speed = counts.verdict
        if speed is Verdict.OK and abs(counts.change) > INSTRUCTIONS_SPREAD:
            reasons.append(CountsMoved(counts.change, INSTRUCTIONS_SPREAD))
        if speed in CHANGES:
            changed = operator_counts(was, now)
            if changed:
                reasons.append(OperatorCountsChanged(changed))
    if elsewhere:  # the counts decide; that machine's memory is not this one's
        reasons.append(CountedElsewhere(then.machine))
        memory = None
    elif kernels:  # another kind of machine's figures: never a change, nor its absence
        reasons.append(OtherKernels(kernels))
        speed = Verdict.INCONCLUSIVE
        if memory is not None:
            memory = dataclasses.replace(memory, verdict=Verdict.INCONCLUSIVE)
    verdict = combine(
        speed,
        *(found.verdict for found in (memory, compiled) if found is not None),
        *([Verdict.REGRESSED] if structure_regressed else []),
    )
    if measurement.in_process != before.in_process:
        reasons.append(SamplingChanged(before.in_process, measurement.in_process))
    computes_otherwise = any(isinstance(r, ComputesOtherwise) for r in reasons)
    failed = verdict is Verdict.REGRESSED or (
        settings.strict and (verdict is Verdict.INCONCLUSIVE or bool(changes) or computes_otherwise)
    )
    comparison = throughput.comparison
    if counts is None and comparison.verdict is not speed:
        comparison = dataclasses.replace(comparison, verdict=speed)
    if counts is not None and kernels and not elsewhere:
        counts = dataclasses.replace(counts, verdict=speed)
    return Decision(
        verdict=verdict,
        throughput=comparison,
        memory=memory,
        environment_changes=changes,
        reasons=tuple(reasons),
        baseline_file=baseline_file,
        failed=failed,
        compile=compiled,
        against=against,
        instructions=counts,
    )


def attribution(
    baseline: Measurement, measurement: Measurement, memory: bool
) -> tuple[Attribution | None, Reason | None]:
    """Which operators changed (``memory``: and which allocations grew), or why that cannot be
    said."""
    if baseline.profile is None:
        return None, NoProfile()
    if measurement.profile is None:
        error = measurement.profile_error
        return None, ProfileFailed(error) if error else None
    peaks = (baseline.peak_parts, measurement.peak_parts)
    return attribute(baseline.profile, measurement.profile, memory, peaks), None
