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

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from statistics import NormalDist

import numpy as np

from ..model.noise import DEFAULT, WIDEST, NoiseProfile, NoiseRun

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


def benchmark_name(module: str, test: str, key: str) -> str:
    """How a noise profile names a benchmark: its module's name, test and configuration
    (``test_zoo::test_train[resnet18] [train_step resnet18 bs=8 64x64 opt=sgd]``), the same
    however the run was started (a path, ``--pyargs``, another rootdir)."""
    return f"{PurePosixPath(module).stem}::{test} [{key}]"


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


def summarise(run: Run, instance: str, started: str | None = None) -> NoiseRun:
    """What a profile keeps of a run: its level and spreads, with and without the calibration
    (where every sample timed one), and the instance it ran on."""
    steps = np.log(np.asarray(run.steps, dtype=float))
    found = NoiseRun(
        instance, len(steps), float(np.median(steps)), spread(run.steps), started=started
    )
    calibrations = [c for c in run.calibrations if c]
    if len(calibrations) != len(run.steps) or len(calibrations) < 2:
        return found
    logs = np.log(np.asarray(calibrations, dtype=float))
    return dataclasses.replace(
        found,
        calibration_level=float(np.median(logs)),
        calibration_spread=spread(calibrations),
        # the two move together within a run too (the machine's spells reach both): the noise
        # of the difference is less than the two noises added, and is what a level less the
        # calibration's carries
        residual_spread=spread(np.exp(steps - logs).tolist()),
    )


#: two modes: the best split of the levels sorted, both sides at least this share of the runs
MODE_SHARE = 0.2
#: and their centres apart by at least this (log): a smaller gap barely widens the term
MODE_GAP = 0.05


def separation(runs: int) -> float:
    """How many pooled standard deviations apart the two sides of the best split of ``runs``
    levels must be to count as two modes: the 99th percentile of that score for levels of one
    normal mode, by simulation (8.9 for 6 runs, 4.4 for 20, 3.4 for 60)."""
    return 2.8 + 35 / runs


@dataclass(frozen=True)
class Modes:
    """Two groups of runs far apart: how far (log, between their centres), how many were in
    the faster one, and the spread of runs within their own group."""

    gap: float
    fast: int
    within: float


def modes(levels: Sequence[float]) -> Modes | None:
    """Whether ``levels`` come in two modes (:func:`separation`, :data:`MODE_GAP`), and which;
    ``None``: one mode as far as 6 runs or more can tell (fewer cannot)."""
    values = np.sort(np.asarray(levels, dtype=float))
    n = len(values)
    least = max(2, math.ceil(MODE_SHARE * n))
    if n < 6 or n < 2 * least:
        return None
    best: Modes | None = None
    score = 0.0
    for k in range(least, n - least + 1):
        low, high = values[:k], values[k:]
        squares = float(((low - low.mean()) ** 2).sum() + ((high - high.mean()) ** 2).sum())
        pooled = math.sqrt(squares / (n - 2))
        gap = float(high.mean() - low.mean())
        this = gap / pooled if pooled > 0 else math.inf
        if this > score:
            score, best = this, Modes(gap, fast=k, within=pooled)
    if best is None or score < separation(n) or best.gap < MODE_GAP:
        return None
    return best


@dataclass(frozen=True)
class Spread:
    """A between-run spread (log standard deviation) with its effective degrees of freedom, and
    the modes where the runs came in two."""

    value: float
    freedom: float
    modes: Modes | None = None
    #: of its variance, the instances' part, with its degrees of freedom (0: one instance)
    among: float = 0.0
    among_freedom: float = 0.0


def between_runs(levels: Sequence[float], own: Sequence[float], instances: Sequence[str]) -> Spread:
    """How much a run's level moves on this kind of machine, its samples' own noise (``own``:
    each level's variance from its samples) taken out: over the runs of one instance, their
    variance; over several, the runs' within their instance plus the instances' (a random
    effects analysis of variance), its degrees of freedom by Satterthwaite's approximation.
    Levels in two modes: the spread within their modes and half the gap between them, in
    quadrature, so that runs in either mode stay within the bounds of a baseline in the other."""
    values = np.asarray(levels, dtype=float)
    noise = float(np.mean(own))
    n = len(values)
    found = modes(levels)
    if found is not None:
        within = max(found.within**2 - noise, 0.0)
        return Spread(math.sqrt(within + (found.gap / 2) ** 2), n - 2.0, found)
    groups = [
        values[[i for i, x in enumerate(instances) if x == name]]
        for name in dict.fromkeys(instances)
    ]
    k = len(groups)
    if k == 1 or n - k < 1:
        variance = float(np.var(values, ddof=1)) - noise
        return Spread(math.sqrt(max(variance, 0.0)), n - 1.0)
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / (n - k)
    sizes = np.array([len(g) for g in groups], dtype=float)
    means = np.array([g.mean() for g in groups])
    among = float((sizes * (means - values.mean()) ** 2).sum()) / (k - 1)
    typical = (n - float((sizes**2).sum()) / n) / (k - 1)
    instance_part = max((among - within) / typical, 0.0)
    variance = max(within - noise, 0.0) + instance_part
    if instance_part <= 0:
        return Spread(math.sqrt(variance), n - k, among_freedom=k - 1.0)
    # the variance as (1/typical) among + (1 - 1/typical) within - noise: its parts' freedoms
    a, b = among / typical, (1 - 1 / typical) * within
    freedom = (a + b) ** 2 / (a**2 / (k - 1) + b**2 / (n - k))
    return Spread(math.sqrt(variance), freedom, among=instance_part, among_freedom=k - 1.0)


def combined(parts: Sequence[tuple[float, float]]) -> float:
    """The degrees of freedom of a sum of variances, each with its own (Satterthwaite)."""
    total = sum(v for v, _ in parts)
    spread = sum(v**2 / f for v, f in parts if v > 0 and f > 0)
    return total**2 / spread if spread > 0 else max((f for _, f in parts), default=1.0)


def usable_runs(runs: Sequence[NoiseRun]) -> list[NoiseRun]:
    """The runs a profile can be fitted from: 3 or more, each of 2 samples or more."""
    usable = [r for r in runs if r.samples >= 2]
    if len(usable) < 3:
        raise ValueError(
            f"a noise profile needs at least 3 runs of each benchmark, with 2 samples or more "
            f"each; one benchmark has {len(usable)}"
        )
    return usable


def spreads(runs: Sequence[NoiseRun]) -> tuple[Spread, Spread | None]:
    """A benchmark's between-run spreads as measured and, where every run timed the
    calibration, after dividing by it (:func:`between_runs`)."""
    usable = usable_runs(runs)
    instances = [r.instance for r in usable]
    own = [MEDIAN_VARIANCE * r.spread**2 / r.samples for r in usable]
    measured = between_runs([r.level for r in usable], own, instances)
    if any(r.calibration_level is None or r.residual_spread is None for r in usable):
        return measured, None
    residuals = [r.level - (r.calibration_level or 0.0) for r in usable]
    own_residual = [MEDIAN_VARIANCE * (r.residual_spread or 0.0) ** 2 / r.samples for r in usable]
    return measured, between_runs(residuals, own_residual, instances)


def fit_runs(runs: Sequence[NoiseRun], *, recorded: str, command: str) -> NoiseProfile:
    """One benchmark's profile from its recorded runs (of any instances): its levels' spread as
    measured and after dividing by the calibration's (:func:`between_runs`), the samples' own
    noise taken out; the larger of the two modes' verdicts where the runs came in two."""
    usable = usable_runs(runs)
    instances = [r.instance for r in usable]
    measured, calibrated = spreads(usable)
    covered = None
    if calibrated is not None:
        cal_levels = [r.calibration_level or 0.0 for r in usable]
        covered = max(cal_levels) - min(cal_levels)
    # the modes the verdicts allow for: those of the spread they use (after calibration where
    # it is recorded: the gate uses it where it lowers the variance)
    two = (calibrated.modes if calibrated is not None else None) or measured.modes
    freedom = min(measured.freedom, calibrated.freedom) if calibrated else measured.freedom
    return NoiseProfile(
        within=float(np.median([r.spread for r in usable])),
        between=max(measured.value, FLOOR),
        between_calibrated=max(calibrated.value, FLOOR) if calibrated else None,
        calibration_within=(
            float(np.median([r.calibration_spread or 0.0 for r in usable])) if calibrated else None
        ),
        drift_covered=covered,
        runs=len(usable),
        benchmarks=1,
        recorded=recorded,
        command=command,
        instances=len(set(instances)),
        freedom=freedom,
        modes=2 if two else 1,
        mode_gap=two.gap if two else None,
        fast_runs=two.fast if two else 0,
        residual_within=(
            float(np.median([r.residual_spread or 0.0 for r in usable])) if calibrated else None
        ),
    )


def widest(profiles: Sequence[NoiseProfile], *, recorded: str, command: str) -> NoiseProfile:
    """The kind of machine's profile for a benchmark it never saw: the widest of its
    benchmarks' spreads (their terms, uncertainty included), the least drift any covered."""
    if not profiles:
        raise ValueError("a noise profile needs at least one benchmark")
    calibrated = [p for p in profiles if p.between_calibrated is not None]
    every = len(calibrated) == len(profiles)
    least = min(p.freedom if p.freedom is not None else 1.0 for p in profiles)
    inflate = uncertainty(least)
    return NoiseProfile(
        within=max(p.within for p in profiles),
        between=max(term(p, calibrated=False) for p in profiles) / inflate,
        between_calibrated=(
            max(term(p, calibrated=True) for p in profiles) / inflate if every else None
        ),
        calibration_within=max(p.calibration_within or 0.0 for p in profiles) if every else None,
        residual_within=(
            max(p.residual_within or 0.0 for p in profiles)
            if every and all(p.residual_within is not None for p in profiles)
            else None
        ),
        drift_covered=min(p.drift_covered or 0.0 for p in profiles) if every else None,
        runs=sum(p.runs for p in profiles),
        benchmarks=len(profiles),
        source=WIDEST,
        recorded=recorded,
        command=command,
        instances=max(p.instances for p in profiles),
        freedom=least,
        seen=tuple(
            (
                term(p, calibrated=False),
                term(p, calibrated=True) if p.between_calibrated is not None else None,
                p.within,
                p.residual_within,
            )
            for p in profiles
        ),
    )


@dataclass(frozen=True)
class Instances:
    """How much instances of a kind of machine differ, as its benchmarks recorded on several
    showed (variances, log): as measured and after calibration, with their freedom."""

    measured: float
    calibrated: float | None
    freedom: float


def instances_of(series: Sequence[Sequence[NoiseRun]]) -> Instances | None:
    """The largest instances' part of the benchmarks recorded on several instances (``None``:
    none was)."""
    found = []
    for runs in series:
        try:
            measured, calibrated = spreads(runs)
        except ValueError:
            continue
        if measured.among_freedom >= 1:
            found.append((measured, calibrated))
    if not found:
        return None
    every = all(c is not None for _, c in found)
    return Instances(
        measured=max(m.among for m, _ in found),
        calibrated=max(c.among for _, c in found if c is not None) if every else None,
        freedom=min(m.among_freedom for m, _ in found),
    )


def across_instances(profile: NoiseProfile, kind: Instances) -> NoiseProfile:
    """A profile recorded on one instance, its term widened by the instances' part its kind's
    other benchmarks showed: a baseline and a gated run often run on two instances."""
    if profile.instances != 1:
        return profile
    own = profile.freedom or 1.0
    between = math.sqrt(profile.between**2 + kind.measured)
    freedom = combined([(profile.between**2, own), (kind.measured, kind.freedom)])
    calibrated = profile.between_calibrated
    if calibrated is not None and kind.calibrated is not None:
        part = [(calibrated**2, own), (kind.calibrated, kind.freedom)]
        freedom = min(freedom, combined(part))
        calibrated = math.sqrt(calibrated**2 + kind.calibrated)
    return dataclasses.replace(
        profile,
        between=between,
        between_calibrated=calibrated,
        freedom=freedom,
        instances_borrowed=True,
    )


def for_unseen(profile: NoiseProfile, within: float, residual: float | None) -> NoiseProfile:
    """The kind's widest ``profile`` for a benchmark whose samples spread by ``within`` (and,
    over their calibrations, by ``residual``): each benchmark's term it was fitted from, widened
    where this one's samples spread more than that benchmark's did (a noisier benchmark drifts
    more: the manual's "How the gate decides"), the widest of them."""
    if profile.source != WIDEST or not profile.seen:
        return profile

    def scale(this: float | None, theirs: float | None) -> float:
        return max(1.0, this / theirs) if this and theirs else 1.0

    inflate = uncertainty(profile.freedom)
    measured = max(m * scale(within, w) for m, _, w, _ in profile.seen)
    calibrated = None
    if profile.between_calibrated is not None and all(c is not None for _, c, _, _ in profile.seen):
        calibrated = max(
            (c or 0.0) * scale(residual, r) if r is not None else (c or 0.0) * scale(within, w)
            for _, c, w, r in profile.seen
        )
        calibrated /= inflate
    return dataclasses.replace(
        profile, between=measured / inflate, between_calibrated=calibrated, within=within
    )


#: the one-sided confidence at which a spread estimated from a profile's runs is allowed for:
#: a profile of few runs may have seen the machine in a quiet week
CONFIDENCE = 0.80


def uncertainty(freedom: float | None) -> float:
    """What a spread estimated with ``freedom`` degrees of freedom is multiplied by to be an
    upper bound at :data:`CONFIDENCE` (the chi-square bound of a standard deviation, by the
    Wilson-Hilferty approximation): 1.16 for 19, 1.12 for 39; none for a default."""
    if freedom is None:
        return 1.0
    k = max(freedom, 1.0)
    z_low = NormalDist().inv_cdf(1 - CONFIDENCE)
    quantile = k * (1 - 2 / (9 * k) + z_low * math.sqrt(2 / (9 * k))) ** 3
    return math.sqrt(k / max(quantile, 1e-3))


def term(profile: NoiseProfile, calibrated: bool) -> float:
    """The between-run spread a verdict allows for: the profile's (after calibration, or as
    measured), widened for the runs it rests on (:func:`uncertainty`)."""
    spread = profile.between
    if calibrated and profile.between_calibrated is not None:
        spread = profile.between_calibrated
    if profile.source == DEFAULT:
        return spread
    return spread * uncertainty(profile.freedom)  # none known (written by hand): as given


def calibrates(profile: NoiseProfile, baseline: int, current: int) -> bool:
    """Whether dividing each sample by its calibration lowers a verdict's variance, with this
    many samples a side: the residual between runs it leaves and the samples' spread over their
    calibrations, against the spread between runs and the samples' as measured."""
    if profile.between_calibrated is None or profile.calibration_within is None:
        return False
    samples = MEDIAN_VARIANCE * (1 / baseline + 1 / current)
    residual = profile.residual_within
    if residual is None:  # not recorded: as if the two moved independently within a run
        residual = math.hypot(profile.within, profile.calibration_within)
    calibrated, measured = term(profile, calibrated=True), term(profile, calibrated=False)
    return 2 * calibrated**2 + samples * residual**2 < 2 * measured**2 + samples * profile.within**2


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
    """The log shift of step times (current over baseline, after the machine's drift where it is
    allowed for) and its bounds with every term: ``low`` and ``high_alpha`` (for an improvement)
    at the false-alarm level, ``high`` at the level of missing a slowdown."""

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
