"""The gate's decision on one benchmark: a verdict, the comparisons behind it, and its reasons.

A reason is data (a ``kind`` and its numbers) that words itself (``str(reason)``): files keep the
data, so the wording can change without changing a format.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import ClassVar

from ..count_kinds import KINDS
from . import units
from .profile import Attribution
from .sample import GraphBreak, Measurement
from .structure import CountChange, NumbersDiffer
from .values import Count, NonNegative, Positive, PositiveInt, Probability


class Verdict(str, enum.Enum):
    """The outcome of one benchmark against its baseline."""

    OK = "ok"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    SAVED = "saved"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


#: the statistical rules a look can apply, as the reports name them
TESTS = {"mann-whitney": "exact one-sided Mann-Whitney test"}
#: how a design splits its error rates over its looks, as the reports name it
SPENDING = {"bonferroni": "split equally over the looks"}


@dataclass(frozen=True)
class Look:
    """The look of a sequential comparison that decided it: which of how many planned, the
    shares of the two error rates it spent, and the rule it applied (``gate.sequential``)."""

    number: PositiveInt
    of: PositiveInt
    #: the share of the false-alarm rate ("regressed" on unchanged code) this look spent, and
    #: the share of the rate of calling a slowdown of the threshold's size "ok"
    alpha: Probability
    beta: Probability
    test: str = "mann-whitney"
    spending: str = "bonferroni"

    @property
    def test_name(self) -> str:
        return TESTS.get(self.test, self.test)

    def __str__(self) -> str:
        """``look 1 of 3``."""
        return f"look {self.number} of {self.of}"

    def rates(self) -> str:
        """``1% false alarms and 5% misses over 3 looks, split equally``."""
        looks = "1 look" if self.of == 1 else f"{self.of} looks"
        return (
            f"{units.percent(self.alpha * self.of)} false alarms and "
            f"{units.percent(self.beta * self.of)} missed slowdowns over {looks}"
            + (", split equally" if self.of > 1 and self.spending == "bonferroni" else "")
        )


@dataclass(frozen=True)
class Comparison:
    """One metric of a fresh measurement against its baseline.

    ``change`` is relative and signed so that positive is worse: for throughput the fractional
    loss of items per second, for memory the fractional growth. ``low`` and ``high`` bound it
    with the gate's confidence; ``p_value`` is the one-sided test for "worse", at the ``look``
    that decided it.
    """

    metric: str
    baseline: NonNegative
    current: NonNegative
    change: float
    threshold: Positive
    verdict: Verdict
    p_value: NonNegative | None = None
    low: float | None = None
    high: float | None = None
    baseline_samples: Count = 0
    current_samples: Count = 0
    #: throughput: how much slower the machine ran than for the baseline (calibration workload,
    #: current / baseline); ``change`` allows for it, ``raw_change`` does not
    machine_factor: Positive = 1.0
    raw_change: float | None = None
    #: throughput: the look of the sequential comparison that decided it
    look: Look | None = None
    #: throughput against a stored baseline: the standard deviation (log) of what moves a whole
    #: run, which ``low`` and ``high`` allow for beside the samples' own (``gate.noise``)
    between: NonNegative | None = None

    def evidence(self) -> tuple[str, ...]:
        """The statistics behind a throughput verdict, a sentence a line: the samples, the look,
        the test against the look's boundary and the bound that decided; then the error rates
        the design fixed in advance (none for memory)."""
        look = self.look
        if self.metric != "throughput" or look is None or self.p_value is None:
            return ()
        last = ", the last" if look.number == look.of and look.of > 1 else ""
        within = "at most" if self.p_value <= look.alpha else "above"
        test = (
            f"{self.current_samples} samples now against {self.baseline_samples} ({look}{last}): "
            f"{look.test_name} p = {self.p_value:.2g}, {within} this look's {look.alpha:.2g}"
        )
        allowing = (
            f", allowing for +-{units.percent(self.between)} between the two runs beside their "
            "samples,"
            if self.between
            else ""
        )
        if self.verdict is Verdict.REGRESSED and self.low is not None:
            bound = (
                f"with {_confidence(look.alpha)} confidence{allowing} the loss is at least "
                f"{units.percent(max(self.low, 0.0))}"
            )
        elif self.high is not None and self.high < 1:  # 1: no bound (a loss of everything)
            needs = (
                " (ok needs it below the threshold)" if self.verdict is Verdict.INCONCLUSIVE else ""
            )
            bound = (
                f"with {_confidence(look.beta)} confidence{allowing} the loss is at most "
                f"{units.percent(max(self.high, 0.0))}{needs}"
            )
        else:
            bound = "too few samples to bound the loss"
        return f"{test}; {bound}", f"error rates fixed in advance: {look.rates()}"


@dataclass(frozen=True)
class CompileComparison:
    """A compiled benchmark's compiler figures against its baseline's (``None``: no baseline,
    or it did not have the figure). Graph breaks and recompiles are counts, so any change
    counts; compile time fails only past its own threshold, when one is set."""

    graph_breaks: Count
    baseline_graph_breaks: Count | None
    #: frames compiled again during the timed steps, and frames run eagerly after giving up
    recompiles: Count
    eager_frames: Count = 0
    #: frames compiled again before the timed steps (reported, not failed)
    warmup_recompiles: Count = 0
    #: the compile times compared: the cold ones where both have them, else the warm ones
    cache: str | None = None
    compile_s: NonNegative | None = None
    baseline_compile_s: NonNegative | None = None
    #: compile-time growth that fails (``None``: it never does)
    threshold: Positive | None = None
    verdict: Verdict = Verdict.OK

    @property
    def compile_change(self) -> float | None:
        """Fractional growth of the compile time."""
        if self.compile_s is None or not self.baseline_compile_s:
            return None
        return self.compile_s / self.baseline_compile_s - 1


def _confidence(level: float) -> str:
    """``99.7%`` for a level of 0.0033: the confidence a bound at that level has."""
    return f"{(1 - level) * 100:.3g}%"


@dataclass(frozen=True)
class Revision:
    """A git commit, as the user named it and as git resolved it."""

    #: as given: ``main``, ``HEAD~3``, a sha
    name: str
    sha: str
    #: its subject line
    subject: str = ""
    #: the checkout's tracked files differ from the commit (the code under test only)
    dirty: bool = False

    @property
    def short(self) -> str:
        return self.sha[:10]

    def __str__(self) -> str:
        """``main (0123456789)``, ``0123456789 with local changes``."""
        named = (
            self.short
            if self.name in (self.sha, self.short, "HEAD")
            else (f"{self.name} ({self.short})")
        )
        return named + (" with local changes" if self.dirty else "")


@dataclass(frozen=True)
class Against:
    """What a same-job comparison compared (``--cnnperf-against``): the revision its reference
    was measured at, in the same run, and the code under test."""

    base: Revision
    head: Revision

    def __str__(self) -> str:
        return f"{self.head} against {self.base}, both measured in this run"


# ---- why the gate decided as it did ----


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


class Because:
    """What every reason has: its ``kind`` in files, its sentence (``str(reason)``), and, for
    the reasons that fail a compiled benchmark, what failed it (``fails``: ``graph breaks``)."""

    kind: ClassVar[str]
    #: the failure a compiled benchmark's reason stands for, named as a failure message says it
    fails: ClassVar[str | None] = None

    def __str__(self) -> str:
        raise NotImplementedError


NO_BASELINE = "no baseline"


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

    @property
    def shareable(self) -> tuple[str, ...]:
        """The kinds of ``elsewhere`` whose hardware is not known to pick other kernels: only
        their baselines may be shared with this machine's (``--cnnperf-machine``)."""
        differences = self.differences or ("",) * len(self.elsewhere)
        return tuple(m for m, d in zip(self.elsewhere, differences, strict=False) if not d)

    def __str__(self) -> str:
        text = f"{NO_BASELINE} for {self.machine or 'this kind of machine'}"
        if not self.elsewhere:
            return text
        differences = self.differences or ("",) * len(self.elsewhere)
        kinds = [
            f"{m} ({d}: other kernels, whose figures are not compared with these)" if d else m
            for m, d in zip(self.elsewhere, differences, strict=False)
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


def _speed(ratio: float) -> str:
    """``8% slower`` for a calibration ratio of 1.08, ``10% faster`` for 1/1.1."""
    return f"{ratio - 1:.0%} slower" if ratio >= 1 else f"{1 / ratio - 1:.0%} faster"


@dataclass(frozen=True)
class MachineDrift(Because):
    """The calibration workload ran at another speed than when the baseline was recorded."""

    kind = "machine-drift"
    #: calibration time now / in the baseline (above 1: the machine runs slower)
    ratio: Positive
    #: files written before version 0.2: the verdicts as measured, allowing for all of the
    #: drift and for twice it, where they differed
    verdicts: tuple[Verdict, Verdict, Verdict] | None = None
    #: the ratio's 90% confidence bounds (``None``: too few samples to bound it)
    low: Positive | None = None
    high: Positive | None = None
    #: whether throughput was compared after dividing by it: where the kind of machine's noise
    #: profile says the calibration follows the benchmarks closely enough to help
    allowed: bool = True

    def __str__(self) -> str:
        machine = f"the machine ran {_speed(self.ratio)} than when the baseline was recorded"
        if self.low is not None and self.high is not None and _speed(self.low) != _speed(self.high):
            machine += f" ({_speed(self.low)} to {_speed(self.high)})"
        machine += " (calibration workload)"
        if self.verdicts is not None:
            measured, allowing, twice = self.verdicts
            return (
                f"{machine}, and the verdict depends on how much of that reached this "
                f"benchmark: {measured} as measured, {allowing} allowing for all of it, {twice} "
                "for twice it"
            )
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
            f"the machine ran {_speed(self.ratio)} than when the baseline was recorded "
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
            f"{terms[-1]}; gate it against the base revision in the same job "
            f"(--cnnperf-against=REV), which has no between-run noise{counted}{record}"
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
            "cannot be allowed for and no change can be shown against a stored baseline; re-run "
            "it when the machine is quieter"
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
    """Samples taken while something else ran on the machine (see ``gate.decide.disturbed``)."""

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
            return (
                f"the machine was busy: {samples}, {others}: no throughput verdict; re-run it "
                "when the machine is quieter"
            )
        if self.effect is Disturbance.RECORDED:
            return f"the machine was busy: {samples}; record it again on a quiet machine"
        return f"the machine was busy: {samples}"


@dataclass(frozen=True)
class UnequalPairs(Because):
    """Pairs of samples (one of each side, taken one after the other) that something else
    disturbed unequally (see ``gate.decide.unequal_pairs``): a neighbour that slowed one side of
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
                "verdict; re-run it when the machine is quieter"
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


def graph_break_text(b: GraphBreak) -> str:
    """``models.py:12 `print(x.shape)`: Failed to trace builtin operator``."""
    where = b.location or "an unknown line"
    code = f" `{b.code}`" if b.code else ""
    return f"{where}{code}: {b.reason}"


@dataclass(frozen=True)
class NewGraphBreaks(Because):
    """A compiled benchmark breaks its graph in more places than its baseline did."""

    kind = "new-graph-breaks"
    fails = "graph breaks"
    count: Count
    baseline_count: Count
    #: the breaks the baseline did not have (all of them when only their lines moved)
    breaks: tuple[GraphBreak, ...]

    def __str__(self) -> str:
        new = "; ".join(graph_break_text(b) for b in self.breaks)
        return f"graph breaks: {self.count} now, {self.baseline_count} in the baseline; new: {new}"


@dataclass(frozen=True)
class Recompiled(Because):
    """torch.compile compiled again during the timed steps, or gave up and ran eagerly: the
    steady figure is then not the compiled step's."""

    kind = "recompiled"
    fails = "recompiles"
    recompiles: Count
    reasons: tuple[str, ...]
    eager_frames: Count = 0

    def __str__(self) -> str:
        parts = []
        why = ""
        if self.reasons:
            more = len(self.reasons) - 1
            why = f" ({self.reasons[0]}" + (f"; {more} more" if more else "") + ")"
        if self.recompiles:
            parts.append(
                f"torch.compile recompiled {_plural(self.recompiles, 'time')} during the timed "
                f"steps{why}"
            )
        if self.eager_frames:
            frames = self.eager_frames
            parts.append(
                f"gave up on {_plural(frames, 'frame')} after too many recompiles and ran "
                f"{'it' if frames == 1 else 'them'} eagerly" + (why if not parts else "")
            )
        return (
            "recompiles: "
            + ", and ".join(parts)
            + ": the steady figure is not the compiled step's; keep the shapes and the Python "
            "values the model branches on the same from step to step"
        )


@dataclass(frozen=True)
class SlowerCompile(Because):
    """Compiling took longer than the baseline's past ``compile_time_threshold``."""

    kind = "slower-compile"
    fails = "compile time"
    current_s: NonNegative
    baseline_s: Positive
    threshold: Positive
    cache: str

    def __str__(self) -> str:
        change = self.current_s / self.baseline_s - 1
        return (
            f"compile time: {units.seconds(self.current_s)} now, "
            f"{units.seconds(self.baseline_s)} in the baseline ({self.cache} cache): "
            f"{units.change(change)} (fails above +{units.percent(self.threshold)})"
        )


@dataclass(frozen=True)
class CudaGraphsSkipped(Because):
    """A CUDA-graph compile mode ran compiled graphs without CUDA graphs (always on the CPU)."""

    kind = "cuda-graphs-skipped"
    count: Count
    device: str

    def __str__(self) -> str:
        graphs = _plural(self.count, "compiled graph")
        if self.device.startswith("cuda"):
            return f"CUDA graphs were skipped for {graphs}; TORCH_LOGS=cudagraphs says why"
        return (
            f"{graphs} ran without CUDA graphs: there are none on the {self.device.upper()}, "
            "so this mode measured the same code as mode='default'"
        )


@dataclass(frozen=True)
class Creep(Because):
    """The benchmark is worse than the best of its recent runs on this machine in the history by
    more than the creep threshold (``--cnnperf-creep``), whatever its baseline says."""

    kind = "creep"
    #: the metrics past the threshold, each against the best run's figure
    comparisons: tuple[Comparison, ...]
    #: the recent runs the best was taken from
    runs: Count
    #: the best run: its commit (``None`` when unknown) and when it was recorded
    best_commit: str | None
    best_recorded: str
    unit: str = "images"

    @property
    def metrics(self) -> str:
        return " and ".join(c.metric for c in self.comparisons)

    def __str__(self) -> str:
        commit = f"commit {self.best_commit[:7]}, " if self.best_commit else ""
        figures = []
        for c in self.comparisons:
            if c.metric == "throughput":
                figures.append(
                    f"throughput {units.rate(c.current, self.unit)} against "
                    f"{units.rate(c.baseline, self.unit)}, {units.change(-c.change)} "
                    f"(fails below -{units.percent(c.threshold)})"
                )
            else:
                figures.append(
                    f"peak memory {units.nbytes(c.current)} against {units.nbytes(c.baseline)}, "
                    f"{units.change(c.change)} (fails above +{units.percent(c.threshold)})"
                )
        runs = "its last run" if self.runs == 1 else f"its last {self.runs} runs"
        return (
            f"creep: worse than the best of {runs} on this machine in the history "
            f"({commit}{self.best_recorded.replace('T', ' ')[:16]}): {'; '.join(figures)}"
        )


@dataclass(frozen=True)
class NoProfile(Because):
    """The baseline has no operator profile to say which operators changed against."""

    kind = "no-profile"

    def __str__(self) -> str:
        return (
            "the baseline has no operator profile, so the operators that changed are not named; "
            "record it again (--cnnperf-save) to keep one"
        )


@dataclass(frozen=True)
class ProfileFailed(Because):
    """Profiling the benchmark's operators failed: it costs the benchmark its attribution only."""

    kind = "profile-failed"
    error: str

    def __str__(self) -> str:
        return (
            f"the operators could not be profiled ({self.error}), so none are named; "
            "attribution='off' in the test's cnnperf marker skips the profile"
        )


#: what accepts an intended change of a step's counts or numbers, in every sentence that reports one
_ACCEPT = "record the baseline again (--cnnperf-save) if the change is intended"


def _counts(changes: tuple[CountChange, ...], limit: int = 4) -> str:
    """The changes, those of one count in several callers on one line: ``1 new aten::... per
    step, in each of blocks.0 and blocks.1``."""
    callers: dict[tuple[str, str, int, int], list[str]] = {}
    for c in changes:
        callers.setdefault((c.kind, c.name, c.before, c.after), []).append(c.where or "")
    lines = []
    for (kind, name, before, after), where in callers.items():
        line = str(CountChange(kind, name, None, before, after))
        named = [w for w in where if w]
        if len(named) == 1:
            line += f", in {named[0]}"
        elif named:
            line += f", in each of {', '.join(named[:-1])} and {named[-1]}"
        lines.append(line)
    shown = "; ".join(lines[:limit])
    return shown + (f"; {len(lines) - limit} more" if len(lines) > limit else "")


@dataclass(frozen=True)
class StructureRegressed(Because):
    """The step calls something more often than its reference did, of a kind the gate fails on
    (by default a host-device synchronisation): exact counts, no noise and no threshold."""

    kind = "structure-regressed"
    #: the gated counts that grew
    changes: tuple[CountChange, ...]
    #: host-device synchronisations per step the test allows the step to add
    allowed_syncs: Count = 0

    @property
    def fails_as(self) -> str:
        kinds = dict.fromkeys(c.kind for c in self.changes)
        return " and ".join(f"{KINDS[k][1]}s" for k in kinds)

    def __str__(self) -> str:
        text = f"structure: {_counts(self.changes)}"
        if any(c.kind == "sync" for c in self.changes):
            text += (
                " (a host-device synchronisation makes the CPU wait for the GPU every step, so "
                "it cannot queue the next kernels)"
            )
            more = sum(c.more for c in self.changes if c.kind == "sync")
            allowed = f"allowed_syncs={self.allowed_syncs + more}"
            text += f"; accept a known one with @pytest.mark.cnnperf({allowed}), or {_ACCEPT}"
        else:
            text += f"; {_ACCEPT}"
        return text


@dataclass(frozen=True)
class StructureChanged(Because):
    """The step's counts changed in ways the gate reports without failing on them."""

    kind = "structure-changed"
    #: the counts that changed, largest first
    changes: tuple[CountChange, ...]
    #: the operators whose count differed from one counted step to the next, on either side:
    #: not compared
    varying: tuple[str, ...] = ()

    def __str__(self) -> str:
        parts = []
        if self.changes:
            parts.append(
                f"{_counts(self.changes)} (reported; the structure setting names the kinds that "
                "fail, e.g. structure='syncs,casts')"
            )
        if self.varying:
            parts.append(
                f"{', '.join(self.varying)} called a different number of times from one step "
                "to the next, so not compared"
            )
        return "structure: " + "; ".join(parts)


@dataclass(frozen=True)
class NotCounted(Because):
    """The step could not be counted, where its reference was: its counts are not compared."""

    kind = "not-counted"
    #: why counting failed, as the counting pass said
    error: str

    def __str__(self) -> str:
        return (
            f"structure: the step could not be counted ({self.error}), so its operator counts "
            "were not compared; the timed steps ran as usual"
        )


@dataclass(frozen=True)
class ComputesOtherwise(Because):
    """The step's first steps, from the same seed and weights, computed other numbers than the
    reference's: it computes something else (a layer skipped, a changed loss), whatever its
    speed. Fails the benchmark in strict mode only."""

    kind = "computes-otherwise"
    #: the first number that differs
    differ: NumbersDiffer
    #: strict mode, which fails the benchmark for it
    strict: bool = False
    #: what changed beside the code that picks other kernels (``CPU capability AVX2 ->
    #: AVX512``, ``torch 2.5.0 -> 2.6.0``): the likely cause, rather than the code
    likely_cause: str | None = None

    @property
    def fails_as(self) -> str | None:
        return "what the step computes" if self.strict else None

    def __str__(self) -> str:
        d = self.differ
        change = units.change(d.after / d.before - 1) if d.before else "-"
        numbers = (
            f"the {d.what} is {d.after:.6g} now, {d.before:.6g} before ({change}, where runs "
            f"of the same code differ by at most {units.percent(d.tolerance)})"
        )
        if self.likely_cause:
            return (
                f"numbers: {numbers}; likely cause: {self.likely_cause} (other kernels round "
                "otherwise), not the code; record a baseline on this kind of machine "
                "(--cnnperf-save) to compare the code's numbers"
            )
        return f"numbers: the step computes something else: {numbers}; {_ACCEPT}"


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
class NoCounts(Because):
    """The reference has no instruction count to gate against: it was measured by time."""

    kind = "no-counts"

    def __str__(self) -> str:
        return (
            "the baseline has no instruction count (it was recorded with --cnnperf-metric=time), "
            "so nothing was gated by instructions; record it again with --cnnperf-save "
            "--cnnperf-metric=instructions"
        )


@dataclass(frozen=True)
class CountsMoved(Because):
    """Instructions per step moved by more than unchanged code's counts differ between
    processes, though less than the threshold: something in the step changed."""

    kind = "counts-moved"
    #: the change of instructions per step
    change: float
    #: how much unchanged code's counts differ between processes, at most
    spread: NonNegative

    def __str__(self) -> str:
        return (
            f"instructions per step moved by {units.change(self.change)}, more than unchanged "
            f"code's counts differ between processes ({units.percent(self.spread)}): the step "
            "runs other code than the baseline's, by less than the threshold"
        )


@dataclass(frozen=True)
class OperatorCountsChanged(Because):
    """The operators whose instructions changed most from the reference's, callees included:
    what an instruction-count change is made of (``--cnnperf-metric=instructions``)."""

    kind = "operator-counts-changed"
    #: ``(operator, instructions a step before, now)``, largest change first
    changes: tuple[tuple[str, Count, Count], ...]

    def lines(self) -> list[str]:
        """A row per operator: ``aten::conv2d +1.53 M instructions a step (6.93 M -> 8.46 M)``."""
        return [
            f"{name} {'+' if after >= before else '-'}{units.count(abs(after - before))} "
            f"instructions a step ({units.count(before)} -> {units.count(after)})"
            for name, before, after in self.changes
        ]

    def __str__(self) -> str:
        return "operators by instructions: " + "; ".join(self.lines())


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
            f"after {_plural(self.samples, 'sample')}, where +-{units.percent(self.wanted)} was "
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


Reason = (
    NoBaseline
    | NotAtRevision
    | MachineDrift
    | DriftUncovered
    | Unvouched
    | NoisyCalibration
    | CalibrationChanged
    | SoftwareChanged
    | Disturbed
    | UnequalPairs
    | UntrustworthyGpu
    | SamplingChanged
    | NewGraphBreaks
    | Recompiled
    | SlowerCompile
    | CudaGraphsSkipped
    | Creep
    | NoProfile
    | ProfileFailed
    | ImpreciseBaseline
    | NoCounts
    | CountsMoved
    | OperatorCountsChanged
    | StructureRegressed
    | StructureChanged
    | NotCounted
    | ComputesOtherwise
    | OtherKernels
    | NotSaved
    | Remark
)


def failure_of(reason: Reason) -> str | None:
    """What a reason fails a benchmark for beside its throughput and memory (``graph breaks``,
    ``host-device synchronisations``, ...), or ``None``."""
    if isinstance(reason, Remark | StructureRegressed | ComputesOtherwise):
        return reason.fails_as
    return reason.fails


def is_creep(reason: Reason) -> bool:
    return isinstance(reason, Creep) or (isinstance(reason, Remark) and reason.role == "creep")


@dataclass(frozen=True)
class Decision:
    """The gate's verdict on one benchmark, with the evidence for it."""

    verdict: Verdict
    throughput: Comparison | None = None
    memory: Comparison | None = None
    environment_changes: tuple[str, ...] = ()
    reasons: tuple[Reason, ...] = ()
    baseline_file: str | None = None
    failed: bool = False
    #: compiled benchmarks: graph breaks, recompiles and compile time against the baseline
    compile: CompileComparison | None = None
    #: which operators account for the change (regressed or improved verdicts)
    attribution: Attribution | None = None
    #: gated against another revision measured in the same run (``--cnnperf-against``): which,
    #: and its samples
    against: Against | None = None
    reference: Measurement | None = None
    #: ``--cnnperf-metric=instructions``: instructions per step against the reference's, which
    #: gate throughput in place of the step time (then reported beside, not gated)
    instructions: Comparison | None = None

    @property
    def creep(self) -> Reason | None:
        """The creep gate's reason, when it failed the benchmark."""
        return next((r for r in self.reasons if is_creep(r)), None)

    @property
    def no_baseline(self) -> NoBaseline | None:
        return next((r for r in self.reasons if isinstance(r, NoBaseline)), None)
