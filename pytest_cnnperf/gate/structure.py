"""The exact signals beside the clock: a step's counts and numbers against its reference's.

Counts have no noise: identical code calls the same operators as often, so any change is
reported, and a gated kind that grew (by default a host-device synchronisation) fails the
benchmark without a sample or a threshold more. The first steps' numbers differ within a
tolerance of the device and precision; beyond it the step computes something else, which is
said beside the verdict (and fails in strict mode).
"""

from __future__ import annotations

from ..model import Measurement, Reason
from ..model.findings import ComputesOtherwise, NotCounted, StructureChanged, StructureRegressed
from ..model.structure import CountChange, changes, numbers_differ
from .policy import GateSettings


def judge(
    measurement: Measurement, reference: Measurement, settings: GateSettings
) -> tuple[bool, tuple[Reason, ...]]:
    """Whether the counts regressed, and the reasons to report: the gated counts that grew,
    the other changes, the numbers that differ. A side without counts (or numbers) compares
    nothing."""
    reasons: list[Reason] = []
    regressed = False
    before, after = reference.structure, measurement.structure
    if before is not None and after is not None:
        found = changes(before, after)
        gated = _gated(found, settings)
        if gated:
            regressed = True
            reasons.append(StructureRegressed(gated, settings.allowed_syncs))
        rest = tuple(c for c in found if c not in gated and c.kind != "op")
        # an operator's total changes with every cast or sync named above: only the others
        named = {c.name.split(" ")[0] for c in found if c.kind != "op"}
        rest += tuple(c for c in found if c.kind == "op" and c not in gated and c.name not in named)
        varying = tuple(sorted(set(before.varying) | set(after.varying)))
        if rest or varying:
            reasons.append(StructureChanged(rest, varying))
    elif before is not None and measurement.structure_error:
        reasons.append(NotCounted(measurement.structure_error))
    if reference.numbers is not None and measurement.numbers is not None:
        differ = numbers_differ(reference.numbers, measurement.numbers)
        if differ is not None:
            reasons.append(ComputesOtherwise(differ, strict=settings.strict))
    return regressed, tuple(reasons)


def _gated(found: tuple[CountChange, ...], settings: GateSettings) -> tuple[CountChange, ...]:
    """The changes that fail: gated kinds that grew, past the syncs the test allows."""
    grown = [c for c in found if c.kind in settings.structure and c.more > 0]
    syncs = [c for c in grown if c.kind == "sync"]
    if syncs and sum(c.more for c in syncs) <= settings.allowed_syncs:
        grown = [c for c in grown if c.kind != "sync"]
    return tuple(grown)
