"""The gate at one look: a fresh measurement against its reference, decided in both directions.

Throughput: the per-sample step times of both sides, compared with the exact one-sided
Mann-Whitney test and the Hodges-Lehmann ratio against the threshold at the look's shares of the
error rates (``gate.design``), after allowing for none, all or twice of the machine's drift that
the calibration workload measured, and only where its own noise allows; samples that something
else disturbed cannot show a regression. Memory: past its threshold, confirmed in three samples,
every one above every baseline sample. Compiled benchmarks: new graph breaks and any recompile
while timed fail; compile time only past its own threshold. The manual's "How the gate decides"
page has the whole method.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import (
    Against,
    Attribution,
    CalibrationChanged,
    Comparison,
    CompileComparison,
    CudaGraphsSkipped,
    Decision,
    Disturbance,
    Disturbed,
    Environment,
    Look,
    MachineDrift,
    Measurement,
    NewGraphBreaks,
    NoBaseline,
    NoisyCalibration,
    NoProfile,
    ProfileFailed,
    Reason,
    Recompiled,
    Result,
    SamplingChanged,
    SlowerCompile,
    SoftwareChanged,
    Spread,
    UnequalPairs,
    UntrustworthyGpu,
    Verdict,
)
from ..model.config import calibration_unit
from ..model.decision import ComputesOtherwise
from . import stats, structure
from .attribute import attribute
from .policy import GateSettings

#: memory barely varies, so one sample that agrees with the baseline settles it; a change must
#: show in this many samples, every one past every baseline sample
MEMORY_CONFIRMATIONS = 3


CHANGES = (Verdict.REGRESSED, Verdict.IMPROVED)


def compare_throughput(
    baseline: Sequence[float],
    current: Sequence[float],
    settings: GateSettings,
    look: Look,
    machine_factor: float = 1.0,
    *,
    items: tuple[int, int] = (1, 1),
) -> Comparison:
    """Compare step times at ``look``'s shares of the error rates, the current ones divided by
    ``machine_factor`` first. ``items``: items per step (baseline, current), for reporting
    rates in items per second. An ``inconclusive`` verdict at a look that is not the last means
    "not decided yet"."""
    threshold = settings.throughput_threshold
    adjusted = [t / machine_factor for t in current]
    shift = stats.compare(baseline, adjusted, look.alpha, look.beta)
    allowed = 1 / (1 - threshold) if threshold < 1 else math.inf
    if shift.p_slower <= look.alpha and shift.ratio > allowed:
        verdict = Verdict.REGRESSED
    elif shift.p_faster <= look.alpha and 1 / shift.ratio - 1 > threshold:
        verdict = Verdict.IMPROVED
    elif shift.high <= allowed:
        verdict = Verdict.OK
    else:
        verdict = Verdict.INCONCLUSIVE
    base_rate, rate = items[0] / stats.median(baseline), items[1] / stats.median(current)
    return Comparison(
        metric="throughput",
        baseline=base_rate,
        current=rate,
        change=1 - 1 / shift.ratio,
        threshold=threshold,
        verdict=verdict,
        p_value=shift.p_slower,
        low=1 - 1 / shift.low if shift.low > 0 else None,  # None: too few samples to bound it
        high=1 - 1 / shift.high,
        baseline_samples=len(baseline),
        current_samples=len(current),
        machine_factor=machine_factor,
        raw_change=1 - rate / base_rate,
        look=look,
    )


def compare_memory(
    baseline: Sequence[int], current: Sequence[int], settings: GateSettings
) -> Comparison:
    """Peak memory: a change past the threshold and the slack is a regression (or an
    improvement) once :data:`MEMORY_CONFIRMATIONS` samples show it, every one beyond every
    baseline sample; with fewer it is inconclusive: not decided yet."""
    threshold, slack = settings.memory_threshold, settings.policy.memory_slack_bytes
    base, cur = stats.median(baseline), stats.median(current)
    growth = cur / base - 1 if base else 0.0
    confirmed = len(current) >= MEMORY_CONFIRMATIONS
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


#: a sample's steps spreading wider than this (IQR / median) mean something else was running:
#: torch.utils.benchmark calls it "significant environmental influence"
ERRATIC_SPREAD = 0.25
#: a sample whose calibration took this many times the run's median was disturbed too
SLOW_CALIBRATION = 1.5
#: and one whose threads were denied this many cores' worth of CPU time (``cpuload``): a busy
#: neighbour denies several times this, a quiet machine a fraction of it
BUSY_CORES = 0.1


def disturbed(measurement: Measurement) -> tuple[bool, ...]:
    """For each sample, whether something else ran during it: a slow calibration, and its threads
    denied the CPU where that is measured (CPU runs on Linux), erratic step times where it is not
    (only a clue: a model's own threads can make its steps uneven)."""
    calibrations = measurement.calibrations
    typical = stats.median(calibrations) if calibrations else None
    return tuple(
        (
            s.cpu_contention is None
            and len(s.step_times_s) >= 4
            and Spread.of(s.step_times_s).relative_iqr > ERRATIC_SPREAD
        )
        or (
            typical is not None
            and s.calibration_s is not None
            and s.calibration_s > SLOW_CALIBRATION * typical
        )
        or (s.cpu_contention or 0.0) > BUSY_CORES
        for s in measurement.samples
    )


def steady(measurement: Measurement, flags: Sequence[bool] | None = None) -> Measurement:
    """The samples of ``measurement`` that nothing else disturbed (``flags``: which were,
    :func:`disturbed`'s by default); all of them when every one was."""
    flags = disturbed(measurement) if flags is None else flags
    kept = tuple(s for s, flag in zip(measurement.samples, flags, strict=True) if not flag)
    if not kept or len(kept) == len(measurement.samples):
        return measurement
    return dataclasses.replace(measurement, samples=kept)


def mostly(count: int, total: int) -> bool:
    """Whether ``count`` disturbed samples of ``total`` are a third or more: enough that a
    reader of the figures should know."""
    return count * 3 >= total


def calibration_change(
    measurement: Measurement, baseline: Measurement, device: str
) -> CalibrationChanged | None:
    """The calibration units of the two sides, where both timed one and the units differ
    (``device``: the baseline's, for the units of samples that did not say theirs)."""
    if not baseline.calibrations or not measurement.calibrations:
        return None
    before = calibration_unit(baseline.calibration_unit, device)
    now = calibration_unit(measurement.calibration_unit, device)
    return CalibrationChanged(before, now) if before != now else None


#: the confidence of the calibration's bounds on the machine's drift (two-sided): the gate
#: allows for the part of the drift the calibration is this sure of, none when it is not sure
#: of any
DRIFT_CONFIDENCE = 0.90


def machine_drift(
    measurement: Measurement, baseline: Measurement, device: str
) -> MachineDrift | None:
    """How much slower the machine runs than when the baseline was recorded, as the calibration
    workload's times now and then say it (the Hodges-Lehmann ratio and its bounds); ``None``
    where either side has none, or they timed different calibration units."""
    if not baseline.calibrations or not measurement.calibrations:
        return None
    if calibration_change(measurement, baseline, device) is not None:
        return None
    tail = (1 - DRIFT_CONFIDENCE) / 2
    shift = stats.compare(baseline.calibrations, measurement.calibrations, tail, tail)
    low = shift.low if shift.low > 0 else None
    high = shift.high if math.isfinite(shift.high) else None
    if low is None or high is None:  # too few samples to bound it: not sure of any drift
        return MachineDrift(shift.ratio, low=min(shift.ratio, 1.0), high=max(shift.ratio, 1.0))
    return MachineDrift(shift.ratio, low=low, high=high)


@dataclass(frozen=True)
class Throughput:
    """The throughput verdict at one look, with the reasons behind it."""

    comparison: Comparison
    verdict: Verdict
    reasons: tuple[Reason, ...]
    #: whether any sample was undisturbed: more samples cannot help when none was
    quiet: bool


def drift_factors(drift: MachineDrift | None) -> tuple[float, float, float]:
    """The machine's drift each verdict must hold against, as factors on the current step
    times, from the calibration's estimate ``m``: a regression whether none, all or twice of a
    slowdown reached the benchmark (``max(1, m)²``), an improvement likewise (``min(1, m)²``),
    "ok" whether none or all of a speed-up did (``min(1, m)``: a faster machine hides a
    slowdown). Models follow the machine's drift by anywhere from none to more than twice of it,
    and a false alarm costs more than the rare regression left inconclusive."""
    if drift is None:
        return 1.0, 1.0, 1.0
    m = drift.ratio
    return max(1.0, m) ** 2, min(1.0, m) ** 2, min(1.0, m)


def calibration_noise(drift: MachineDrift | None) -> float | None:
    """Half the width of the calibration ratio's bounds, as a fraction: how far its estimate of
    the machine's drift can be off (``None``: no bounds)."""
    if drift is None or drift.low is None or drift.high is None:
        return None
    return (math.log(drift.high) - math.log(drift.low)) / 2


def judge_throughput(
    measurement: Measurement,
    baseline: Measurement,
    device: str,
    settings: GateSettings,
    look: Look,
    software_changed: bool,
) -> Throughput:
    """Throughput at ``look``, whether none, all or twice of the machine's drift the
    calibration measured reached the benchmark (no change can be shown where the calibration's
    own noise is larger than the threshold), with disturbed samples unable to show a
    regression."""
    reasons: list[Reason] = []
    flags = disturbed(measurement)
    # the machine's speed from the samples nothing else disturbed, on both sides: a disturbed
    # sample's calibration measured the disturbance, not the machine's steady speed
    drift = machine_drift(steady(measurement, flags), steady(baseline), device)
    slowest, fastest, fast = drift_factors(drift)
    items = (baseline.items_per_step, measurement.items_per_step)

    def compared(step_times: Sequence[float], factor: float) -> Comparison:
        return compare_throughput(
            baseline.step_times, step_times, settings, look, factor, items=items
        )

    def verdict_of(step_times: Sequence[float]) -> Verdict:
        if compared(step_times, slowest).verdict is Verdict.REGRESSED:
            return Verdict.REGRESSED
        if compared(step_times, fastest).verdict is Verdict.IMPROVED:
            return Verdict.IMPROVED
        if compared(step_times, fast).verdict in (Verdict.OK, Verdict.IMPROVED):
            return Verdict.OK
        return Verdict.INCONCLUSIVE

    verdict = verdict_of(measurement.step_times)
    # reported: after allowing for the drift the calibration measured, or as measured when the
    # software changed (the calibration itself may have changed then) or there is none
    estimate = drift.ratio if drift is not None and not software_changed else 1.0
    reported = compared(measurement.step_times, estimate)
    if drift is not None and not software_changed and abs(drift.ratio - 1) >= 0.02:
        as_measured = compared(measurement.step_times, 1.0).verdict
        if verdict is Verdict.INCONCLUSIVE and as_measured is not Verdict.INCONCLUSIVE:
            twice = compared(measurement.step_times, drift.ratio**2).verdict
            drift = dataclasses.replace(drift, verdicts=(as_measured, reported.verdict, twice))
        reasons.append(drift)
    if software_changed and drift is not None:
        reasons.append(SoftwareChanged())
    noise = calibration_noise(drift)
    if noise is not None and noise > settings.throughput_threshold and verdict in CHANGES:
        # its own noise as large as the threshold: it cannot tell the code's change from the
        # machine's, so against a stored baseline no change can be shown
        verdict = Verdict.INCONCLUSIVE
        reasons.append(NoisyCalibration(noise, settings.throughput_threshold))
    changed = calibration_change(measurement, baseline, device)
    if changed is not None:
        reasons.append(changed)
    quiet = [t for t, flag in zip(measurement.step_times, flags, strict=True) if not flag]
    count, total = sum(flags), len(flags)
    if verdict is Verdict.REGRESSED and count:
        # disturbed samples were slowed by the machine: only the quiet ones can show the code's
        if quiet and verdict_of(quiet) is Verdict.REGRESSED:
            reasons.append(Disturbed(count, total, Disturbance.QUIET_REGRESSED))
        else:
            verdict = Verdict.INCONCLUSIVE
            reasons.append(Disturbed(count, total, Disturbance.NO_VERDICT))
    elif mostly(count, total):
        reasons.append(Disturbed(count, total, Disturbance.NOTED))
    problems = measurement.health_problems
    if problems:
        reasons.append(UntrustworthyGpu(problems))
        if verdict is Verdict.REGRESSED:
            verdict = Verdict.INCONCLUSIVE
    return Throughput(reported, verdict, tuple(reasons), quiet=bool(quiet))


def throughput_at(
    current: Result, reference: Result, settings: GateSettings, look: Look
) -> Throughput:
    """The throughput verdict on ``current`` against ``reference`` at ``look``."""
    measurement, environment = measured(current)
    before, then = measured(reference)
    changed = bool(environment.changes_from(then))
    return judge_throughput(measurement, before, then.device, settings, look, changed)


def unequal_pairs(base: Measurement, current: Measurement) -> tuple[bool, ...]:
    """For each pair of samples of two sides measured in the same run (the i-th of each, taken
    one after the other), whether something else disturbed its sides unequally: their threads
    denied the CPU by more than :data:`BUSY_CORES` apart, or only one side's GPU reporting a
    problem. A neighbour that slowed both alike cannot fake a change between them."""
    flags = []
    for b, c in zip(base.samples, current.samples, strict=False):
        denied = abs((b.cpu_contention or 0.0) - (c.cpu_contention or 0.0)) > BUSY_CORES
        health = bool(b.health and b.health.problems) != bool(c.health and c.health.problems)
        flags.append(denied or health)
    return tuple(flags)


def judge_pairs(
    measurement: Measurement, base: Measurement, settings: GateSettings, look: Look
) -> Throughput:
    """Throughput at ``look`` against the same benchmark at another revision measured in this
    run, its samples taken in turn with these: compared as measured (the machine's drift
    reached both sides alike), on the pairs something else disturbed alike only: a pair whose
    one side was slowed more than the other shows the neighbour, not the code, in either
    direction."""
    items = (base.items_per_step, measurement.items_per_step)
    pairs = min(len(base.samples), len(measurement.samples))
    base_times, times = base.step_times[:pairs], measurement.step_times[:pairs]
    flags = unequal_pairs(base, measurement)
    alike = [i for i, flag in enumerate(flags) if not flag]
    count, total = sum(flags), len(flags)
    reasons: list[Reason] = []
    if count and alike:
        base_times = tuple(base_times[i] for i in alike)
        times = tuple(times[i] for i in alike)
        reasons.append(UnequalPairs(count, total, Disturbance.LEFT_OUT))
    comparison = compare_throughput(base_times, times, settings, look, items=items)
    verdict = comparison.verdict
    if count and not alike:
        verdict = Verdict.INCONCLUSIVE
        reasons.append(UnequalPairs(count, total, Disturbance.NO_VERDICT))
    return Throughput(comparison, verdict, tuple(reasons), quiet=bool(alike))


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


def measured(result: Result) -> tuple[Measurement, Environment]:
    """A result's measurement and environment, which a result that failed lacks."""
    if result.measurement is None or result.environment is None:
        raise ValueError(f"{result.name} has no measurement to compare: {result.error}")
    return result.measurement, result.environment


def decide(
    current: Result,
    reference: Result | None,
    settings: GateSettings,
    look: Look,
    baseline_file: str | None = None,
    elsewhere: tuple[str, ...] = (),
    *,
    throughput: Throughput | None = None,
    against: Against | None = None,
    absent: Reason | None = None,
) -> Decision:
    """The verdict on ``current`` against ``reference`` at ``look`` (``reference`` ``None``:
    there is none; ``elsewhere`` then names the kinds of machine that have one, or ``absent``
    says why). ``throughput``: the verdict an earlier look made final, which later samples
    (taken for memory or a profile) do not decide again. ``against``: the reference was
    measured at another revision in this run."""
    measurement, environment = measured(current)
    baseline = measured(reference) if reference is not None else None
    compiled, compile_reasons = judge_compile(
        measurement, baseline[0] if baseline else None, settings, environment.device
    )
    compile_failed = compiled is not None and compiled.verdict is Verdict.REGRESSED
    if baseline is None:
        return Decision(
            verdict=Verdict.NEW,
            failed=settings.strict or compile_failed,
            baseline_file=baseline_file,
            reasons=(absent or NoBaseline(environment.machine, elsewhere), *compile_reasons),
            compile=compiled,
            against=against,
        )
    before, then = baseline
    changes = environment.changes_from(then)
    if throughput is None:
        assert reference is not None
        throughput = throughput_at(current, reference, settings, look)
    structure_regressed, structure_reasons = structure.judge(measurement, before, settings)
    reasons = [*throughput.reasons, *compile_reasons, *structure_reasons]
    memory = None
    if before.memory_peaks and measurement.memory_peaks:
        memory = compare_memory(before.memory_peaks, measurement.memory_peaks, settings)
    verdict = combine(
        throughput.verdict,
        *([memory.verdict] if memory else []),
        *([compiled.verdict] if compiled else []),
        *([Verdict.REGRESSED] if structure_regressed else []),
    )
    if measurement.in_process != before.in_process:
        reasons.append(SamplingChanged(before.in_process, measurement.in_process))
    computes_otherwise = any(isinstance(r, ComputesOtherwise) for r in reasons)
    failed = verdict is Verdict.REGRESSED or (
        settings.strict and (verdict is Verdict.INCONCLUSIVE or bool(changes) or computes_otherwise)
    )
    return Decision(
        verdict=verdict,
        throughput=throughput.comparison,
        memory=memory,
        environment_changes=changes,
        reasons=tuple(reasons),
        baseline_file=baseline_file,
        failed=failed,
        compile=compiled,
        against=against,
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
