"""The reasons about the conditions of a comparison: the reference there is or is not, the
machine's drift and noise, its neighbours, the hardware, how the samples were taken."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from . import units
from .because import AGAINST, QUIETER, Because, plural, speed
from .values import Count, NonNegative, Positive


@dataclass(frozen=True)
class NoBaseline(Because):
    """No baseline entry applies to the benchmark on this kind of machine."""

    kind = "no-baseline"
    #: the kind of machine whose baselines were looked for
    machine: str = ""
    #: other kinds of machine that have a baseline of the benchmark
    elsewhere: tuple[str, ...] = ()
    #: for each of ``elsewhere``, what picks other kernels there (``CPU capability AVX2 ->
    #: AVX512``), ``""`` where nothing known does
    differences: tuple[str, ...] = ()

    def _elsewhere(self) -> list[tuple[str, str]]:
        """Each kind of ``elsewhere`` with its difference (none in files that kept none)."""
        differences = self.differences or ("",) * len(self.elsewhere)
        return list(zip(self.elsewhere, differences, strict=False))

    @property
    def shareable(self) -> tuple[str, ...]:
        """The kinds of ``elsewhere`` whose hardware is not known to pick other kernels: only
        their baselines may be shared with this machine's (``--cnnperf-machine``)."""
        return tuple(m for m, d in self._elsewhere() if not d)

    def __str__(self) -> str:
        text = f"no baseline for {self.machine or 'this kind of machine'}"
        if not self.elsewhere:
            return text
        kinds = [
            f"{m} ({d}: other kernels, whose figures are not compared with these)" if d else m
            for m, d in self._elsewhere()
        ]
        return text + f"; baselines of it exist for {', '.join(kinds)}"


@dataclass(frozen=True)
class NotAtRevision(Because):
    """The benchmark does not exist as such at the revision it is gated against: its test is
    not there, or makes other benchmark calls there."""

    kind = "not-at-revision"
    #: the revision, as the reports name it
    revision: str
    why: str

    def __str__(self) -> str:
        return f"new since {self.revision}: {self.why}"


@dataclass(frozen=True)
class MachineDrift(Because):
    """The calibration workload ran at another speed than when the baseline was recorded."""

    kind = "machine-drift"
    #: calibration time now / in the baseline (above 1: the machine runs slower)
    ratio: Positive
    #: the ratio's 90% confidence bounds (``None``: too few samples to bound it)
    low: Positive | None = None
    high: Positive | None = None
    #: whether throughput was compared after dividing by it: where the kind of machine's noise
    #: profile says the calibration follows the benchmarks closely enough to help
    allowed: bool = True

    def __str__(self) -> str:
        machine = f"the machine ran {speed(self.ratio)} than when the baseline was recorded"
        if self.low is not None and self.high is not None and speed(self.low) != speed(self.high):
            machine += f" ({speed(self.low)} to {speed(self.high)})"
        machine += " (calibration workload)"
        if not self.allowed:
            return (
                f"{machine}; not allowed for: on this kind of machine the calibration does not "
                "follow the benchmarks closely enough to make a verdict surer (its noise "
                "profile), so throughput was compared as measured"
            )
        return f"{machine}; throughput compared after allowing for it, and for its error"


@dataclass(frozen=True)
class DriftUncovered(Because):
    """The machine drifted further since the baseline than between any two runs of its noise
    profile: how much of that reached the benchmark is unknown, so no verdict is given."""

    kind = "drift-uncovered"
    #: calibration time now / in the baseline
    ratio: Positive
    #: the largest drift (log) between two runs the profile recorded
    covered: NonNegative
    #: the profile's ``source``: ``recorded`` or ``default``
    source: str = "recorded"

    def __str__(self) -> str:
        seen = "its recorded noise profile saw" if self.source == "recorded" else "is assumed"
        return (
            f"the machine ran {speed(self.ratio)} than when the baseline was recorded "
            f"(calibration workload), more than the drift this kind of machine {seen} between "
            f"two runs (up to {math.exp(self.covered) - 1:.0%}): how much of it "
            "reached this benchmark is unknown, so no verdict; re-run it when the machine is as "
            "fast as then, or gate against the base revision in the same job "
            "(--cnnperf-against=REV)"
        )


@dataclass(frozen=True)
class Unvouched(Because):
    """The samples alone would call it ok, but what moves a whole run leaves a stored baseline
    unable to vouch for a loss under the threshold: inconclusive, with each term named."""

    kind = "unvouched"
    #: the loss's upper bound with every term
    high: float
    #: the threshold ok needs the bound under
    threshold: Positive
    #: the upper bound the samples alone give
    samples: float
    #: the standard deviation (log) of the calibration's estimate of the machine's drift
    #: (``None``: not allowed for)
    drift: NonNegative | None
    #: the standard deviation (log) of a run's level on this kind of machine
    between: NonNegative
    #: the noise profile, as it describes itself
    profile: str
    #: whether the profile was recorded (else a default was assumed)
    recorded: bool
    #: a CPU run, where instructions can be counted instead
    cpu: bool = False

    def __str__(self) -> str:
        terms = [f"the samples (the loss at most {units.percent(max(self.samples, 0.0))} by them)"]
        if self.drift is not None:
            terms.append(
                f"the calibration's estimate of the machine's drift (+-{units.percent(self.drift)})"
            )
        terms.append(f"how much runs differ on this kind of machine ({self.profile})")
        record = (
            ""
            if self.recorded
            else "; `cnnperf noise -- PYTEST_ARGS` records this machine's own noise profile"
        )
        counted = (
            ", or count instructions, which no noise moves (--cnnperf-metric=instructions)"
            if self.cpu
            else ""
        )
        return (
            "a stored baseline cannot vouch for it: the loss is at most "
            f"{units.percent(max(self.high, 0.0))} (ok needs it under "
            f"{units.percent(self.threshold)}) allowing for {', '.join(terms[:-1])} and "
            f"{terms[-1]}; {AGAINST}, which has no between-run noise{counted}{record}"
        )


@dataclass(frozen=True)
class Unprofiled(Because):
    """The kind of machine's noise profile never recorded this benchmark: its verdict allows
    for the widest spread of the benchmarks it did record."""

    kind = "unprofiled"
    #: the spread allowed for (log), its uncertainty included
    between: NonNegative
    #: whether it is the spread after dividing by the calibration's
    calibrated: bool
    #: the benchmarks the profile recorded
    benchmarks: Count

    def __str__(self) -> str:
        after = " after calibration" if self.calibrated else " as measured"
        return (
            "no noise profile for this benchmark: the kind's widest spread assumed (runs "
            f"differ by {units.percent(self.between)}{after}, the widest of "
            f"{plural(self.benchmarks, 'benchmark')} recorded); `cnnperf noise -- PYTEST_ARGS` "
            "with arguments that select this test records its own"
        )


@dataclass(frozen=True)
class TwoSpeeds(Because):
    """The benchmark's recorded runs came at two speeds far apart: its verdict allows for the
    spread across them, as a run in either may meet a baseline in the other."""

    kind = "two-speeds"
    #: how far apart the two speeds' centres are (log)
    gap: NonNegative
    #: its recorded runs in the faster speed
    fast: Count
    #: all its recorded runs
    runs: Count
    #: the spread allowed for (log), its uncertainty included
    between: NonNegative

    def __str__(self) -> str:
        return (
            f"this benchmark runs at two speeds {units.percent(math.exp(self.gap) - 1)} apart "
            f"on this kind of machine ({self.fast} of {self.runs} runs of its noise profile "
            f"the faster), so its verdicts allow for a run in either: runs differ by "
            f"{units.percent(self.between)}; find what sets its speed, or {AGAINST}, whose "
            "samples meet the same speeds"
        )


@dataclass(frozen=True)
class NoisyCalibration(Because):
    """The calibration's own noise was as large as the threshold: it could not tell the
    benchmark's change from the machine's, so no change could be shown."""

    kind = "noisy-calibration"
    #: half the width of the calibration ratio's bounds, as a fraction
    spread: NonNegative
    threshold: Positive

    def __str__(self) -> str:
        return (
            f"the calibration workload's own noise (+-{units.percent(self.spread)}) is larger "
            f"than the threshold ({units.percent(self.threshold)}), so the machine's speed "
            f"cannot be allowed for and no change can be shown against a stored baseline; {QUIETER}"
        )


@dataclass(frozen=True)
class CalibrationChanged(Because):
    """The calibration workload is another than the baseline's (a new version of the plugin
    sized it anew), so its times say nothing about the machine's speed: compared as measured."""

    kind = "calibration-changed"
    baseline_unit: str
    current_unit: str

    def __str__(self) -> str:
        return (
            f"the calibration workload changed since the baseline was recorded "
            f"({self.baseline_unit} -> {self.current_unit}), so the machine's speed is not "
            "allowed for: throughput compared as measured; record the baseline again "
            "(--cnnperf-save) to compare allowing for it"
        )


@dataclass(frozen=True)
class SoftwareChanged(Because):
    """The software changed since the baseline, so times were compared as measured too."""

    kind = "software-changed"

    def __str__(self) -> str:
        return "software changed, so times are also compared as measured, without calibration"


class Disturbance(str, enum.Enum):
    """What disturbed samples did to a verdict."""

    #: a third of the samples or more were disturbed; the verdict stands
    NOTED = "noted"
    #: a regression shows in the undisturbed samples alone
    QUIET_REGRESSED = "quiet-regressed"
    #: the undisturbed samples alone show no regression: no throughput verdict
    NO_VERDICT = "no-verdict"
    #: the undisturbed samples alone cannot vouch for ok: no throughput verdict
    NOT_OK = "not-ok"
    #: a third of the samples or more of a recorded baseline were disturbed
    RECORDED = "recorded"
    #: pairs of samples disturbed unequally were left out; the others decided
    LEFT_OUT = "left-out"


@dataclass(frozen=True)
class Disturbed(Because):
    """Samples taken while something else ran on the machine (see ``gate.throughput.disturbed``)."""

    kind = "disturbed"
    count: Count
    total: Count
    effect: Disturbance

    def __str__(self) -> str:
        samples = (
            f"{self.count} of {self.total} samples had erratic step times, a slow calibration "
            "or threads kept waiting for the CPU"
        )
        quiet = self.total - self.count
        if self.effect is Disturbance.QUIET_REGRESSED:
            return f"{samples}; the other {quiet} alone show the regression"
        if self.effect in (Disturbance.NO_VERDICT, Disturbance.NOT_OK):
            shown = "a regression" if self.effect is Disturbance.NO_VERDICT else "that it is ok"
            others = {
                0: f"so none can show {shown}",
                1: f"and the other one alone does not show {shown}",
            }.get(quiet, f"and the other {quiet} alone do not show {shown}")
            return f"the machine was busy: {samples}, {others}: no throughput verdict; {QUIETER}"
        if self.effect is Disturbance.RECORDED:
            return f"the machine was busy: {samples}; record it again on a quiet machine"
        return f"the machine was busy: {samples}"


@dataclass(frozen=True)
class UnequalPairs(Because):
    """Pairs of samples (one of each side, taken one after the other) that something else
    disturbed unequally (see ``gate.throughput.unequal_pairs``): a neighbour that slowed one side of
    a pair more than the other."""

    kind = "unequal-pairs"
    count: Count
    total: Count
    effect: Disturbance

    def __str__(self) -> str:
        pairs = (
            f"{self.count} of {self.total} pairs of samples were disturbed unequally (one "
            "side's threads kept waiting for the CPU, or its GPU reporting a problem, more than "
            "the other's)"
        )
        if self.effect is Disturbance.NO_VERDICT:
            return (
                f"the machine was busy: {pairs}, so none can tell a change: no throughput "
                f"verdict; {QUIETER}"
            )
        if self.effect is Disturbance.LEFT_OUT:
            alike = self.total - self.count
            return f"{pairs}; they were left out, and the other {alike} decided"
        return f"the machine was busy: {pairs}"


@dataclass(frozen=True)
class UntrustworthyGpu(Because):
    """NVML reported conditions that make GPU timings untrustworthy."""

    kind = "untrustworthy-gpu"
    problems: tuple[str, ...]

    def __str__(self) -> str:
        return "untrustworthy GPU state: " + "; ".join(self.problems)


@dataclass(frozen=True)
class SamplingChanged(Because):
    """The baseline's samples were taken otherwise (in-process or in fresh processes)."""

    kind = "sampling-changed"
    baseline_in_process: bool
    current_in_process: bool

    def __str__(self) -> str:
        where = {True: "inside one process", False: "in separate processes"}
        return (
            f"the baseline's samples were taken {where[self.baseline_in_process]}, these "
            f"{where[self.current_in_process]}"
        )


@dataclass(frozen=True)
class OtherKernels(Because):
    """The baseline was measured where other hardware picks the kernels (another CPU
    capability or generation, another GPU): its figures are not the code's to compare with, so
    no change is shown against it."""

    kind = "other-kernels"
    #: ``CPU capability AVX2 -> AVX512``, ...
    changes: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"the baseline was measured on other hardware ({'; '.join(self.changes)}), which "
            "picks other kernels: a change of speed or memory cannot be told from the "
            "hardware's, so none is shown; record a baseline for this kind of machine "
            "(--cnnperf-save, without --cnnperf-machine naming another kind)"
        )


@dataclass(frozen=True)
class ImpreciseBaseline(Because):
    """A save reached its most samples before its median step time was as precise as the gate
    wants it."""

    kind = "imprecise-baseline"
    samples: Count
    #: half the width of the median's confidence interval, as a fraction of the median
    spread: NonNegative
    wanted: Positive

    def __str__(self) -> str:
        return (
            f"the baseline's median step time is known within +-{units.percent(self.spread)} "
            f"after {plural(self.samples, 'sample')}, where +-{units.percent(self.wanted)} was "
            "wanted: the machine was noisy; record it again when it is quieter"
        )


@dataclass(frozen=True)
class NotSaved(Because):
    """The benchmark's baseline was measured but not written (the run was interrupted, or its
    file could not be saved)."""

    kind = "not-saved"
    why: str

    def __str__(self) -> str:
        return f"not saved: {self.why}"


@dataclass(frozen=True)
class Remark(Because):
    """A reason as results files of version 1 kept it: its sentence. ``role`` says what the
    sentence stood for where that matters: ``creep``, or the failure of a compiled benchmark
    (``graph breaks``, ``recompiles``, ``compile time``)."""

    kind = "remark"
    text: str
    role: str | None = None

    def __str__(self) -> str:
        return self.text

    @property
    def fails_as(self) -> str | None:
        return self.role if self.role != "creep" else None
