"""Throughput at one look: the per-sample step times of both sides, compared with the exact
one-sided Mann-Whitney test and the Hodges-Lehmann ratio against the threshold at the look's
shares of the error rates (``gate.design``).

Against a stored baseline the bounds also hold what moves a whole run, which no sample shows:
the machine's drift, divided out by the calibration workload where the kind of machine's noise
profile says that helps, with the estimate's error and the between-run spread the profile
recorded (``gate.noise``); a drift beyond the profile's, a noisy calibration and disturbed
samples veto any verdict, ok included. Against a revision measured in the same run, the pairs of
samples are compared as they are, those disturbed unequally left out. Two runs of files
(``cnnperf compare``) are compared with what the files hold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import (
    CalibrationChanged,
    Comparison,
    Disturbance,
    Disturbed,
    DriftUncovered,
    Environment,
    Look,
    MachineDrift,
    Measurement,
    NoiseProfile,
    NoisyCalibration,
    Reason,
    Result,
    Sample,
    SoftwareChanged,
    Spread,
    UnequalPairs,
    UntrustworthyGpu,
    Unvouched,
    Verdict,
)
from ..model.conditions import TwoSpeeds, Unprofiled
from ..model.config import calibration_unit
from ..model.noise import WIDEST
from . import noise, stats
from .policy import GateSettings

#: the verdicts that say the benchmark changed
CHANGES = (Verdict.REGRESSED, Verdict.IMPROVED)


def compare_throughput(
    baseline: Sequence[float],
    current: Sequence[float],
    settings: GateSettings,
    look: Look,
    machine_factor: float = 1.0,
    *,
    items: tuple[int, int] = (1, 1),
    runs: noise.RunNoise = noise.NO_RUN_NOISE,
    calibrated: tuple[Sequence[float], Sequence[float]] | None = None,
) -> Comparison:
    """Compare step times at ``look``'s shares of the error rates, the current ones divided by
    ``machine_factor`` (or ``calibrated``: each side's divided by its own sample's calibration,
    with ``machine_factor`` only the drift reported), allowing for what moves a whole run
    (``runs``, ``gate.noise``). ``items``: items per step (baseline, current), for rates in items
    per second. Inconclusive at a look that is not the last means "not decided yet"."""
    threshold = settings.throughput_threshold
    before, adjusted = calibrated or (baseline, [t / machine_factor for t in current])
    shift = stats.compare(before, adjusted, look.alpha, look.beta)
    upper = stats.compare(before, adjusted, look.alpha, look.alpha).high
    bounds = noise.widen(
        math.log(shift.ratio),
        (_log(shift.low), _log(shift.high), _log(upper)),
        runs,
        look.alpha,
        look.beta,
    )
    slower = shift.p_slower <= look.alpha and bounds.low > 0 and bounds.shift > _shift(threshold)
    found = _comparison(
        (baseline, current), items, threshold, bounds, slower, shift.p_faster <= look.alpha
    )
    between = runs.total or None
    return dataclasses.replace(
        found, p_value=shift.p_slower, machine_factor=machine_factor, look=look, between=between
    )


def _comparison(
    sides: tuple[Sequence[float], Sequence[float]],
    items: tuple[int, int],
    threshold: float,
    bounds: noise.Bounds,
    regressed: bool,
    faster: bool = True,
) -> Comparison:
    """The throughput comparison of the step times ``sides`` whose log shift ``bounds`` hold:
    ``regressed`` as the caller's test says; improved where the rank test says ``faster`` and
    the gain is past the threshold at the false-alarm level; ok where the upper bound is within
    the threshold."""
    if regressed:
        verdict = Verdict.REGRESSED
    elif faster and bounds.high_alpha < -math.log(1 + threshold):
        # the gain beyond the threshold with every term at the false-alarm level: a false
        # improved is as wrong as a false ok (a baseline recorded in a slow spell, a
        # benchmark whose runs come at two speeds)
        verdict = Verdict.IMPROVED
    elif bounds.high <= _shift(threshold):
        verdict = Verdict.OK
    else:
        verdict = Verdict.INCONCLUSIVE
    baseline, current = sides
    base_rate, rate = items[0] / stats.median(baseline), items[1] / stats.median(current)
    return Comparison(
        metric="throughput",
        baseline=base_rate,
        current=rate,
        change=_loss(bounds.shift),
        threshold=threshold,
        verdict=verdict,
        low=_loss(bounds.low) if math.isfinite(bounds.low) else None,  # None: not bounded
        high=_loss(bounds.high),
        baseline_samples=len(baseline),
        current_samples=len(current),
        raw_change=1 - rate / base_rate,
    )


def _log(ratio: float) -> float:
    """A bound of a ratio in log units (0: no lower bound; inf: no upper one)."""
    return math.log(ratio) if ratio > 0 else -math.inf


def _loss(shift: float) -> float:
    """The throughput lost to a log shift of step times (negative: gained)."""
    return 1 - math.exp(-shift) if math.isfinite(shift) else (1.0 if shift > 0 else -math.inf)


def compare_runs(
    baseline: Sequence[float],
    current: Sequence[float],
    settings: GateSettings,
    profile: NoiseProfile,
    *,
    items: tuple[int, int] = (1, 1),
) -> Comparison:
    """Two runs measured before, with as many samples as they took (``cnnperf compare``):
    three against three cannot reach a false-alarm rate of 1% by ranks alone, so the samples'
    part of the bounds comes from their spread (the larger of theirs and the ``profile``'s),
    and the profile's between-run spread is added. Regressed: the loss's lower bound past the
    threshold; ok: its upper bound under it."""
    policy, threshold = settings.policy, settings.throughput_threshold
    shift = math.log(stats.compare(baseline, current, policy.alpha, policy.beta).ratio)
    spreads = [noise.spread(side) for side in (baseline, current) if len(side) > 2]
    within = max([profile.within, *spreads])
    sampled = noise.MEDIAN_VARIANCE * within**2 * (1 / len(baseline) + 1 / len(current))
    between = noise.term(profile, calibrated=False)
    runs = noise.RunNoise(between, math.hypot(between, math.sqrt(sampled)))
    bounds = noise.widen(shift, (shift, shift, shift), runs, policy.alpha, policy.beta)
    found = _comparison(
        (baseline, current), items, threshold, bounds, bounds.low > _shift(threshold)
    )
    return dataclasses.replace(found, between=runs.total)


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
    (only a clue: a model's own threads can make its steps uneven, and a loader's always are)."""
    calibrations = measurement.calibrations
    typical = stats.median(calibrations) if calibrations else None
    return tuple(
        (
            s.cpu_contention is None
            and s.loading is None  # a loader's batches come in bursts: its steps are uneven
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


def noted(measurement: Measurement, effect: Disturbance) -> tuple[Disturbed, ...]:
    """The reason that says a third or more of the samples were disturbed, where they were."""
    flags = disturbed(measurement)
    count, total = sum(flags), len(flags)
    return (Disturbed(count, total, effect),) if count and mostly(count, total) else ()


def compare_measured(
    before: Measurement, after: Measurement, settings: GateSettings, profile: NoiseProfile
) -> tuple[Comparison, Disturbed | None, str]:
    """Two runs' measurements as ``cnnperf compare`` decides them (:func:`compare_runs`): the
    samples something else disturbed were slowed by the machine, so the undisturbed ones alone
    decide, and a run with none leaves no throughput verdict. Also which runs were disturbed
    (``OLD``, ``NEW``, ``OLD and NEW``; empty where neither was)."""
    items = (before.items_per_step, after.items_per_step)
    flags = (disturbed(before), disturbed(after))
    old, new = (steady(m, side).step_times for m, side in zip((before, after), flags, strict=True))
    found = compare_runs(old, new, settings, profile, items=items)
    busy = [side for side in flags if any(side)]
    count, total = sum(map(sum, busy)), sum(map(len, busy))
    stands = all(not all(side) for side in flags)  # each run's quiet samples decided
    verdict, reason = _disturbance(found.verdict, count, total, stands)
    runs = " and ".join(n for n, side in zip(("OLD", "NEW"), flags, strict=True) if any(side))
    return dataclasses.replace(found, verdict=verdict), reason, runs if reason else ""


def _disturbance(
    verdict: Verdict, count: int, total: int, stands: bool
) -> tuple[Verdict, Disturbed | None]:
    """``verdict`` with ``count`` of ``total`` samples disturbed, and the reason that says so:
    where the quiet samples give it too (``stands``), a regression they show, or a note where a
    third or more were disturbed; else no verdict."""
    if not count:
        return verdict, None
    if not stands:
        effect = Disturbance.NOT_OK if verdict is Verdict.OK else Disturbance.NO_VERDICT
        return Verdict.INCONCLUSIVE, Disturbed(count, total, effect)
    if verdict is Verdict.REGRESSED:
        return verdict, Disturbed(count, total, Disturbance.QUIET_REGRESSED)
    return verdict, Disturbed(count, total, Disturbance.NOTED) if mostly(count, total) else None


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


#: the confidence of the calibration's bounds on the machine's drift (two-sided)
DRIFT_CONFIDENCE = 0.90


def machine_drift(measurement: Measurement, baseline: Measurement) -> MachineDrift | None:
    """How much slower the machine runs than when the baseline was recorded, as the calibration
    workload's times now and then say it (the Hodges-Lehmann ratio and its bounds); ``None``
    where either side has none."""
    if not baseline.calibrations or not measurement.calibrations:
        return None
    tail = (1 - DRIFT_CONFIDENCE) / 2
    shift = stats.compare(baseline.calibrations, measurement.calibrations, tail, tail)
    if shift.low <= 0 or not math.isfinite(shift.high):  # too few samples to bound it
        return MachineDrift(shift.ratio)
    return MachineDrift(shift.ratio, low=shift.low, high=shift.high)


@dataclass(frozen=True)
class Throughput:
    """The throughput verdict at one look, with the reasons behind it."""

    comparison: Comparison
    verdict: Verdict
    reasons: tuple[Reason, ...]
    #: whether any sample was undisturbed: more samples cannot help when none was
    quiet: bool
    #: whether samples up to the last look could still settle an inconclusive verdict: the
    #: noise they cannot average away may leave no verdict within reach
    settles: bool = True


def calibration_noise(drift: MachineDrift | None) -> float | None:
    """Half the width of the calibration ratio's bounds, as a fraction: how far its estimate of
    the machine's drift can be off (``None``: no bounds)."""
    if drift is None or drift.low is None or drift.high is None:
        return None
    return (math.log(drift.high) - math.log(drift.low)) / 2


def per_sample(
    baseline: Measurement,
    measurement: Measurement,
    flags: Sequence[bool],
    drift: float,
    power: int = 1,
) -> tuple[list[float], list[float]]:
    """Both sides' step times, each divided by its own sample's calibration time (to ``power``),
    on the scale of the baseline's: a sample's calibration and steps share the machine's speed
    of that moment, which one ratio for the whole run cannot follow. A sample something else
    disturbed (``flags``), or one without a calibration, is divided by the run's undisturbed
    drift (``drift``) instead: its calibration measured the disturbance."""
    steady_base = steady(baseline)
    reference = stats.median(steady_base.calibrations)
    base_flags = disturbed(baseline)

    def scaled(sample: Sample, flag: bool, fallback: float) -> float:
        own = sample.calibration_s if sample.calibration_s and not flag else fallback
        return sample.step_time_s * (reference / own) ** power

    base = [scaled(s, f, reference) for s, f in zip(baseline.samples, base_flags, strict=True)]
    now = [scaled(s, f, reference * drift) for s, f in zip(measurement.samples, flags, strict=True)]
    return base, now


def judge_throughput(
    measurement: Measurement,
    baseline: Measurement,
    device: str,
    settings: GateSettings,
    look: Look,
    software_changed: bool,
    profile: NoiseProfile | None = None,
    cap: int | None = None,
) -> Throughput:
    """Throughput at ``look`` against a stored baseline: the samples' shift, divided by the
    machine's drift where the kind of machine's noise ``profile`` says the calibration follows
    it, with every variance term in its bounds (the samples', the calibration's estimate's,
    the between-run spread the profile recorded). A drift beyond what the profile has seen, a
    calibration noisier than the threshold, and disturbed samples veto a verdict, ok too.
    ``cap``: the samples at the last look, to say whether more could settle it."""
    quiet_base = steady(baseline)
    # the baseline's samples' spreads, as a recorded run's (an unseen benchmark is scaled by them)
    base_run = noise.summarise(
        noise.Run(quiet_base.step_times, [s.calibration_s for s in quiet_base.samples]), ""
    )
    profile = noise.for_unseen(
        profile or noise.default(device), base_run.spread, base_run.residual_spread
    )
    reasons: list[Reason] = []
    flags = disturbed(measurement)
    changed = calibration_change(measurement, baseline, device)
    # the machine's speed from the samples nothing else disturbed, on both sides (a disturbed
    # sample's calibration measured the disturbance, not the machine's steady speed), and not
    # where the two sides timed different calibration units
    drift = None if changed else machine_drift(steady(measurement, flags), quiet_base)
    sizes = len(baseline.samples), len(measurement.samples)
    calibrate = (
        drift is not None
        and drift.low is not None  # too few samples to bound it: nothing to divide by
        and not software_changed
        and noise.calibrates(profile, *sizes)
    )
    between = noise.term(profile, calibrated=calibrate)
    runs = noise.RunNoise(between, between)
    factor = drift.ratio if calibrate and drift is not None else 1.0
    items = (baseline.items_per_step, measurement.items_per_step)
    everything = tuple(range(len(measurement.samples)))

    def compared(
        kept: Sequence[int] = everything,
        moved: noise.RunNoise = runs,
        power: int = 1 if calibrate else 0,
    ) -> Comparison:
        """The comparison on the samples ``kept``, each divided by its calibration's time to
        the ``power`` (0: as measured; 2: twice the drift)."""
        times = [measurement.step_times[i] for i in kept]
        sides = None
        if power and drift is not None:
            base, now = per_sample(baseline, measurement, flags, drift.ratio, power)
            sides = (base, [now[i] for i in kept])
        return compare_throughput(
            baseline.step_times,
            times,
            settings,
            look,
            factor**power,
            items=items,
            runs=moved,
            calibrated=sides,
        )

    comparison = compared()
    verdict = comparison.verdict
    if profile.source == WIDEST:
        reasons.append(Unprofiled(between, calibrate, profile.benchmarks))
    if profile.modes > 1 and profile.mode_gap is not None:
        reasons.append(TwoSpeeds(profile.mode_gap, profile.fast_runs, profile.runs, between))
    if drift is not None and abs(drift.ratio - 1) >= 0.02:
        reasons.append(dataclasses.replace(drift, allowed=calibrate))
    if software_changed and drift is not None:
        reasons.append(SoftwareChanged())
    if changed is not None:
        reasons.append(changed)
    veto: Reason | None = None
    half = calibration_noise(drift) if calibrate else None
    covered = profile.drift_covered if calibrate else None
    if covered is not None and drift is not None and abs(math.log(drift.ratio)) > covered:
        # how much of a drift the profile never saw reaches the benchmark is unknown: a
        # verdict stands only where none, all and twice of it agree
        agreed = {compared(power=p).verdict for p in (0, 1, 2)} == {verdict}
        veto = None if agreed else DriftUncovered(drift.ratio, covered, profile.source)
    if veto is None and half is not None and half > settings.throughput_threshold:
        # its own noise as large as the threshold: it cannot tell the code's change from the
        # machine's, so against a stored baseline nothing can be shown, not even no change
        veto = NoisyCalibration(half, settings.throughput_threshold)
    if veto is not None:
        verdict = Verdict.INCONCLUSIVE
        if isinstance(veto, DriftUncovered):  # it words the drift itself
            reasons = [r for r in reasons if not isinstance(r, MachineDrift)]
        reasons.append(veto)
    quiet = [i for i, flag in enumerate(flags) if not flag]
    # disturbed samples were slowed by the machine: only the quiet ones can show the code's
    # speed, a regression or its absence
    checked = verdict in (Verdict.REGRESSED, Verdict.OK) and any(flags)
    stands = not checked or (bool(quiet) and compared(quiet).verdict is verdict)
    verdict, busy = _disturbance(verdict, sum(flags), len(flags), stands)
    reasons += [busy] if busy else []
    problems = measurement.health_problems
    if problems:
        reasons.append(UntrustworthyGpu(problems))
        if verdict is Verdict.REGRESSED:
            verdict = Verdict.INCONCLUSIVE
    settles = True
    if verdict is Verdict.INCONCLUSIVE and veto is None:
        alone = compared(moved=noise.NO_RUN_NOISE)  # the samples' own bounds
        if alone.verdict is Verdict.OK and comparison.verdict is not Verdict.OK:
            reasons.append(
                Unvouched(
                    high=comparison.high if comparison.high is not None else 1.0,
                    threshold=settings.throughput_threshold,
                    samples=alone.high if alone.high is not None else 1.0,
                    drift=None,  # each sample's own calibration: in the samples' part
                    between=between,
                    profile=profile.describe(calibrated=calibrate, term=between),
                    recorded=profile.source != "default",
                    cpu=not device.startswith("cuda"),
                )
            )
        settles = cap is None or _within_reach(alone, runs, sizes, cap, look)
    return Throughput(comparison, verdict, tuple(reasons), quiet=bool(quiet), settles=settles)


def _within_reach(
    alone: Comparison, runs: noise.RunNoise, sizes: tuple[int, int], cap: int, look: Look
) -> bool:
    """Whether ``cap`` samples could still settle an inconclusive throughput verdict, at its
    estimate or anywhere within its samples' own bounds (``alone``): the samples' part of a
    bound narrows as they grow, what moves the ``runs`` does not."""
    n, m = sizes
    if cap <= m:
        return False
    shift = _shift(alone.change)
    own_low = shift - (_shift(alone.low) if alone.low is not None else -math.inf)
    own_high = (_shift(alone.high) if alone.high is not None else math.inf) - shift
    narrow = math.sqrt((1 / cap + 1 / n) / (1 / m + 1 / n))
    allowed, gained = _shift(alone.threshold), math.log(1 + alone.threshold)
    beta = runs.fixed() + math.hypot(own_high * narrow, runs.at(look.beta))
    alpha = runs.fixed() + math.hypot(own_low * narrow, runs.at(look.alpha))
    ok = shift - own_low + beta <= allowed
    regressed = shift + own_high > max(allowed, alpha)
    improved = shift - own_low + alpha < -gained
    return ok or regressed or improved


def _shift(loss: float) -> float:
    """The log shift of step times that loses ``loss`` of the throughput (1: infinite)."""
    return -math.log(1 - loss) if loss < 1 else math.inf


def throughput_at(
    current: Result,
    reference: Result,
    settings: GateSettings,
    look: Look,
    profile: NoiseProfile | None = None,
    cap: int | None = None,
) -> Throughput:
    """The throughput verdict on ``current`` against ``reference`` at ``look``."""
    measurement, environment = measured(current)
    before, then = measured(reference)
    changed = bool(environment.changes_from(then))
    return judge_throughput(measurement, before, then.device, settings, look, changed, profile, cap)


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
    """Throughput at ``look`` against the same benchmark at another revision, its samples taken
    in turn with these in this run: as measured (the machine's drift reached both alike), on
    the pairs disturbed alike only (an unequal pair shows the neighbour, not the code)."""
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


def measured(result: Result) -> tuple[Measurement, Environment]:
    """A result's measurement and environment, which a result that failed lacks."""
    if result.measurement is None or result.environment is None:
        raise ValueError(f"{result.name} has no measurement to compare: {result.error}")
    return result.measurement, result.environment
