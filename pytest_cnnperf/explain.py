"""The words a benchmark's reader gets: failure messages, one-line verdict explanations, and
the gate's reasons (``results.Reason``) as sentences."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from . import units
from .results import (
    BenchmarkResult,
    CalibrationChanged,
    Comparison,
    CompileComparison,
    Creep,
    CudaGraphsSkipped,
    Decision,
    Disturbance,
    Disturbed,
    GraphBreak,
    MachineDrift,
    Measurement,
    NewGraphBreaks,
    NoBaseline,
    Reason,
    Recompiled,
    Remark,
    SamplingChanged,
    SlowerCompile,
    SoftwareChanged,
    UntrustworthyGpu,
    Verdict,
)

NO_BASELINE = "no baseline"


def display_path(path: os.PathLike[str] | str) -> str:
    """A path as a user reads it: relative to the current folder when it lies inside it, else
    as it is (``/proc/x/r.json``, not ``../../proc/x/r.json``)."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:  # another drive on Windows
        return text
    outside = relative == os.pardir or relative.startswith(os.pardir + os.sep)
    return text if outside else relative


def save_command(nodeid: str) -> str:
    return f"pytest --cnnperf --cnnperf-save {shlex.quote(nodeid)}"


def accept_creep_command(nodeid: str, save: bool = False) -> str:
    also = " --cnnperf-save" if save else ""
    return f"pytest --cnnperf{also} --cnnperf-creep-accept {shlex.quote(nodeid)}"


#: how the creep gate's sentence begins (a results file keeps reasons as sentences)
_CREEP_OPENING = "creep: "


def creep_of(decision: Decision) -> Creep | Remark | None:
    """The creep gate's reason, when it failed the benchmark (a ``Remark`` when read back from a
    results file)."""
    return next(
        (
            r
            for r in decision.reasons
            if isinstance(r, Creep) or (isinstance(r, Remark) and r.text.startswith(_CREEP_OPENING))
        ),
        None,
    )


def comparison_lines(comparison: Comparison, unit: str, alpha: float) -> list[str]:
    if comparison.metric == "throughput":
        measured = (
            f"throughput  {units.rate(comparison.current, unit)} now, "
            f"{units.rate(comparison.baseline, unit)} in the baseline: "
        )
        if comparison.machine_factor != 1.0 and comparison.raw_change is not None:
            measured += (
                f"{units.change(-comparison.raw_change)} as measured, "
                f"{units.change(-comparison.change)} allowing for the machine's speed"
            )
        else:
            measured += units.change(-comparison.change)
        lines = [measured + f" (fails below -{units.percent(comparison.threshold)})"]
        evidence = (
            f"            {comparison.current_samples} samples now against "
            f"{comparison.baseline_samples}; one-sided Mann-Whitney p = {comparison.p_value:.2g}"
        )
        if comparison.low is not None and comparison.verdict is Verdict.REGRESSED:
            evidence += (
                f"; with {1 - alpha:.0%} confidence the loss is at least "
                f"{units.percent(max(comparison.low, 0.0))}"
            )
        lines.append(evidence)
        return lines
    return [
        f"memory      {units.nbytes(comparison.current)} now, "
        f"{units.nbytes(comparison.baseline)} in the baseline at peak: "
        f"{units.change(comparison.change)} (fails above +{units.percent(comparison.threshold)})"
    ]


#: what a compile reason that fails a benchmark says regressed
_COMPILE_FAILURES = {
    NewGraphBreaks: "graph breaks",
    Recompiled: "recompiles",
    SlowerCompile: "compile time",
}


#: how the sentences of those reasons begin (a results file keeps reasons as sentences)
_COMPILE_FAILURE_OPENINGS = ("graph breaks: ", "recompiles: ", "compile time: ")


def fails_compile(reason: Reason) -> bool:
    """Whether ``reason`` is one that fails a compiled benchmark (read back from a results
    file too)."""
    if isinstance(reason, Remark):
        return reason.text.startswith(_COMPILE_FAILURE_OPENINGS)
    return type(reason) in _COMPILE_FAILURES


def compile_failures(decision: Decision) -> list[str]:
    """What failed a compiled benchmark: ``graph breaks``, ``recompiles``, ``compile time``."""
    return [_COMPILE_FAILURES[type(r)] for r in decision.reasons if type(r) in _COMPILE_FAILURES]


def compile_time(seconds: float | None, cache: str | None) -> str:
    if seconds is None:
        return "-"
    return f"{units.seconds(seconds)} {'cold' if cache in ('cold', 'none') else cache}"


def compile_lines(comparison: CompileComparison) -> list[str]:
    """A compiled benchmark's compiler figures against the baseline's, for a failure message."""
    line = f"compile     {compile_time(comparison.compile_s, comparison.cache)} now"
    if comparison.baseline_compile_s is not None:
        line += f", {units.seconds(comparison.baseline_compile_s)} in the baseline: "
        line += units.change(comparison.compile_change)
        if comparison.threshold is not None:
            line += f" (fails above +{units.percent(comparison.threshold)})"
    breaks = f"{comparison.graph_breaks} graph break{'' if comparison.graph_breaks == 1 else 's'}"
    if comparison.baseline_graph_breaks is not None:
        breaks += f" ({comparison.baseline_graph_breaks} in the baseline)"
    recompiles = f"{comparison.recompiles} recompile{'' if comparison.recompiles == 1 else 's'}"
    before = comparison.warmup_recompiles
    line2 = f"            {breaks}, {recompiles} during the timed steps"
    if before:
        line2 += f" ({before} before them)"
    if comparison.eager_frames:
        frames = comparison.eager_frames
        line2 += f", {frames} frame{'' if frames == 1 else 's'} run eagerly"
    return [line, line2]


def failure(result: BenchmarkResult, alpha: float) -> str:
    """Why ``result`` fails its test, with the numbers, the baseline file and the fix."""
    decision = result.decision
    unit = result.config.unit
    head = f"cnnperf: {result.key}"
    lines: list[str] = []
    compiled = compile_failures(decision)
    creep = creep_of(decision)
    baseline_regressed = [
        c.metric
        for c in (decision.throughput, decision.memory)
        if c and c.verdict is Verdict.REGRESSED
    ]
    if decision.verdict is Verdict.REGRESSED:
        what = (
            [" and ".join(baseline_regressed + compiled)] if baseline_regressed or compiled else []
        )
        if creep:
            metrics = (
                " and ".join(c.metric for c in creep.comparisons)
                if isinstance(creep, Creep)
                else "throughput or peak memory"
            )
            what.append(f"{metrics} against the best of its recent runs in the history")
        lines.append(f"{head} regressed ({'; '.join(what)})")
    elif compiled:
        lines.append(f"{head} failed ({' and '.join(compiled)})")
    elif decision.verdict is Verdict.NEW:
        lines.append(
            f"{head} has no baseline in {decision.baseline_file} "
            "(strict mode fails benchmarks without one)"
        )
        missing = _no_baseline(decision)
        if missing and missing.elsewhere:
            lines.append(f"  note: {reason_text(missing)}")
    elif decision.verdict is Verdict.INCONCLUSIVE:
        lines.append(
            f"{head} is inconclusive (strict mode fails it): the noise is too large to tell a "
            "change of the threshold's size from none"
        )
    else:
        lines.append(f"{head}: the environment differs from the baseline's (strict mode)")
    for comparison in (decision.throughput, decision.memory):
        if comparison:
            lines += ["  " + line for line in comparison_lines(comparison, unit, alpha)]
    if decision.compile:
        lines += ["  " + line for line in compile_lines(decision.compile)]
    for reason in decision.reasons:
        if fails_compile(reason):
            lines.append(f"  {reason_text(reason)}")
    for change in decision.environment_changes:
        lines.append(f"  environment changed: {change}")
    for note in notes(decision, compile_failures=False):
        lines.append(f"  note: {note}")
    missing = _no_baseline(decision)
    if decision.baseline_file and missing is None:
        lines.append(f"  baseline    {decision.baseline_file}")
    elif decision.baseline_file and decision.verdict is not Verdict.NEW:
        lines.append(f"  no baseline in {decision.baseline_file}")
    if decision.verdict is Verdict.INCONCLUSIVE:
        lines.append(
            "  Re-run it, measure more with --cnnperf-effort=thorough, or widen the threshold "
            "with @pytest.mark.cnnperf(threshold=...)."
        )
    if creep and baseline_regressed:
        lines.append(
            "  To accept it as the new baseline and in the history, run: "
            + accept_creep_command(result.test_id, save=True)
        )
    elif creep:
        lines.append("  To accept it, run: " + accept_creep_command(result.test_id))
    if missing is not None and "recompiles" in compiled:
        lines.append(
            "  No baseline is recorded while it recompiles: its steady figure would include "
            "compiling."
        )
    elif missing is not None:
        lines.append("  Record one with: " + save_command(result.test_id))
    elif compiled or not creep:  # what the creep gate's command does not accept
        lines.append("  To accept this as the new baseline, run: " + save_command(result.test_id))
    if missing and missing.elsewhere:
        lines.append("  " + _share_hint(missing.elsewhere))
    return "\n".join(lines)


def _no_baseline(decision: Decision) -> NoBaseline | None:
    return next((r for r in decision.reasons if isinstance(r, NoBaseline)), None)


def _share_hint(machines: Sequence[str]) -> str:
    example = machines[0]
    others = " or ".join(machines)
    return (
        f"Or, if this machine is of the same kind as {others}, share its baselines: "
        f"--cnnperf-machine={example} (or cnnperf_machine = {example} in the ini file)."
    )


def missing_baselines(results: Sequence[BenchmarkResult]) -> list[str]:
    """For a session's summary: which benchmarks have no baseline on this kind of machine,
    where they were looked for, which machines have them, and the two fixes."""
    missing = [(r, reason) for r in results if (reason := _no_baseline(r.decision)) is not None]
    if not missing:
        return []
    machines = sorted({reason.machine for _, reason in missing})
    files = sorted({r.decision.baseline_file for r, _ in missing if r.decision.baseline_file})
    count = len(missing)
    where = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    lines = [
        f"{count} benchmark{'' if count == 1 else 's'} had no baseline for this kind of machine "
        f"({', '.join(machines)}); looked in {where or 'no file'}"
    ]
    elsewhere: dict[str, int] = {}
    for _, reason in missing:
        for machine in reason.elsewhere:
            elsewhere[machine] = elsewhere.get(machine, 0) + 1
    if elsewhere:
        found = ", ".join(f"{m} ({n} of {count})" for m, n in sorted(elsewhere.items()))
        lines.append(f"  baselines of them exist for other kinds of machine: {found}")
    lines.append(
        "  Record them for this machine: run the same command with --cnnperf-save, and commit "
        "the files it writes."
    )
    if elsewhere:
        lines.append("  " + _share_hint(sorted(elsewhere, key=lambda m: -elsewhere[m])))
    else:
        lines.append(
            "  Or, to share baselines between runners of one class whose machine names differ, "
            "name the kind with --cnnperf-machine=NAME (or cnnperf_machine in the ini file)."
        )
    return lines


def headline(result: BenchmarkResult) -> str:
    """One line per benchmark for ``-v``: the verdict and the main figure."""
    m = result.measurement
    if m is None:
        return f"{result.decision.verdict}: {result.error or ''}"
    text = (
        f"{result.decision.verdict}: {units.rate(m.items_per_second, m.unit)}, "
        f"step {units.seconds(m.step_time_s)}"
    )
    if m.peak_allocated_bytes is not None:
        text += f", peak {units.nbytes(m.peak_allocated_bytes)}"
    if result.decision.throughput:
        text += f" ({units.change(-result.decision.throughput.change)} vs baseline)"
    missing = _no_baseline(result.decision)
    if missing:
        text += f" ({reason_text(missing)})"
    compiled = compile_summary(m)
    if compiled:
        text += f"; {compiled}"
    return text


def compile_summary(m: Measurement) -> str | None:
    """``compiled in 31.2 s cold, 2.10 s warm; 0 graph breaks, 0 recompiles``."""
    if not m.compilations:
        return None
    times = [
        f"{units.seconds(t)} {cache}"
        for cache in ("cold", "warm")
        if (t := m.compile_time(cache)) is not None
    ]
    breaks, recompiles = len(m.graph_breaks), m.warmup_recompiles + m.recompiles
    text = (
        (f"compiled in {', '.join(times)}; " if times else "compiled; ")
        + f"{breaks} graph break{'' if breaks == 1 else 's'}, "
        + f"{recompiles} recompile{'' if recompiles == 1 else 's'}"
    )
    if m.recompiles:
        text += f" ({m.recompiles} while timed)"
    if m.eager_frames:
        text += f", {m.eager_frames} frame{'' if m.eager_frames == 1 else 's'} run eagerly"
    return text


def graph_break(b: GraphBreak) -> str:
    """``models.py:12 `print(x.shape)`: Failed to trace builtin operator``."""
    where = b.location or "an unknown line"
    code = f" `{b.code}`" if b.code else ""
    return f"{where}{code}: {b.reason}"


def _machine(ratio: float) -> str:
    if ratio >= 1:
        return f"the machine ran {ratio - 1:.0%} slower than when the baseline was recorded"
    return f"the machine ran {1 / ratio - 1:.0%} faster than when the baseline was recorded"


def _disturbed_samples(count: int, total: int) -> str:
    return (
        f"{count} of {total} samples had erratic step times, a slow calibration or threads "
        "kept waiting for the CPU"
    )


def _disturbed(reason: Disturbed) -> str:
    samples = _disturbed_samples(reason.count, reason.total)
    quiet = reason.total - reason.count
    if reason.effect is Disturbance.QUIET_REGRESSED:
        return f"{samples}; the other {quiet} alone show the regression"
    if reason.effect is Disturbance.NO_VERDICT:
        others = {
            0: "so none can show a regression",
            1: "and the other one alone does not show a regression",
        }.get(quiet, f"and the other {quiet} alone do not show a regression")
        return (
            f"the machine was busy: {samples}, {others}: no throughput verdict; re-run it when "
            "the machine is quieter"
        )
    if reason.effect is Disturbance.RECORDED:
        return f"the machine was busy: {samples}; record it again on a quiet machine"
    return f"the machine was busy: {samples}"


def _creep(reason: Creep) -> str:
    commit = f"commit {reason.best_commit[:7]}, " if reason.best_commit else ""
    figures = []
    for c in reason.comparisons:
        if c.metric == "throughput":
            figures.append(
                f"throughput {units.rate(c.current, reason.unit)} against "
                f"{units.rate(c.baseline, reason.unit)}, {units.change(-c.change)} "
                f"(fails below -{units.percent(c.threshold)})"
            )
        else:
            figures.append(
                f"peak memory {units.nbytes(c.current)} against {units.nbytes(c.baseline)}, "
                f"{units.change(c.change)} (fails above +{units.percent(c.threshold)})"
            )
    runs = "its last run" if reason.runs == 1 else f"its last {reason.runs} runs"
    return (
        f"creep: worse than the best of {runs} on this machine in the history "
        f"({commit}{reason.best_recorded.replace('T', ' ')[:16]}): {'; '.join(figures)}"
    )


def reason_text(reason: Reason) -> str:
    """One of the gate's reasons as a sentence."""
    if isinstance(reason, Creep):
        return _creep(reason)
    if isinstance(reason, MachineDrift):
        if reason.verdicts is None:
            return f"{_machine(reason.ratio)}; throughput compared after allowing for it"
        measured, allowed, twice = reason.verdicts
        return (
            f"{_machine(reason.ratio)} (calibration workload), and the verdict depends on how "
            f"much of that reached this benchmark: {measured} as measured, {allowed} allowing "
            f"for all of it, {twice} for twice it; re-run it when the machine is as fast as when "
            "the baseline was recorded"
        )
    if isinstance(reason, SoftwareChanged):
        return "software changed, so times are also compared as measured, without calibration"
    if isinstance(reason, CalibrationChanged):
        return (
            f"the calibration workload changed since the baseline was recorded "
            f"({reason.baseline_unit} -> {reason.current_unit}), so the machine's speed is not "
            "allowed for: throughput compared as measured; record the baseline again "
            "(--cnnperf-save) to compare allowing for it"
        )
    if isinstance(reason, Disturbed):
        return _disturbed(reason)
    if isinstance(reason, UntrustworthyGpu):
        return "untrustworthy GPU state: " + "; ".join(reason.problems)
    if isinstance(reason, SamplingChanged):
        where = {True: "inside one process", False: "in separate processes"}
        return (
            f"the baseline's samples were taken {where[reason.baseline_in_process]}, these "
            f"{where[reason.current_in_process]}"
        )
    if isinstance(reason, NoBaseline):
        text = f"{NO_BASELINE} for {reason.machine or 'this kind of machine'}"
        if reason.elsewhere:
            text += f"; baselines of it exist for {', '.join(reason.elsewhere)}"
        return text
    if isinstance(reason, NewGraphBreaks):
        new = "; ".join(graph_break(b) for b in reason.breaks)
        return (
            f"graph breaks: {reason.count} now, {reason.baseline_count} in the baseline; new: {new}"
        )
    if isinstance(reason, Recompiled):
        parts = []
        why = ""
        if reason.reasons:
            more = len(reason.reasons) - 1
            why = f" ({reason.reasons[0]}" + (f"; {more} more" if more else "") + ")"
        if reason.recompiles:
            parts.append(
                f"torch.compile recompiled {reason.recompiles} time"
                f"{'' if reason.recompiles == 1 else 's'} during the timed steps{why}"
            )
        if reason.eager_frames:
            frames = reason.eager_frames
            parts.append(
                f"gave up on {frames} frame{'' if frames == 1 else 's'} after too many "
                f"recompiles and ran {'it' if frames == 1 else 'them'} eagerly"
                + (why if not parts else "")
            )
        return (
            "recompiles: "
            + ", and ".join(parts)
            + ": the steady figure is not the compiled step's; keep the shapes and the Python "
            "values the model branches on the same from step to step"
        )
    if isinstance(reason, SlowerCompile):
        change = reason.current_s / reason.baseline_s - 1
        return (
            f"compile time: {units.seconds(reason.current_s)} now, "
            f"{units.seconds(reason.baseline_s)} in the baseline ({reason.cache} cache): "
            f"{units.change(change)} (fails above +{units.percent(reason.threshold)})"
        )
    if isinstance(reason, CudaGraphsSkipped):
        graphs = f"{reason.count} compiled graph{'' if reason.count == 1 else 's'}"
        if reason.device.startswith("cuda"):
            return f"CUDA graphs were skipped for {graphs}; TORCH_LOGS=cudagraphs says why"
        return (
            f"{graphs} ran without CUDA graphs: there are none on the {reason.device.upper()}, "
            "so this mode measured the same code as mode='default'"
        )
    return reason.text


def notes(decision: Decision, compile_failures: bool = True) -> list[str]:
    """The reasons worth a note beside a verdict (that there is no baseline goes without
    saying next to "new"); ``compile_failures=False`` leaves out those a failure message
    gives on lines of their own."""
    return [
        reason_text(reason)
        for reason in decision.reasons
        if not isinstance(reason, NoBaseline)
        and not (isinstance(reason, Remark) and reason.text == NO_BASELINE)
        and (compile_failures or not fails_compile(reason))
    ]
