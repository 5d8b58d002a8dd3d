"""The words a benchmark's reader gets: failure messages, one-line verdict explanations, and
the gate's reasons (``results.Reason``) as sentences."""

from __future__ import annotations

import os
import shlex

from . import units
from .results import (
    BenchmarkResult,
    Comparison,
    Creep,
    Decision,
    Disturbance,
    Disturbed,
    MachineDrift,
    NoBaseline,
    Reason,
    Remark,
    SamplingChanged,
    SoftwareChanged,
    UntrustworthyGpu,
    Verdict,
)

NO_BASELINE = "no baseline"


def display_path(path: os.PathLike[str] | str) -> str:
    """A path as a user reads it: relative to the current folder where that works."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return os.fspath(path)


def save_command(nodeid: str) -> str:
    return f"pytest --cnnperf --cnnperf-save {shlex.quote(nodeid)}"


def accept_creep_command(nodeid: str, save: bool = False) -> str:
    also = " --cnnperf-save" if save else ""
    return f"pytest --cnnperf{also} --cnnperf-creep-accept {shlex.quote(nodeid)}"


def creep_of(decision: Decision) -> Creep | None:
    """The creep gate's reason, when it failed the benchmark."""
    return next((r for r in decision.reasons if isinstance(r, Creep)), None)


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


def failure(result: BenchmarkResult, alpha: float) -> str:
    """Why ``result`` fails its test, with the numbers, the baseline file and the fix."""
    decision = result.decision
    unit = result.config.unit
    head = f"cnnperf: {result.key}"
    lines: list[str] = []
    creep = creep_of(decision)
    baseline_regressed = [
        c.metric
        for c in (decision.throughput, decision.memory)
        if c and c.verdict is Verdict.REGRESSED
    ]
    if decision.verdict is Verdict.REGRESSED:
        what = list(baseline_regressed)
        if creep:
            metrics = " and ".join(c.metric for c in creep.comparisons)
            what.append(f"{metrics} against the best of its recent runs in the history")
        lines.append(f"{head} regressed ({'; '.join(what)})")
    elif decision.verdict is Verdict.NEW:
        lines.append(
            f"{head} has no baseline in {decision.baseline_file} "
            "(strict mode fails benchmarks without one)"
        )
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
    for change in decision.environment_changes:
        lines.append(f"  environment changed: {change}")
    for note in notes(decision):
        lines.append(f"  note: {note}")
    if decision.baseline_file and decision.verdict is not Verdict.NEW:
        lines.append(f"  baseline    {decision.baseline_file}")
    if decision.verdict is Verdict.INCONCLUSIVE:
        lines.append(
            "  Re-run it, measure more with --cnnperf-effort=thorough, or widen the threshold "
            "with @pytest.mark.cnnperf(threshold=...)."
        )
    if creep and not baseline_regressed:
        lines.append("  To accept it, run: " + accept_creep_command(result.test_id))
    elif creep:
        lines.append(
            "  To accept it as the new baseline and in the history, run: "
            + accept_creep_command(result.test_id, save=True)
        )
    else:
        lines.append(
            "  To accept this as the new baseline, run: " + save_command(result.test_id)
            if decision.verdict is not Verdict.NEW
            else "  Record one with: " + save_command(result.test_id)
        )
    return "\n".join(lines)


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
    return text


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
        return NO_BASELINE
    return reason.text


def notes(decision: Decision) -> list[str]:
    """The reasons worth a note beside a verdict (that there is no baseline goes without
    saying next to "new")."""
    return [
        reason_text(reason)
        for reason in decision.reasons
        if not isinstance(reason, NoBaseline)
        and not (isinstance(reason, Remark) and reason.text == NO_BASELINE)
    ]
