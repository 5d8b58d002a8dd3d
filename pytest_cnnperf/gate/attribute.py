"""From verdict to cause: which operators account for the change between two profiles.

Each operator's time now is compared with its baseline time on a machine as fast as the calibration
workload found this one (a slower machine slows every operator; a code change moves a few). An
operator is named only when it moved beyond that by more than three times its spread (measured
across the baseline's profiled processes) and a hundredth of the step; one that appeared or
vanished, when its own time is that large. When none is, the change is spread thin (the machine,
a clock, work outside the operators), and the attribution says so instead of guessing.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ..model.profile import Attribution, OperatorChange, OperatorTime, Profile

#: how far beyond its noise an operator's change must go to be named
NOISE_FACTOR = 3.0
#: and the least share of the step it must move, so that tiny operators never clutter a message
LEAST_SHARE = 0.02
#: and the least share of the step's change it must account for: a change spread thin over many
#: operators is the machine's, not one operator's
LEAST_PART = 0.05
#: operators below this share of the step do not vote on how much the machine changed
VOTING_SHARE = 0.005
#: an allocation change worth naming: this many bytes a step, and this share of what it was
LEAST_BYTES = 1 << 20
LEAST_GROWTH = 0.05


def attribute(
    before: Profile, after: Profile, machine: float = 1.0, memory: bool = False
) -> Attribution:
    """What changed from ``before`` (the baseline's profile) to ``after``, on a machine
    ``machine`` times as slow as the baseline's (its calibration workload's time ratio);
    ``memory``: the peak memory changed too, so name the operators whose allocations grew."""
    step_change = after.step_s - before.step_s
    floor = LEAST_SHARE * before.step_s
    names = dict.fromkeys([o.name for o in before.operators] + [o.name for o in after.operators])
    changes = []
    for name in names:
        old, new = before.operator(name), after.operator(name)
        if not _stands_out(old, new, machine, floor):
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
    if abs(step_change) > floor:
        changes = [_with_share(c, step_change) for c in changes]
        changes = [c for c in changes if c.share is not None and abs(c.share) >= LEAST_PART]
    explained = sum(c.change_s for c in changes) / step_change if changes and step_change else 0.0
    return Attribution(
        step_change_s=step_change,
        changes=tuple(changes),
        explained=explained,
        machine=machine,
        alike=_alike(before, after),
        allocations=tuple(_allocations(before, after)) if memory else (),
    )


def _stands_out(
    old: OperatorTime | None, new: OperatorTime | None, machine: float, floor: float
) -> bool:
    """Whether an operator's change goes beyond its noise and the floor: its time beyond what
    the machine's speed gives, or its whole time where it is listed on one side only."""
    if old is not None and new is not None:
        beyond = new.seconds - machine * old.seconds
        noise = math.hypot(machine * old.spread, new.spread)
        return abs(beyond) > max(NOISE_FACTOR * noise, floor)
    alone = new or old
    return alone is not None and alone.seconds > max(NOISE_FACTOR * alone.spread, floor)


def _with_share(change: OperatorChange, step_change: float) -> OperatorChange:
    return dataclasses.replace(change, share=change.change_s / step_change)


def _alike(before: Profile, after: Profile) -> float:
    """How much the operators' times changed alike: the median of the time ratios of the
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
