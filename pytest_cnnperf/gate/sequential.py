"""One benchmark's course through the gate: what to sample, look, decide, and whether to go on.

The runner asks :meth:`Gating.first` (or :meth:`Saving.first`) what to sample, takes those
samples, and hands everything taken so far to ``look``, which answers with the decision and
what to sample next (``None``: the decision is final). The runner runs what it is told and
nothing else; every count of samples, and what they also measure (peak memory, the step's
FLOPs, an operator profile), is decided here.

A gated run follows its :class:`~pytest_cnnperf.gate.design.Design`: at each look the
throughput verdict is regressed, improved, ok, or not decided yet; then the next look's samples
are taken, up to the last look, where it is inconclusive; or sooner, where no number of samples
could settle it (the noise between runs, which samples do not average away, is too large). Once
the throughput verdict is final, one more batch may complete what needs more processes than the
look had: peak memory past its threshold (confirmed in three samples) and the operator profile
of a change (three profiled samples); they do not decide throughput again. A save takes the
samples a first look against it needs and more until its median is precise enough.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..model import (
    Against,
    Decision,
    Disturbance,
    ImpreciseBaseline,
    Look,
    Measurement,
    NoBaseline,
    NoiseProfile,
    NotAtRevision,
    Result,
    Verdict,
)
from . import creep
from .decide import MEMORY_CONFIRMATIONS, attribution, decide, judge_compile
from .design import Design, median_bounds
from .policy import FIRST_LOOK, GateSettings, Plan, SamplingPolicy
from .throughput import CHANGES, Throughput, judge_pairs, noted, throughput_at

#: samples that profile a benchmark's operators: a baseline's first ones, and a gated run's
#: once a change shows (three processes: the profiles' noise includes theirs)
PROFILED_SAMPLES = 3
#: a save is precise enough when the confidence interval of its median step time (at
#: :data:`PRECISION_LEVEL`) is within this fraction of the throughput threshold either side
PRECISION = 0.25
PRECISION_LEVEL = 0.10


@dataclass(frozen=True)
class Next:
    """What the runner samples next: how many samples, and how many of them (the first ones)
    also measure peak memory, count the step (FLOPs, operators, first numbers) and profile its
    operators. ``paired``: as many of the revision gated against, in turn with these, the same
    ones measuring, counting and profiling. ``instructions``: also count the step's instructions
    in the counting process (``--cnnperf-metric=instructions``)."""

    samples: int
    memory: int = 0
    counted: int = 0
    profile: int = 0
    paired: bool = False
    instructions: bool = False


@dataclass(frozen=True)
class Reference:
    """What a gated benchmark is compared with: its baseline entry (``None``: there is none,
    and ``absent`` says why: the kinds of machine that have one), the file it is looked for in
    as a user reads the path; with the creep gate, the recent runs it takes the best of and its
    threshold."""

    entry: Result | None
    file: str | None = None
    recent: Sequence[creep.Run] = ()
    creep_threshold: float | None = None
    #: measured at another revision in this run (``--cnnperf-against``)
    against: Against | None = None
    absent: NoBaseline | NotAtRevision | None = None
    #: the kind of machine's noise profile (``None``: none recorded, the device's default)
    noise: NoiseProfile | None = None


class Gating:
    """A benchmark gated against its reference, look by look: ``find(result)`` gives it for the
    first samples (their kind of machine, and under instruction counts what counted them);
    ``profiled``: whether this benchmark's operators can be profiled at all (see the runner)."""

    #: whether the reference's samples are taken in this run, in turn with these
    paired = False

    def __init__(
        self,
        settings: GateSettings,
        design: Design,
        find: Callable[[Result], Reference],
        *,
        profiled: bool,
    ) -> None:
        self.settings = settings
        self.design = design
        self._find = find
        self._profiled = profiled and settings.attribution != "off"
        self._reference: Reference | None = None
        self._index = 0
        #: once the throughput verdict is final: it, the look that made it, and the decision
        self._final: tuple[Throughput, Look, Decision] | None = None

    def first(self) -> Next:
        count = self.design.looks[0]
        always = self._profiled and self.settings.attribution == "always"
        return Next(
            count,
            memory=1,
            counted=1,
            profile=min(count, PROFILED_SAMPLES) if always else 0,
            instructions=self.settings.metric == "instructions",
        )

    def look(self, result: Result, base: Result | None = None) -> tuple[Decision, Next | None]:
        """The decision on every sample taken so far, and what to sample next (``base``: the
        other side's samples, when both are measured in this run)."""
        taken = len(result.measured.samples)
        if self._reference is None:
            assert result.environment is not None
            self._reference = reference = self._find(result)
            if reference.entry is not None:
                self.design = self.design.reachable(len(reference.entry.measured.samples))
                # looks the reference cannot reach were dropped: sample up to the first left
                wanted = self.design.looks[0]
                if taken < wanted:
                    pending = decide(result, None, self.settings, self.design.look(0))
                    return pending, Next(wanted - taken)
        return self._next(result)

    def _throughput(self, result: Result, reference: Result, look: Look) -> Throughput:
        profile = self._reference.noise if self._reference else None
        return throughput_at(result, reference, self.settings, look, profile, self.design.cap)

    def _next(self, result: Result) -> tuple[Decision, Next | None]:
        """Decide at this look, and say what to sample next, against the reference found."""
        measurement = result.measured
        taken = len(measurement.samples)
        reference = self._reference
        assert reference is not None
        if self._final is not None:
            return self._complete(result), None
        look = self.design.look(self._index)
        if reference.entry is None:
            return self._decide(result, look, None), None
        throughput = self._throughput(result, reference.entry, look)
        decision = self._decide(result, look, throughput)
        decision, creep_open = self._creep(decision, result, look)
        last = self._index == len(self.design.looks) - 1
        undecided = throughput.verdict is Verdict.INCONCLUSIVE and throughput.settles
        if self.settings.metric == "instructions":  # one count decides; the time is reported
            undecided = False
        if not last and throughput.quiet and (undecided or creep_open):
            self._index += 1
            count = self.design.looks[self._index] - taken
            memory = self._memory_wanted(decision, measurement)
            timed = decision.throughput
            leaning = timed is not None and abs(timed.change) > timed.threshold
            profile = self._profile_wanted(measurement, leaning or memory > 0)
            memory, profile = min(count, memory), min(count, profile)
            return decision, Next(count, memory=memory, profile=profile, paired=self.paired)
        self._final = (throughput, look, decision)
        memory = self._memory_wanted(decision, measurement)
        profile = self._profile_wanted(measurement, decision.verdict in CHANGES or memory > 0)
        if memory or profile:  # one more batch completes memory and the profile
            count = max(memory, profile)
            return decision, Next(count, memory=memory, profile=profile, paired=self.paired)
        return self._complete(result), None

    def _decide(self, result: Result, look: Look, throughput: Throughput | None) -> Decision:
        reference = self._reference
        assert reference is not None
        return decide(
            result,
            reference.entry,
            self.settings,
            look,
            reference.file,
            throughput=throughput,
            against=reference.against,
            absent=reference.absent,
        )

    def _creep(self, decision: Decision, result: Result, look: Look) -> tuple[Decision, bool]:
        reference = self._reference
        if reference is None or reference.creep_threshold is None or not reference.recent:
            return decision, False
        return creep.judge(
            decision,
            result,
            reference.recent,
            self.settings,
            reference.creep_threshold,
            look,
            reference.noise,
        )

    def _memory_wanted(self, decision: Decision, measurement: Measurement) -> int:
        """Memory samples still needed: a change past the threshold must show in three."""
        memory = decision.memory
        if memory is None or memory.verdict is not Verdict.INCONCLUSIVE:
            return 0
        return max(0, MEMORY_CONFIRMATIONS - len(measurement.memory_peaks))

    def _profile_wanted(self, measurement: Measurement, change: bool) -> int:
        """Profiled samples still needed: those of a change, or of every run with
        ``attribution="always"``, until three samples took one; none when the baseline has no
        profile to compare them with (the decision then says so)."""
        entry = self._reference.entry if self._reference else None
        if not self._profiled or entry is None or self.settings.metric == "instructions":
            return 0  # instructions name their operators from the counts themselves
        if entry.measured.profile is None and not self.paired:  # the reference profiles too
            return 0
        if not change and self.settings.attribution != "always":
            return 0
        return max(0, PROFILED_SAMPLES - sum(1 for s in measurement.samples if s.profile))

    def _complete(self, result: Result) -> Decision:
        """The final decision: the throughput verdict as its look made it, memory on every
        memory sample, and the operators that changed."""
        assert self._final is not None
        assert self._reference is not None
        throughput, look, earlier = self._final
        decision = self._decide(result, look, throughput)
        if earlier.creep is not None:  # the creep gate's verdict stands as its look made it
            decision = dataclasses.replace(
                decision,
                verdict=Verdict.REGRESSED,
                failed=True,
                reasons=(*decision.reasons, earlier.creep),
            )
        wanted = self.settings.attribution == "always" or decision.verdict in CHANGES
        entry = self._reference.entry
        counted = self.settings.metric == "instructions"  # its counts name the operators
        if not self._profiled or not wanted or entry is None or counted:
            return decision
        memory = decision.memory is not None and decision.memory.verdict in CHANGES
        found, why = attribution(entry.measured, result.measured, memory)
        reasons = decision.reasons + ((why,) if why else ())
        return dataclasses.replace(decision, attribution=found, reasons=reasons)


class Pairing(Gating):
    """A benchmark gated against the same benchmark at another revision, both measured in this
    run (``--cnnperf-against``): every look has as many samples of each side, taken in turn,
    compared as they are (see ``gate.throughput.judge_pairs``). ``absent``: why the benchmark does
    not exist at that revision (it is then new, from its first look)."""

    paired = True

    def __init__(
        self,
        settings: GateSettings,
        design: Design,
        against: Against,
        *,
        profiled: bool,
        absent: str | None = None,
    ) -> None:
        super().__init__(settings, design.paired(), lambda _: Reference(None), profiled=profiled)
        self.against = against
        self.absent = absent

    def first(self) -> Next:
        if self.absent is not None:  # nothing to compare with: a first look's samples
            return Next(min(self.design.looks[0], FIRST_LOOK), memory=1, counted=1)
        return dataclasses.replace(super().first(), paired=True)

    def lost(self, why: str) -> None:
        """The revision gated against turned out not to make this benchmark call."""
        self.absent = why
        self._reference = None

    def look(self, result: Result, base: Result | None = None) -> tuple[Decision, Next | None]:
        if self.absent is not None or base is None:
            why = self.absent or "it was not measured there"
            absent = NotAtRevision(str(self.against.base), why)
            self._reference = Reference(None, against=self.against, absent=absent)
            return self._decide(result, self.design.look(0), None), None
        self._reference = Reference(base, against=self.against)
        return self._next(result)

    def _throughput(self, result: Result, reference: Result, look: Look) -> Throughput:
        return judge_pairs(result.measured, reference.measured, self.settings, look)


class Saving:
    """A baseline recorded: the samples a first look against it needs, then more until the
    median step time is precise enough (or at twice as many; ``quick`` takes its two as they
    are). A save whose compiled step recompiled while timed is not kept: its steady figure would
    include compiling."""

    def __init__(
        self, settings: GateSettings, sampling: SamplingPolicy, design: Design, *, profiled: bool
    ) -> None:
        self.settings = settings
        self.least = sampling.save or design.smallest_reference()
        # a save count the effort fixed (quick) is taken as it is
        self.most = self.least if sampling.save else 2 * self.least
        self.step = design.looks[0]
        self._profiled = profiled and settings.attribution != "off"

    def first(self) -> Next:
        count = self.least
        profile = min(count, PROFILED_SAMPLES) if self._profiled else 0
        return Next(
            count,
            memory=min(count, MEMORY_CONFIRMATIONS),
            counted=1,
            profile=profile,
            instructions=self.settings.metric == "instructions",
        )

    def look(self, result: Result) -> tuple[Decision, Next | None]:
        measurement = result.measured
        taken = len(measurement.samples)
        spread = precision(measurement.step_times)
        wanted = PRECISION * self.settings.throughput_threshold
        if spread > wanted and taken < self.most:
            return self._decision(result, None), Next(min(self.step, self.most - taken))
        imprecise = ImpreciseBaseline(taken, spread, wanted) if spread > wanted else None
        return self._decision(result, imprecise), None

    def _decision(self, result: Result, imprecise: ImpreciseBaseline | None) -> Decision:
        measurement = result.measured
        assert result.environment is not None
        compiled, compile_reasons = judge_compile(
            measurement, None, self.settings, result.environment.device
        )
        failed = compiled is not None and compiled.verdict is Verdict.REGRESSED
        busy = noted(measurement, Disturbance.RECORDED)
        return Decision(
            verdict=Verdict.NEW if failed else Verdict.SAVED,
            reasons=(*busy, *([imprecise] if imprecise else []), *compile_reasons),
            failed=failed,
            compile=compiled,
        )


def course(plan: Plan, find: Callable[[Result], Reference], *, profiled: bool) -> Gating | Saving:
    """A benchmark's course under its test's plan: a save, or a gated run against the
    reference ``find`` gives for its first samples."""
    design = plan.sampling.design(plan.gate.policy)
    if plan.save:
        return Saving(plan.gate, plan.sampling, design, profiled=profiled)
    return Gating(plan.gate, design, find, profiled=profiled)


def pairing(plan: Plan, against: Against, *, profiled: bool, absent: str | None) -> Pairing:
    """A benchmark's course gated against the revision ``against`` names, measured in this run
    (``absent``: why the benchmark does not exist there)."""
    design = plan.sampling.design(plan.gate.policy)
    return Pairing(plan.gate, design, against, profiled=profiled, absent=absent)


def precision(step_times: Sequence[float]) -> float:
    """Half the width, as a fraction of the median, of the distribution-free confidence
    interval of the median step time at ``1 - PRECISION_LEVEL``."""
    low, high = median_bounds(tuple(step_times), PRECISION_LEVEL)
    return (math.log(high) - math.log(low)) / 2
