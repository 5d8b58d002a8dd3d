"""What ``cnnperf bisect`` prints and writes: a line per commit measured, the first bad commit
with the operators it changed, as terminal text, Markdown for an issue or a pull-request comment,
and JSON (``first_bad``: the full sha)."""

from __future__ import annotations

from typing import Any

from ..model import Comparison, Result, Verdict, units
from ..model.because import plural
from ..revision.bisect import FOUND, NOTHING, RANGE, UNSURE, Bisection, Step
from ..store.codec import dump
from . import markdown as md

#: ``cnnperf bisect --json``'s schema
SCHEMA, VERSION = "pytest-cnnperf/bisect", 1

OUTCOMES = {FOUND: "found", NOTHING: "no regression", RANGE: "a range", UNSURE: "inconclusive"}


def change(result: Result | None) -> str:
    """``-27.4% (-31.0% to -22.1%)``: the throughput change and its bounds, then memory's."""
    decision = result.decision if result else None
    if decision is None:
        return "-"
    parts = []
    if decision.throughput is not None:
        parts.append(_throughput(decision.throughput))
    if decision.memory is not None and decision.memory.verdict is not Verdict.OK:
        parts.append(f"memory {units.change(decision.memory.change)}")
    return ", ".join(parts) or "-"


def _throughput(c: Comparison) -> str:
    text = units.change(-c.change)
    if c.low is not None and c.high is not None:
        text += f" ({units.change(-c.high)} to {units.change(-c.low)})"
    return text


def step_line(step: Step, left: int | None = None) -> str:
    """One commit measured: ``bisect  0123456789 Subject  regressed  -27.4% (...)  14.2 s``."""
    role = {"confirm": "BAD", "bisect": "step", "explain": "explain"}[step.role]
    outcome = {True: "bad", False: "good", None: f"skipped: {step.why}"}[step.bad]
    if step.role == "explain":
        outcome = f"against its parent {step.against.short}"
    subject = step.commit.subject[:48]
    line = (
        f"{role:<8}{step.commit.short}  {subject:<48}  {step.verdict:<12} "
        f"{change(step.result):<30} {step.seconds:5.1f} s  {outcome}"
    )
    if left is not None and step.role != "explain":
        line += f" ({plural(left, 'step')} left, about)"
    return line


def lines(bisection: Bisection) -> list[str]:
    """The whole report, after the progress lines."""
    b = bisection
    out = [f"benchmark: {b.test_id} [{b.key}]", f"GOOD {b.good}, BAD {b.bad}"]
    out += [step_line(step) for step in b.steps]
    out.append("")
    if b.status == NOTHING:
        out.append(
            f"no regression from GOOD to BAD: {change(b.confirmation.result)}; nothing bisected"
        )
    elif b.status == UNSURE:
        out.append(
            "BAD against GOOD was inconclusive: its samples could not tell whether it changed by "
            "the threshold; nothing bisected. Re-run it on a quieter machine, or with "
            "--cnnperf-effort=thorough among the pytest arguments"
        )
    elif b.status == RANGE:
        skipped = {s.commit.sha: s.why for s in b.steps if s.bad is None}
        out.append(
            f"the first bad commit is one of {len(b.suspects)}, the others could not be told:"
        )
        out += [
            f"  {r.short} {r.subject}"
            + (f" (skipped: {skipped[r.sha]})" if r.sha in skipped else "")
            for r in b.suspects
        ]
    elif b.first_bad is not None:
        out.append(f"first bad commit: {b.first_bad.sha} {b.first_bad.subject}")
        explanation = b.explanation
        if explanation is not None and explanation.result is not None:
            out.append(f"  against its parent: {explanation.verdict}, {change(explanation.result)}")
            decision = explanation.result.decision
            if decision is not None and decision.attribution is not None:
                out += [f"  {row}" for row in decision.attribution.lines(8)]
    return out


def render_markdown(bisection: Bisection) -> str:
    """The report as Markdown, for an issue or a pull-request comment."""
    b = bisection
    if b.status == FOUND and b.first_bad is not None:
        title = (
            f"### 🔎 cnnperf bisect: {md.code(b.first_bad.short)} {md.text(b.first_bad.subject)}"
        )
    else:
        title = f"### 🔎 cnnperf bisect: {OUTCOMES.get(b.status, 'no result')}"
    rows = [
        title,
        "",
        f"{md.code(b.test_id)} ({md.text(b.key)}), GOOD {md.code(b.good.short)}, "
        f"BAD {md.code(b.bad.short)}",
        "",
        "| | commit | subject | verdict | change | time |",
        "|---|---|---|---|--:|--:|",
    ]
    for step in b.steps:
        rows.append(
            f"| {step.role} | {md.code_cell(step.commit.short)} | {md.text(step.commit.subject)} "
            f"| {md.text(step.verdict if step.bad is not None else f'skipped: {step.why}')} "
            f"| {md.text(change(step.result))} | {step.seconds:.0f} s |"
        )
    rows.append("")
    rows += [md.text(line) for line in lines(b)[len(b.steps) + 3 :] if line]
    return "\n".join(rows) + "\n"


def document(bisection: Bisection) -> dict[str, Any]:
    """``--json``: the whole bisection, ``first_bad`` the full sha (``null``: none found)."""
    b = bisection
    explanation = b.explanation
    attribution = None
    if explanation and explanation.result and explanation.result.decision:
        found = explanation.result.decision.attribution
        attribution = dump(found) if found is not None else None
    return {
        "schema": SCHEMA,
        "schema_version": VERSION,
        "first_bad": b.first_bad.sha if b.first_bad else None,
        "outcome": OUTCOMES.get(b.status, "error"),
        "exit_status": b.status,
        "good": dump(b.good),
        "bad": dump(b.bad),
        "benchmark": {"test_id": b.test_id, "key": b.key},
        "confirmation": dump(b.confirmation),
        "steps": [dump(step) for step in b.steps],
        "suspects": [r.sha for r in b.suspects],
        "attribution": attribution,
    }
