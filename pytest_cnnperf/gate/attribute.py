"""From verdict to cause: which operators account for the change between two profiles.

Every operator's time is first compared with what a machine running all of them alike would give
(the median of the operators' time ratios: a slower clock scales them all, a code change moves a
few). An operator is named only when its change beyond that exceeds three times the two profiles'
own step-to-step spread for it and a hundredth of the step; an operator that appeared or vanished
is named when its time does. When none is, the change was spread thin (the machine, a clock, or
work outside the operators), and the attribution says so instead of guessing.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ..model.profile import Attribution, OperatorChange, OperatorTime, Profile

#: how far beyond its noise an operator's change must go to be named
NOISE_FACTOR = 3.0
#: and the least share of the step it must move, so that tiny operators never clutter a message
LEAST_SHARE = 0.01
#: operators below this share of the step do not vote on how much the machine changed
VOTING_SHARE = 0.005
#: an allocation change worth naming: this many bytes a step, and this share of what it was
LEAST_BYTES = 1 << 20
LEAST_GROWTH = 0.05


def attribute(before: Profile, after: Profile, trace: str | None = None) -> Attribution:
    """What changed from ``before`` (the baseline's profile) to ``after``."""
    common = _common_ratio(before, after)
    step_change = after.step_s - before.step_s
    floor = LEAST_SHARE * before.step_s
    names = dict.fromkeys([o.name for o in before.operators] + [o.name for o in after.operators])
    changes = []
    for name in names:
        old, new = before.operator(name), after.operator(name)
        if not _stands_out(old, new, common, floor):
            continue
        either = new or old
        changes.append(
            OperatorChange(
                name=name,
                before_s=old.seconds if old else None,
                after_s=new.seconds if new else None,
                new=old is None and not before.ran(name),
                gone=new is None and not after.ran(name),
                module=either.module if either else None,
            )
        )
    changes.sort(key=lambda c: abs(c.change_s), reverse=True)
    if step_change and abs(step_change) > 1e-12:
        changes = [_with_share(c, step_change) for c in changes]
    explained = sum(c.change_s for c in changes) / step_change if changes and step_change else 0.0
    return Attribution(
        step_change_s=step_change,
        changes=tuple(changes),
        explained=explained,
        common=common,
        allocations=tuple(_allocations(before, after)),
        trace=trace,
    )


def _stands_out(
    old: OperatorTime | None, new: OperatorTime | None, common: float, floor: float
) -> bool:
    """Whether an operator's change goes beyond its noise and the floor: its time beyond what
    the common ratio gives, or its whole time where it is listed on one side only."""
    if old is not None and new is not None:
        beyond = new.seconds - common * old.seconds
        return abs(beyond) > max(NOISE_FACTOR * math.hypot(old.spread, new.spread), floor)
    alone = new or old
    return alone is not None and alone.seconds > max(NOISE_FACTOR * alone.spread, floor)


def _with_share(change: OperatorChange, step_change: float) -> OperatorChange:
    return dataclasses.replace(change, share=change.change_s / step_change)


def _common_ratio(before: Profile, after: Profile) -> float:
    """How much every operator's time changed alike: the median of the time ratios of the
    operators both profiles list above a small share of the step (1 when there are none)."""
    least = VOTING_SHARE * before.step_s
    ratios = [
        new.seconds / old.seconds
        for old in before.operators
        if old.seconds > least and (new := after.operator(old.name)) is not None
    ]
    return statistics.median(ratios) if ratios else 1.0


def _allocations(before: Profile, after: Profile) -> list[OperatorChange]:
    """The operators whose allocations a step grew by at least 1 MiB and 5%, largest first."""
    grown = []
    for new in after.operators:
        old = before.operator(new.name)
        was = old.allocated_bytes if old else 0
        if new.allocated_bytes - was >= max(LEAST_BYTES, LEAST_GROWTH * was):
            grown.append(
                OperatorChange(
                    name=new.name,
                    before_s=None,
                    after_s=None,
                    module=new.module,
                    before_bytes=was,
                    after_bytes=new.allocated_bytes,
                )
            )
    grown.sort(key=lambda c: (c.after_bytes or 0) - (c.before_bytes or 0), reverse=True)
    return grown
