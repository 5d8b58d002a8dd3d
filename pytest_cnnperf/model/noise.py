"""How much a kind of machine's step times move between runs of unchanged code: its noise
profile, per benchmark, which a stored baseline's verdicts allow for (``gate.noise`` fits and
applies it)."""

from __future__ import annotations

from dataclasses import dataclass

from . import units
from .because import plural
from .values import Count, NonNegative

#: ``source`` of a benchmark's own profile, fitted from its recorded runs
RECORDED = "recorded"
#: of the device's default, where the kind of machine has no profile at all
DEFAULT = "default"
#: of the kind's widest spreads, assumed for a benchmark the profile never saw
WIDEST = "widest"


@dataclass(frozen=True)
class NoiseProfile:
    """Spreads of a benchmark's runs (or, as the file's ``profile``, the widest of its
    benchmarks'), as standard deviations of log step times (0.05: about 5%).

    A stored baseline and a later run differ by the two runs' sampling noise, which their
    samples show, and by what moves a whole run: the machine's drift over minutes, hours and
    instances. That second part is what a profile records, as measured and after dividing by
    the calibration workload's times, recorded by ``cnnperf noise`` (``source`` ``recorded``),
    assumed for a benchmark it never saw (``widest``) or for a machine without one
    (``default``). The spreads are estimates; the gate allows for their uncertainty from
    ``freedom`` (``gate.noise.term``)."""

    #: a run's samples around its own median (the median over the runs recorded)
    within: NonNegative
    #: one run's level around the benchmark's, as measured (the samples' own noise taken out)
    between: NonNegative
    #: the same after dividing by the calibration workload's level; ``None``: none recorded
    between_calibrated: NonNegative | None = None
    #: the calibration's samples around their run's median
    calibration_within: NonNegative | None = None
    #: the largest drift between two recorded runs the calibration measured (log): a larger
    #: one is outside what the profile has seen
    drift_covered: NonNegative | None = None
    #: the runs and benchmarks it was fitted from
    runs: Count = 0
    benchmarks: Count = 0
    #: ``recorded``, ``widest`` or ``default``
    source: str = RECORDED
    #: when it was recorded (ISO 8601, UTC), and with which command
    recorded: str | None = None
    command: str | None = None
    #: the machine instances its runs came from (0: not recorded)
    instances: Count = 0
    #: the effective degrees of freedom of the between-run spreads (``None``: not known, a
    #: profile written by hand)
    freedom: NonNegative | None = None
    #: its runs came from one instance: the instances' part of its spreads is the one the
    #: kind's benchmarks recorded on several showed
    instances_borrowed: bool = False
    #: the speeds its runs came in: 2 where they split into two groups far apart
    modes: Count = 1
    #: with two modes, how far apart their centres are (log), and how many runs were faster
    mode_gap: NonNegative | None = None
    fast_runs: Count = 0
    #: a run's samples' step times over their own calibration's, around their median (the
    #: median over the runs; ``None``: not recorded, taken as the two spreads added)
    residual_within: NonNegative | None = None
    #: as the kind's widest: each benchmark's terms (as measured, and after calibration where
    #: recorded) and its samples' spreads (as measured, over their calibrations), by which a
    #: benchmark it never saw is scaled
    seen: tuple[tuple[float, float | None, float, float | None], ...] = ()

    def describe(self, calibrated: bool = False, term: float | None = None) -> str:
        """``runs differ by 1.5% after calibration, recorded on 2026-12-04 over 30 runs on 2
        instances``: the spread a verdict allowed for, ``calibrated`` or as measured, with the
        ``term`` it allowed for it where its uncertainty widened it."""
        spread = self.between
        after = ""
        if calibrated and self.between_calibrated is not None:
            spread, after = self.between_calibrated, " after calibration"
        said = f"runs differ by {units.percent(spread)}{after}"
        if term is not None and units.percent(term) != units.percent(spread):
            said += f" (allowed for as {units.percent(term)}, for the runs it rests on)"
        if self.source == DEFAULT:
            return f"{said}, assumed: none recorded"
        when = f" on {self.recorded[:10]}" if self.recorded else ""
        where = f" on {plural(self.instances, 'instance')}" if self.instances else ""
        if self.instances_borrowed:
            where += " and the instances' part of the kind's other benchmarks"
        recorded = f"recorded{when} over {self.runs} runs{where}"
        if self.source == WIDEST:
            return f"{said}, the widest of {self.benchmarks} benchmarks {recorded}"
        return f"{said}, {recorded}"


@dataclass(frozen=True)
class NoiseRun:
    """One recorded run of one benchmark as its profile keeps it: what a fit needs, and the
    instance it ran on, so that runs of other instances can be added later."""

    #: the machine instance it ran on (``cnnperf noise --instance``; by default the host's name
    #: and boot id: a fresh instance boots afresh)
    instance: str
    #: its samples
    samples: Count
    #: the median of its samples' log step times (log seconds)
    level: float
    #: its samples' spread around it (a standard deviation of log step times, robustly)
    spread: NonNegative
    #: the same of the calibration workload's times (``None``: not calibrated)
    calibration_level: float | None = None
    calibration_spread: NonNegative | None = None
    #: the spread of its samples' log step times less their log calibration times: what the
    #: samples' own noise leaves in a level divided by the calibration's
    residual_spread: NonNegative | None = None
    #: when it started (ISO 8601, UTC)
    started: str | None = None


@dataclass(frozen=True)
class BenchmarkNoise:
    """One benchmark's profile and the runs it was fitted from."""

    #: ``None``: too few runs yet for one (3); the kind's widest stands for it until then
    profile: NoiseProfile | None
    runs: tuple[NoiseRun, ...] = ()


@dataclass(frozen=True)
class NoiseProfileFile:
    """A noise profile file: the kind of machine it belongs to, the widest of its benchmarks'
    spreads (what a benchmark it never saw is given), and each benchmark's own, by name
    (``test_zoo::test_train[resnet18] [train_step resnet18 bs=8 64x64 opt=sgd]``)."""

    machine: str
    profile: NoiseProfile
    benchmarks: tuple[tuple[str, BenchmarkNoise], ...] = ()

    def benchmark(self, name: str) -> BenchmarkNoise | None:
        return dict(self.benchmarks).get(name)
