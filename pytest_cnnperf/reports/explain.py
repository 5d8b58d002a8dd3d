"""The words a benchmark's reader gets: failure messages, one-line verdict explanations and the
notes beside a verdict (the gate's reasons word themselves: ``model.decision``)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ..model import (
    Comparison,
    CompileComparison,
    Creep,
    Decision,
    Measurement,
    NoBaseline,
    OperatorCountsChanged,
    Remark,
    Result,
    Verdict,
    units,
)
from ..model.because import plural
from ..store.locations import display_path
from .loader import InputFigures
from .text import some

#: the fix for an inconclusive verdict, against a baseline or a revision
MEASURE_MORE = (
    "  Re-run it, measure more with --cnnperf-effort=thorough, or widen the threshold "
    "with @pytest.mark.cnnperf(threshold=...)."
)


def save_command(nodeid: str) -> str:
    return f"pytest --cnnperf --cnnperf-save {shlex.quote(nodeid)}"


def accept_creep_command(nodeid: str, save: bool = False) -> str:
    also = " --cnnperf-save" if save else ""
    return f"pytest --cnnperf{also} --cnnperf-creep-accept {shlex.quote(nodeid)}"


def reference(decision: Decision) -> str:
    """Where the figures compared with were measured, as a failure message says it: ``in the
    baseline``, or ``at main (0123456789)``."""
    return f"at {decision.against.base}" if decision.against else "in the baseline"


def compared(results: Sequence[Result]) -> list[str]:
    """What the session compared, when it gated against a revision: one line each."""
    seen = dict.fromkeys(a for r in results if r.decision and (a := r.decision.against))
    return [
        f"gated against {a.base} measured in this run: {a.base.subject or a.base.sha}; the code "
        f"under test is {a.head}"
        for a in seen
    ]


def fails_at(comparison: Comparison) -> str:
    """Where a comparison fails: ``fails below -10%`` (throughput), ``fails above +5%`` (what
    grows: memory, instructions)."""
    if comparison.metric == "throughput":
        return f"fails below -{units.percent(comparison.threshold)}"
    return f"fails above +{units.percent(comparison.threshold)}"


def comparison_lines(
    comparison: Comparison, unit: str, where: str = "in the baseline", gated: bool = True
) -> list[str]:
    """A comparison's figures and evidence; ``where``: where the figures compared with were
    measured (:func:`reference`); ``gated``: whether the comparison decided (a throughput
    beside instruction counts is reported only)."""
    if comparison.metric == "throughput":
        measured = (
            f"throughput  {units.rate(comparison.current, unit)} now, "
            f"{units.rate(comparison.baseline, unit)} {where}: "
        )
        if not gated:
            raw = units.change(-(comparison.raw_change or comparison.change))
            return [
                f"{measured}{raw} as measured (reported, not gated: instructions gate throughput)"
            ]
        if comparison.machine_factor != 1.0 and comparison.raw_change is not None:
            measured += (
                f"{units.change(-comparison.raw_change)} as measured, "
                f"{units.change(-comparison.change)} allowing for the machine's speed"
            )
        else:
            measured += units.change(-comparison.change)
        lines = [f"{measured} ({fails_at(comparison)})"]
        lines += [f"            {line}" for line in comparison.evidence()]
        return lines
    if comparison.metric == "instructions":
        return [
            f"instructions {units.count(round(comparison.current))} a step now, "
            f"{units.count(round(comparison.baseline))} {where}: "
            f"{units.change(comparison.change)} ({fails_at(comparison)}; counted under "
            "callgrind: no noise)"
        ]
    return [
        f"memory      {units.nbytes(comparison.current)} now, "
        f"{units.nbytes(comparison.baseline)} {where} at peak: "
        f"{units.change(comparison.change)} ({fails_at(comparison)})"
    ]


def compile_failures(decision: Decision) -> list[str]:
    """What failed a compiled benchmark: ``graph breaks``, ``recompiles``, ``compile time``."""
    return [failed for r in decision.reasons if (failed := r.fails_as)]


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
    breaks = plural(comparison.graph_breaks, "graph break")
    if comparison.baseline_graph_breaks is not None:
        breaks += f" ({comparison.baseline_graph_breaks} in the baseline)"
    recompiles = plural(comparison.recompiles, "recompile")
    before = comparison.warmup_recompiles
    line2 = f"            {breaks}, {recompiles} during the timed steps"
    if before:
        line2 += f" ({before} before them)"
    if comparison.eager_frames:
        frames = comparison.eager_frames
        line2 += f", {plural(frames, 'frame')} run eagerly"
    return [line, line2]


def failure(result: Result) -> str:
    """Why ``result`` fails its test, with the numbers, the baseline file and the fix."""
    decision = result.decision
    assert decision is not None
    return "\n".join(
        [
            _what_failed(result.key, decision),
            *_evidence(decision, result.unit, _input_line(result)),
            *_fixes(result.test_id, decision),
        ]
    )


def _regressed_metrics(decision: Decision) -> list[str]:
    gated = (decision.instructions or decision.throughput, decision.memory)
    return [c.metric for c in gated if c and c.verdict is Verdict.REGRESSED]


def operator_rows(decision: Decision) -> list[tuple[str, str]]:
    """Which operators changed, as ``(label, row)``: the attribution's top changes and the
    trace that shows them, then the operator counts that changed (``operators`` labels each
    block's first row)."""
    blocks = [decision.attribution.lines()] if decision.attribution else []
    blocks += [r.lines() for r in decision.reasons if isinstance(r, OperatorCountsChanged)]
    rows = [("" if i else "operators", row) for block in blocks for i, row in enumerate(block)]
    if decision.attribution and decision.attribution.trace:
        rows.insert(len(blocks[0]), ("trace", display_path(decision.attribution.trace)))
    return rows


def _what_failed(key: str, decision: Decision) -> str:
    head = f"cnnperf: {key}"
    compiled = compile_failures(decision)
    if decision.verdict is Verdict.REGRESSED:
        metrics = _regressed_metrics(decision) + compiled
        what = [" and ".join(metrics)] if metrics else []
        creep = decision.creep
        if creep is not None:
            metrics_text = (
                creep.metrics if isinstance(creep, Creep) else "throughput or peak memory"
            )
            what.append(f"{metrics_text} against the best of its recent runs in the history")
        return f"{head} regressed ({'; '.join(what)})"
    if compiled:
        return f"{head} failed ({' and '.join(compiled)})"
    if decision.verdict is Verdict.NEW and decision.against:
        return (
            f"{head} is not at {decision.against.base}, so nothing was compared (strict mode "
            "fails benchmarks without a reference)"
        )
    if decision.verdict is Verdict.NEW:
        line = (
            f"{head} has no baseline in {decision.baseline_file} "
            "(strict mode fails benchmarks without one)"
        )
        missing = decision.no_baseline
        return line + (f"\n  note: {missing}" if missing and missing.elsewhere else "")
    if decision.verdict is Verdict.INCONCLUSIVE:
        return (
            f"{head} is inconclusive (strict mode fails it): its samples could not tell, by the "
            "last look, whether it changed by the threshold or not"
        )
    return f"{head}: the environment differs from the baseline's (strict mode)"


def _input_line(result: Result) -> str | None:
    """A loop's input figures, as a failure message's line: ``input  input-bound: the step
    waited 71% of the time for data; the model alone runs 3.4x faster`` (and the reference's
    wait where it was measured in the same run)."""
    figures = InputFigures.of(result.measurement)
    if figures is None:
        return None
    line = f"input       {figures.verdict()}"
    decision = result.decision
    then = InputFigures.of(decision.reference) if decision else None
    if decision is not None and then is not None:
        line += f" ({then.wait_share:.0%} {reference(decision)})"
    return line


def _evidence(decision: Decision, unit: str, input_line: str | None = None) -> list[str]:
    """The figures and notes under a failure's first line (``input_line``: a loop's input
    figures, under its throughput)."""
    lines: list[str] = []
    where = reference(decision)
    if decision.instructions:
        lines += ["  " + line for line in comparison_lines(decision.instructions, unit, where)]
    if decision.throughput:
        gated = decision.instructions is None
        lines += [
            "  " + line for line in comparison_lines(decision.throughput, unit, where, gated=gated)
        ]
    if input_line:
        lines.append("  " + input_line)
    if decision.memory:
        lines += ["  " + line for line in comparison_lines(decision.memory, unit, where)]
    if decision.compile:
        lines += ["  " + line for line in compile_lines(decision.compile)]
    lines += [f"  {label:<12}{row}" for label, row in operator_rows(decision)]
    lines += [f"  {reason}" for reason in decision.reasons if reason.fails_as]
    lines += [f"  environment changed: {change}" for change in decision.environment_changes]
    lines += [f"  note: {note}" for note in notes(decision, compile_failures=False)]
    missing = decision.no_baseline
    if decision.against:
        lines.append(f"  against     {decision.against}")
    if decision.baseline_file and missing is None:
        lines.append(f"  baseline    {decision.baseline_file}")
    elif decision.baseline_file and decision.verdict is not Verdict.NEW:
        lines.append(f"  no baseline in {decision.baseline_file}")
    return lines


def _fixes(test_id: str, decision: Decision) -> list[str]:
    """What the user can do about it: the commands that accept it, or measure more."""
    lines: list[str] = []
    compiled = compile_failures(decision)
    creep = decision.creep
    missing = decision.no_baseline
    if decision.against is not None:
        return _fixes_against(decision)
    if decision.verdict is Verdict.INCONCLUSIVE:
        lines.append(MEASURE_MORE)
    if creep and _regressed_metrics(decision):
        lines.append(
            "  To accept it as the new baseline and in the history, run: "
            + accept_creep_command(test_id, save=True)
        )
    elif creep:
        lines.append("  To accept it, run: " + accept_creep_command(test_id))
    if missing is not None and "recompiles" in compiled:
        lines.append(
            "  No baseline is recorded while it recompiles: its steady figure would include "
            "compiling."
        )
    elif missing is not None:
        lines.append("  Record one with: " + save_command(test_id))
    elif compiled or not creep:  # what the creep gate's command does not accept
        lines.append("  To accept this as the new baseline, run: " + save_command(test_id))
    if missing and missing.shareable:
        lines.append("  " + _share_hint(missing.shareable))
    return lines


def _fixes_against(decision: Decision) -> list[str]:
    """What to do about a benchmark gated against a revision: nothing is recorded to accept."""
    assert decision.against is not None
    base = decision.against.base
    if decision.verdict is Verdict.INCONCLUSIVE:
        return [MEASURE_MORE]
    if decision.verdict is Verdict.NEW:
        return ["  Gate it against a revision that has it, or leave --cnnperf-strict off."]
    return [
        f"  Compared with {base} in the same run, so the machine's speed is not the cause. If "
        "the change is intended, merge it: what is merged is what later runs are gated "
        "against. --cnnperf-trace=DIR writes the profiled steps to look at."
    ]


def _share_hint(machines: Sequence[str]) -> str:
    example = machines[0]
    others = " or ".join(machines)
    return (
        f"Or, if this machine is of the same kind as {others}, share its baselines: "
        f"--cnnperf-machine={example} (or cnnperf_machine = {example} in the ini file)."
    )


def missing_baselines(results: Sequence[Result]) -> list[str]:
    """For a session's summary: which benchmarks have no baseline on this kind of machine,
    where they were looked for, which machines have them, and the two fixes."""
    missing = [
        (d, reason) for r in results if (d := r.decision) and (reason := d.no_baseline) is not None
    ]
    if not missing:
        return []
    machines = sorted({reason.machine for _, reason in missing})
    files = sorted({d.baseline_file for d, _ in missing if d.baseline_file})
    count = len(missing)
    where = some(files, 3)
    lines = [
        f"{plural(count, 'benchmark')} had no baseline for this kind of machine "
        f"({', '.join(machines)}); looked in {where or 'no file'}"
    ]
    elsewhere: dict[str, int] = {}
    kernels: dict[str, str] = {}
    for _, reason in missing:
        differences = reason.differences or ("",) * len(reason.elsewhere)
        for machine, difference in zip(reason.elsewhere, differences, strict=False):
            elsewhere[machine] = elsewhere.get(machine, 0) + 1
            if difference:
                kernels[machine] = difference
    if elsewhere:
        found = ", ".join(
            f"{m} ({n} of {count}" + (f"; {kernels[m]}: other kernels)" if m in kernels else ")")
            for m, n in sorted(elsewhere.items())
        )
        lines.append(f"  baselines of them exist for other kinds of machine: {found}")
    lines.append(
        "  Record them for this machine: run the same command with --cnnperf-save, and commit "
        "the files it writes."
    )
    shareable = [m for m in sorted(elsewhere, key=lambda m: -elsewhere[m]) if m not in kernels]
    if shareable:
        lines.append("  " + _share_hint(shareable))
    elif elsewhere:
        lines.append(
            "  Another kind's baselines are not shared with this one: the hardware that picks "
            "the kernels differs, so its figures say nothing about this machine's."
        )
    else:
        lines.append(
            "  Or, to share baselines between runners of one class whose machine names differ, "
            "name the kind with --cnnperf-machine=NAME (or cnnperf_machine in the ini file)."
        )
    return lines


def headline(result: Result) -> str:
    """One line per benchmark for ``-v``: the verdict and the main figure."""
    m, d = result.measurement, result.decision
    if m is None:
        return f"{result.verdict}: {result.error or ''}"
    text = (
        f"{result.verdict}: {units.rate(m.items_per_second, m.unit)}, "
        f"step {units.seconds(m.step_time_s)}"
    )
    if m.peak_allocated_bytes is not None:
        text += f", peak {units.nbytes(m.peak_allocated_bytes)}"
    figures = InputFigures.of(m)
    if figures is not None:
        text += f", waited {figures.wait_share:.0%} for input"
    if d and d.throughput:
        text += f" ({units.change(-d.throughput.change)} vs baseline)"
    missing = d.no_baseline if d else None
    if missing:
        text += f" ({missing})"
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
        + f"{plural(breaks, 'graph break')}, "
        + plural(recompiles, "recompile")
    )
    if m.recompiles:
        text += f" ({m.recompiles} while timed)"
    if m.eager_frames:
        text += f", {plural(m.eager_frames, 'frame')} run eagerly"
    return text


def notes(decision: Decision, compile_failures: bool = True) -> list[str]:
    """The reasons worth a note beside a verdict (that there is no baseline goes without
    saying next to "new"); ``compile_failures=False`` leaves out those a failure message
    gives on lines of their own."""
    return [
        str(reason)
        for reason in decision.reasons
        if not isinstance(reason, NoBaseline | OperatorCountsChanged)
        and not (isinstance(reason, Remark) and reason.role == "no-baseline")
        and (compile_failures or not reason.fails_as)
    ]
