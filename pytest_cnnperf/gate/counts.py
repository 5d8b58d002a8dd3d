"""The instruction verdict (``--cnnperf-metric=instructions``): which baseline a count is
compared with, and how.

A count depends on the code, torch's build, Python, and what counted it: the Valgrind, and
the kernels the counting process pinned the libraries to. It does not depend on the host's
CPU, as Valgrind shows every x86-64 host a CPU of its own. So a count is compared with a
baseline counted under the same identity, whichever kind of machine recorded it, and never
with one counted under another: that benchmark is new, both identities named.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Comparison, Environment, Instructions, Result, Verdict

#: how much unchanged code's instructions per step differ between counting processes, at
#: most (docs/validation.md measures it): a larger move is the code's
INSTRUCTIONS_SPREAD = 0.001
#: an identity's part that a count recorded before counts named their Valgrind and kernels
#: does not have
NOT_RECORDED = "not recorded"


def identity(environment: Environment, counts: Instructions) -> dict[str, str]:
    """What decides a count beside the code, by name: ``{"kernels": "no-fma", ...}``. Patch
    releases of Valgrind and Python are left out: they change neither the CPU Valgrind shows
    nor the interpreter's code in ways a step's count follows."""
    counter = counts.counter
    return {
        "architecture": counter.arch if counter else NOT_RECORDED,
        "Valgrind": _minor(counter.valgrind) if counter else NOT_RECORDED,
        "kernels": counter.kernels if counter else NOT_RECORDED,
        "torch": environment.torch,
        "Python": _minor(environment.python),
    }


def identity_changes(
    now: tuple[Environment, Instructions], then: tuple[Environment, Instructions]
) -> tuple[str, ...]:
    """What counted ``now`` otherwise than ``then``: ``("kernels avx2 -> no-fma", ...)``."""
    before, after = identity(*then), identity(*now)
    return tuple(
        f"{name} {before[name]} -> {after[name]}" for name in after if after[name] != before[name]
    )


def counted_reference(
    environment: Environment,
    counts: Instructions | None,
    own: Result | None,
    others: Sequence[Result],
) -> Result | None:
    """The baseline a count is compared with: this kind of machine's where it was counted as
    ``counts`` were, else the first of ``others`` (other kinds') that was, else this kind's
    (which the gate then calls new, naming what differs)."""

    def same(entry: Result) -> bool:
        then = entry.measured.instructions
        return (
            counts is not None
            and then is not None
            and entry.environment is not None
            and not identity_changes((environment, counts), (entry.environment, then))
        )

    if own is not None and same(own):
        return own
    return next((entry for entry in others if same(entry)), own)


def compare_instructions(
    baseline: Instructions, current: Instructions, threshold: float
) -> Comparison:
    """Instructions per step against the reference's: counts have no noise to test, so a growth
    past ``threshold`` is a regression and a drop past it an improvement."""
    base, now = baseline.per_step, current.per_step
    change = now / base - 1 if base else 0.0
    if change > threshold:
        verdict = Verdict.REGRESSED
    elif change < -threshold:
        verdict = Verdict.IMPROVED
    else:
        verdict = Verdict.OK
    return Comparison(
        metric="instructions",
        baseline=base,
        current=now,
        change=change,
        threshold=threshold,
        verdict=verdict,
        baseline_samples=len(baseline.steps),
        current_samples=len(current.steps),
    )


#: operators named where instructions changed; a change smaller than this share of the step's
#: is not named
OPERATORS_NAMED, SMALLEST_SHARE = 5, 0.01


def operator_counts(
    baseline: Instructions, current: Instructions
) -> tuple[tuple[str, int, int], ...]:
    """The operators whose instructions changed most, callees included. An operator and the
    ones it calls (``conv2d`` > ``convolution`` > ``mkldnn_convolution``) carry the same change:
    only the first of a chain of changes within 2% of each other is named."""
    before = {o.name: o.instructions for o in baseline.operators}
    now = {o.name: o.instructions for o in current.operators}
    least = SMALLEST_SHARE * baseline.per_step
    deltas = sorted(
        ((name, before.get(name, 0), now.get(name, 0)) for name in {*before, *now}),
        key=lambda row: (-abs(row[2] - row[1]), -row[2]),
    )
    named: list[tuple[str, int, int]] = []
    for name, old, new in deltas:
        delta = new - old
        if abs(delta) < least or len(named) == OPERATORS_NAMED:
            break
        if any(abs(delta - (n - o)) <= 0.02 * abs(n - o) for _, o, n in named):
            continue  # the same change again, seen through the operator it calls
        named.append((name, old, new))
    return tuple(named)


def _minor(version: str) -> str:
    """``3.19`` of ``3.19.0``."""
    return ".".join(version.split(".")[:2])
