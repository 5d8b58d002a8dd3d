"""What a step does, exactly: the operators it calls (:class:`Structure`) and the numbers it
computes (:class:`StepNumbers`). Time is noisy; structure is not: the same code on the same torch
calls the same operators as often, so a count that changed is a change of the code, told without
samples or a threshold; and a step that computes less (a block skipped) is told from a faster one.
"""

from __future__ import annotations

from dataclasses import dataclass

from .values import Count, NonNegative, PositiveInt


@dataclass(frozen=True)
class OperatorCount:
    """How often a step called one thing: an operator (``aten::add_``), a host-device
    synchronisation (``aten::_local_scalar_dense``; on CUDA ``cudaStreamSynchronize`` where no
    counted call made it, so that each sync counts once), a cast
    (``aten::_to_copy float32->float64``) or a memory-format conversion."""

    #: the operator (``aten::add_``), with what it does for a cast or a conversion
    #: (``aten::_to_copy float32->float64``) or what calls it for a sync
    name: str
    #: calls per counted step (the first counted step's, where steps disagree)
    per_step: Count
    #: ``op`` (every operator's total), ``sync``, ``cast``, ``layout`` or ``launch`` (CUDA)
    kind: str = "op"
    #: the innermost module whose forward called it (``layer3.1.conv2``), else the step's
    #: phase (``backward``, ``optimizer``); ``None`` on ``op`` rows, which total every caller
    where: str | None = None

    @property
    def key(self) -> tuple[str, str, str | None]:
        return self.kind, self.name, self.where


@dataclass(frozen=True)
class Structure:
    """Exact counts of what a few steady steps called, outside the timed steps."""

    #: every operator's calls per step, and the syncs, casts and conversions by caller
    counts: tuple[OperatorCount, ...]
    #: the steps counted
    steps: PositiveInt
    #: the keys' names whose count differed from one counted step to the next
    varying: tuple[str, ...] = ()
    #: ``dispatch``: PyTorch's dispatcher (every device); ``dispatch+cuda``: with the CUDA
    #: runtime's kernel launches and the synchronisations no counted call made, read from the
    #: profiler's host events
    source: str = "dispatch"
    #: the wall time counting took, what the counts cost the sample
    seconds: NonNegative = 0.0

    def per_step(self, kind: str) -> int:
        """All calls of a kind per step."""
        return sum(c.per_step for c in self.counts if c.kind == kind)

    def by_key(self) -> dict[tuple[str, str, str | None], int]:
        return {c.key: c.per_step for c in self.counts}


@dataclass(frozen=True)
class CountChange:
    """A count that differs from the reference's: more or fewer calls per step."""

    #: the count's kind, operator and caller, as in :class:`OperatorCount`
    kind: str
    #: the operator, as in :class:`OperatorCount`
    name: str
    #: its caller, as in :class:`OperatorCount`
    where: str | None
    #: calls per step in the reference
    before: Count
    #: calls per step now
    after: Count

    @property
    def more(self) -> int:
        return self.after - self.before

    def __str__(self) -> str:
        more = self.more
        what = f"{abs(more)} {'more' if more > 0 else 'fewer'} {self.name} per step"
        if self.before == 0:
            what = f"{more} new {self.name} per step"
        elif self.after == 0:
            what = f"no {self.name} any more ({self.before} per step before)"
        return what + (f", in {self.where}" if self.where else "")


def changes(before: Structure, after: Structure) -> tuple[CountChange, ...]:
    """The counts of ``after`` that differ from ``before``'s, the varying ones left out, the
    kinds that name a caller by caller and the operators in total; largest first."""
    then, now = before.by_key(), after.by_key()
    varying = set(before.varying) | set(after.varying)
    found = [
        CountChange(kind, name, where, then.get(key, 0), now.get(key, 0))
        for key in dict.fromkeys([*then, *now])
        for kind, name, where in [key]
        if then.get(key, 0) != now.get(key, 0) and name not in varying
    ]
    return tuple(sorted(found, key=lambda c: (-abs(c.more), c.kind, c.name)))


@dataclass(frozen=True)
class StepNumbers:
    """The losses of a train step's first steps from the model's initial weights, with torch,
    numpy and random seeded, and the gradients' norm after the first: what the step computes."""

    #: the loss after each of the first steps' forward pass
    losses: tuple[float, ...]
    #: the L2 norm of all the gradients after the first step
    grad_norm: float | None
    #: the relative difference within which two runs compute the same (cuDNN's
    #: non-deterministic kernels, TF32 and reduced precision differ in their last bits)
    tolerance: NonNegative
    #: the seed of torch, numpy and random at the test's setup and before the first steps
    seed: int = 0
    #: the wall time keeping the initial state and computing the numbers took
    seconds: NonNegative = 0.0

    def values(self) -> tuple[float, ...]:
        return (*self.losses, *([self.grad_norm] if self.grad_norm is not None else []))


@dataclass(frozen=True)
class NumbersDiffer:
    """Where two runs' first steps computed different numbers."""

    #: ``loss of step N`` or ``gradient norm``
    what: str
    #: the reference's value
    before: float
    #: this run's
    after: float
    #: the relative difference beyond which they differ
    tolerance: NonNegative


def relative(a: float, b: float) -> float:
    """``|b - a|`` relative to the larger; 0 for equal values (infinities included)."""
    if a == b:
        return 0.0
    return abs(b - a) / max(abs(a), abs(b), 1e-12)


def numbers_differ(before: StepNumbers, after: StepNumbers) -> NumbersDiffer | None:
    """The first of the numbers that differ beyond the looser of the two tolerances."""
    tolerance = max(before.tolerance, after.tolerance)
    names = [f"loss of step {i + 1}" for i in range(len(before.losses))] + ["gradient norm"]
    for what, a, b in zip(names, before.values(), after.values(), strict=False):
        if not relative(a, b) <= tolerance:  # a NaN differs too
            return NumbersDiffer(what, a, b, tolerance)
    return None
