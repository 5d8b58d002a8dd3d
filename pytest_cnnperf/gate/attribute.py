"""From verdict to cause: which operators account for the change between two profiles.

Each operator's time now is compared with its baseline time scaled by how much all the operators'
times changed alike (the median of the ratios of those called as often: a slower machine or a busy
neighbour slows every operator, a code change moves a few and calls some more or less often). An
operator is named only when it moved beyond that by more than twice its noise (measured in both
profiles' steps and processes), a fiftieth of the step and a twentieth of the step's change, in the
change's direction; one that appeared, vanished or is called a different number of times a step
(it changed for certain), when its change is that large without the noise. When none is, the
change is spread thin (the machine, a clock, work outside the operators), and the attribution says
so instead of guessing.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ..model.profile import Attribution, OperatorChange, OperatorTime, PeakParts, Profile

#: how far beyond its noise an operator's change must go to be named
NOISE_FACTOR = 2.0
#: and the least share of the step it must move, so that tiny operators never clutter a message
LEAST_SHARE = 0.02
#: and the least share of the step's change it must account for, in the change's direction: a
#: change spread thin over many operators is the machine's, not one operator's
LEAST_PART = 0.05
#: the operators listed in both profiles it takes to tell the machine's change from the code's:
#: with fewer, the operators' common change is taken as none
LEAST_VOTERS = 5
#: an allocation change worth naming: this many bytes a step, and this share of what it was
LEAST_BYTES = 1 << 20
LEAST_GROWTH = 0.05


def attribute(
    before: Profile,
    after: Profile,
    memory: bool = False,
    peaks: tuple[PeakParts | None, PeakParts | None] = (None, None),
) -> Attribution:
    """What changed from ``before`` (the baseline's profile) to ``after``; ``memory``: the peak
    memory changed too, so name the operators whose allocations grew and say what the ``peaks``
    (the baseline's and the current one's) hold."""
    alike = _alike(before, after)
    # the step's change beyond what the operators' common change (the machine's) explains
    step_change = after.step_s - alike * before.step_s
    floor = LEAST_SHARE * before.step_s
    names = dict.fromkeys([o.name for o in before.operators] + [o.name for o in after.operators])
    changes = []
    for name in names:
        old, new = before.operator(name), after.operator(name)
        # an operator that ran on one side only, or as many times more or less a step, changed
        # for certain: the code calls it differently
        certain = not (before.ran(name) and after.ran(name)) or not _called_alike(old, new)
        if not _stands_out(old, new, alike, 0.0 if certain else NOISE_FACTOR, floor):
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
    explained = None
    if abs(step_change) > floor:
        changes = [dataclasses.replace(c, share=_beyond(c, alike) / step_change) for c in changes]
        changes = [c for c in changes if c.share is not None and c.share >= LEAST_PART]
        explained = sum(_beyond(c, alike) for c in changes) / step_change if changes else 0.0
    # (a step that did not change: the operators that moved either way, which cancel out)
    changes.sort(key=lambda c: abs(_beyond(c, alike)), reverse=True)
    return Attribution(
        step_change_s=step_change,
        changes=tuple(changes),
        explained=explained,
        alike=alike,
        allocations=tuple(_allocations(before, after)) if memory else (),
        peak_before=peaks[0] if memory else None,
        peak_after=peaks[1] if memory else None,
    )


def _stands_out(
    old: OperatorTime | None,
    new: OperatorTime | None,
    alike: float,
    noise_factor: float,
    floor: float,
) -> bool:
    """Whether an operator's change goes beyond ``noise_factor`` times its noise and the floor:
    its time beyond what the operators' common change gives, or its whole time where it is
    listed on one side only."""
    if old is not None and new is not None:
        beyond = new.seconds - alike * old.seconds
        noise = math.hypot(alike * old.spread, new.spread)
        return abs(beyond) > max(noise_factor * noise, floor)
    alone = new or old
    return alone is not None and alone.seconds > max(noise_factor * alone.spread, floor)


def _called_alike(old: OperatorTime | None, new: OperatorTime | None) -> bool:
    """Whether an operator ran as many times a step on both sides (where both list it)."""
    return old is None or new is None or math.isclose(old.calls, new.calls, rel_tol=0.01)


def _beyond(change: OperatorChange, alike: float) -> float:
    """An operator's change beyond the operators' common change."""
    return (change.after_s or 0.0) - alike * (change.before_s or 0.0)


def _alike(before: Profile, after: Profile) -> float:
    """How much the operators' times changed alike: the median of the time ratios of the
    operators both profiles list as often a step, each one vote (an operator called more or less
    often was changed by the code, not the machine); 1 when fewer than :data:`LEAST_VOTERS`."""
    ratios = [
        new.seconds / old.seconds
        for old in before.operators
        if old.seconds > 0
        and (new := after.operator(old.name)) is not None
        and _called_alike(old, new)
    ]
    return statistics.median(ratios) if len(ratios) >= LEAST_VOTERS else 1.0


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
