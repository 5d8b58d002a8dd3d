"""The reasons about what a step's figures showed beside its speed and memory: compiling,
the creep gate, profiles, exact counts and numbers, instruction counts."""

from __future__ import annotations

from dataclasses import dataclass

from ..count_kinds import KINDS
from . import units
from .because import ACCEPT, RECOUNT, Because, plural
from .comparison import Comparison
from .parts import GraphBreak
from .structure import CountChange, NumbersDiffer
from .values import Count, NonNegative, Positive


def graph_break_text(b: GraphBreak) -> str:
    """``models.py:12 `print(x.shape)`: Failed to trace builtin operator``."""
    where = b.location or "an unknown line"
    code = f" `{b.code}`" if b.code else ""
    return f"{where}{code}: {b.reason}"


@dataclass(frozen=True)
class NewGraphBreaks(Because):
    """A compiled benchmark breaks its graph in more places than its baseline did."""

    kind = "new-graph-breaks"
    fails_as = "graph breaks"
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
    fails_as = "recompiles"
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
                f"torch.compile recompiled {plural(self.recompiles, 'time')} during the timed "
                f"steps{why}"
            )
        if self.eager_frames:
            frames = self.eager_frames
            parts.append(
                f"gave up on {plural(frames, 'frame')} after too many recompiles and ran "
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
    fails_as = "compile time"
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
        graphs = plural(self.count, "compiled graph")
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
            text += f"; accept a known one with @pytest.mark.cnnperf({allowed}), or {ACCEPT}"
        else:
            text += f"; {ACCEPT}"
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
        return f"numbers: the step computes something else: {numbers}; {ACCEPT}"


@dataclass(frozen=True)
class NoCounts(Because):
    """The reference has no instruction count to gate against: it was measured by time."""

    kind = "no-counts"

    def __str__(self) -> str:
        return (
            "the baseline has no instruction count (it was recorded with --cnnperf-metric=time), "
            f"so nothing was gated by instructions; {RECOUNT}"
        )


@dataclass(frozen=True)
class CountedOtherwise(Because):
    """The baseline's counts were taken under another Valgrind, other kernels, another torch
    or Python: counts of other code, which gate nothing (``gate.counts``)."""

    kind = "counted-otherwise"
    #: what differs, baseline first: ``kernels avx2 -> no-fma``
    changes: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"the baseline was counted otherwise ({'; '.join(self.changes)}): counts of other "
            "kernels or another build are no measure of this code's change, so nothing was "
            f"gated by instructions; {RECOUNT}"
        )


@dataclass(frozen=True)
class CountedElsewhere(Because):
    """The counts were gated against another kind of machine's baseline, counted the same way:
    counts do not follow the host's CPU under Valgrind; that machine's time and memory are not
    this one's, and are not judged."""

    kind = "counted-elsewhere"
    #: the kind of machine whose baseline the counts were compared with
    machine: str

    def __str__(self) -> str:
        return (
            f"the counts were gated against the baseline of {self.machine}, counted under the "
            "same Valgrind, kernels, torch and Python (counts do not follow the host's CPU); "
            "its time and memory are that machine's and were not judged; record this kind's "
            "with --cnnperf-save to judge them"
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
