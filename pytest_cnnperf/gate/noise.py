"""The noise a stored baseline cannot average away: fitting a kind of machine's noise profile
from recorded runs, the defaults where none was recorded, and the bounds that hold it.

A gated run and its baseline are two runs. Their samples bound the shift between them (the
exact rank test of ``gate.stats``); what moves a whole run, the machine's drift over minutes and
hours, their samples cannot show. So the bounds a verdict uses add the profile's between-run
spread twice: the gated run's level, with the error of the calibration's estimate of the drift
(where the profile says dividing by it helps), in quadrature; the baseline's, which every run
gated against it shares, as an offset that nine baselines in ten stay within. The manual's "How
the gate decides" page has the method, and the validation page what it gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ..model.noise import NoiseProfile

#: assumed where a kind of machine has no recorded profile, by device kind: on the CPU the
#: noisier of the project's two shared 2-core machines, rounded up (docs/validation.md); on a
#: GPU five times what an H200's runs differed by, and no calibration, which no GPU recording
#: has shown to help. Never zero: every machine drifts.
DEFAULTS = {
    "cpu": NoiseProfile(
        within=0.10,
        between=0.12,
        between_calibrated=0.04,
        calibration_within=0.08,
        drift_covered=0.20,
        source="default",
    ),
    "cuda": NoiseProfile(within=0.01, between=0.01, source="default"),
}
#: a fitted spread is never taken as smaller than this: a recording of a few dozen runs
#: cannot show that runs never differ
FLOOR = 0.002
#: the variance of a median of n samples is this times the samples' variance over n (normal)
MEDIAN_VARIANCE = math.pi / 2
#: the 90% bounds of the calibration's ratio (``gate.throughput.machine_drift``) as standard errors
DRIFT_Z = NormalDist().inv_cdf(0.95)


def default(device: str) -> NoiseProfile:
    """The profile assumed on ``device`` (``cpu``, ``cuda:0``) when none was recorded."""
    return DEFAULTS["cuda" if device.startswith("cuda") else "cpu"]


def z(level: float) -> float:
    """The standard normal quantile a one-sided bound at ``level`` uses."""
    return NormalDist().inv_cdf(1 - level)


@dataclass(frozen=True)
class Run:
    """One recorded run of a benchmark: its samples' step and calibration times."""

    steps: Sequence[float]
    calibrations: Sequence[float | None] = ()


def spread(values: Sequence[float]) -> float:
    """The standard deviation of log ``values``, robustly (from the median absolute deviation):
    one wild sample must not make a run look noisy throughout."""
    logs = np.log(values)
    return float(1.4826 * np.median(np.abs(logs - np.median(logs))))


def fit(benchmarks: Sequence[Sequence[Run]], *, recorded: str, command: str) -> NoiseProfile:
    """A profile from recorded runs of unchanged code, by benchmark: each run's level is the
    median of its log step times, whose variance over runs, less what its samples' own noise
    contributes, is the between-run variance; likewise for the level over the calibration's.
    The largest spread of the benchmarks is kept: the profile stands for all of them."""
    within: list[float] = []
    between: list[float] = []
    calibrated: list[float] = []
    calibration_within: list[float] = []
    covered: list[float] = []
    runs = 0
    for series in benchmarks:
        usable = [r for r in series if len(r.steps) >= 2]
        if len(usable) < 3:
            raise ValueError(
                f"a noise profile needs at least 3 runs of each benchmark, with 2 samples or more "
                f"each; one benchmark has {len(usable)}"
            )
        runs += len(usable)
        levels = np.array([np.median(np.log(r.steps)) for r in usable])
        spreads = np.array([spread(r.steps) for r in usable])
        sizes = np.array([len(r.steps) for r in usable])
        own = float(np.mean(MEDIAN_VARIANCE * spreads**2 / sizes))
        within.append(float(np.median(spreads)))
        between.append(math.sqrt(max(float(np.var(levels, ddof=1)) - own, 0.0)))
        timed = [r for r in usable if all(c for c in r.calibrations) and len(r.calibrations) >= 2]
        if len(timed) == len(usable):
            cal = [[c for c in r.calibrations if c] for r in timed]
            cal_levels = np.array([np.median(np.log(c)) for c in cal])
            cal_spreads = np.array([spread(c) for c in cal])
            cal_own = float(np.mean(MEDIAN_VARIANCE * cal_spreads**2 / sizes))
            residual = float(np.var(levels - cal_levels, ddof=1)) - own - cal_own
            calibrated.append(math.sqrt(max(residual, 0.0)))
            calibration_within.append(float(np.median(cal_spreads)))
            covered.append(float(cal_levels.max() - cal_levels.min()))
    full = len(calibrated) == len(benchmarks)
    return NoiseProfile(
        within=max(within),
        between=max(max(between), FLOOR),
        between_calibrated=max(max(calibrated), FLOOR) if full else None,
        calibration_within=max(calibration_within) if full else None,
        drift_covered=min(covered) if full else None,
        runs=runs,
        benchmarks=len(benchmarks),
        recorded=recorded,
        command=command,
    )


def calibrates(profile: NoiseProfile, baseline: int, current: int) -> bool:
    """Whether dividing by the calibration's drift lowers a verdict's variance, with this many
    samples a side: the residual between runs it leaves and its own estimate's error, against
    the spread between runs as measured."""
    if profile.between_calibrated is None or profile.calibration_within is None:
        return False
    estimate = MEDIAN_VARIANCE * profile.calibration_within**2 * (1 / baseline + 1 / current)
    return 2 * profile.between_calibrated**2 + estimate < 2 * profile.between**2


#: the share of baselines a verdict's bounds hold for: a stored baseline's level is one draw
#: that every later run gated against it shares, so the bounds allow for it as a fixed offset at
#: this quantile, and for the gated run's own level as the random term it is
BASELINE_COVERAGE = 0.90


@dataclass(frozen=True)
class RunNoise:
    """What moves a whole run beside its samples, as standard deviations (log): the baseline
    run's level, and the gated run's (with the error of the calibration's estimate of the
    machine's drift, where that is divided out)."""

    baseline: float = 0.0
    current: float = 0.0

    @property
    def total(self) -> float:
        return math.hypot(self.baseline, self.current)

    def fixed(self) -> float:
        """The baseline's offset the bounds allow for, whatever their level."""
        return z(1 - BASELINE_COVERAGE) * self.baseline

    def at(self, level: float) -> float:
        """The gated run's part of a bound at ``level``."""
        return z(level) * self.current


#: the samples' own bounds, with nothing for what moves a whole run
NO_RUN_NOISE = RunNoise()


@dataclass(frozen=True)
class Bounds:
    """The log shift of step times (current over baseline, after the machine's drift where it
    is allowed for) and its bounds with every term: ``low`` at the false-alarm level, ``high``
    at the level of missing a slowdown, ``high_alpha`` at the false-alarm level (for an
    improvement)."""

    shift: float
    low: float
    high: float
    high_alpha: float


def widen(
    shift: float,
    sampled: tuple[float, float, float],
    runs: RunNoise,
    alpha: float,
    beta: float,
) -> Bounds:
    """The bounds of ``shift`` whose samples alone bound it at ``sampled`` (low at ``alpha``,
    high at ``beta``, high at ``alpha``: from the exact rank test), widened by what moves the
    two runs: the gated run's part added to the samples' in quadrature at the bound's level,
    the baseline's as a fixed offset. With no run noise they are the rank test's own."""
    low, high, high_alpha = sampled
    fixed = runs.fixed()
    return Bounds(
        shift=shift,
        low=shift - fixed - math.hypot(shift - low, runs.at(alpha)),
        high=shift + fixed + math.hypot(high - shift, runs.at(beta)),
        high_alpha=shift + fixed + math.hypot(high_alpha - shift, runs.at(alpha)),
    )
