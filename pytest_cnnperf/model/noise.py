"""How much a kind of machine's step times move between runs of unchanged code: its noise
profile, which a stored baseline's verdicts allow for (``gate.noise`` fits and applies it)."""

from __future__ import annotations

from dataclasses import dataclass

from . import units
from .values import Count, NonNegative


@dataclass(frozen=True)
class NoiseProfile:
    """A kind of machine's spreads, as standard deviations of log step times (0.05: about 5%).

    A stored baseline and a later run differ by the two runs' sampling noise, which their
    samples show, and by what moves a whole run: the machine's drift over minutes and hours.
    That second part is what a profile records, as measured and after dividing by the
    calibration workload's times, recorded by ``cnnperf noise`` (``source`` ``recorded``) or
    assumed (``default``) where none was."""

    #: a run's samples around its own median (the median over the runs recorded)
    within: NonNegative
    #: one run's level around the machine's, as measured (the samples' own noise taken out)
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
    #: ``recorded`` or ``default``
    source: str = "recorded"
    #: when it was recorded (ISO 8601, UTC), and with which command
    recorded: str | None = None
    command: str | None = None

    def describe(self, calibrated: bool = False) -> str:
        """``runs differ by 1.5% after calibration, recorded on 2026-12-04 over 30 runs``: the
        spread a verdict allowed for, ``calibrated`` or as measured."""
        spread = self.between
        after = ""
        if calibrated and self.between_calibrated is not None:
            spread, after = self.between_calibrated, " after calibration"
        if self.source == "default":
            return f"runs differ by {units.percent(spread)}{after}, assumed: none recorded"
        when = f" on {self.recorded[:10]}" if self.recorded else ""
        runs = f"recorded{when} over {self.runs} runs"
        return f"runs differ by {units.percent(spread)}{after}, {runs}"


@dataclass(frozen=True)
class NoiseProfileFile:
    """A noise profile file: the kind of machine it belongs to and its profile."""

    machine: str
    profile: NoiseProfile
