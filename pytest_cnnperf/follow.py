"""A benchmark's course through the gate, followed: the samples each look asks for, taken from
the processes that take them, until the decision is final.

The samples come from the session's sampler; with ``--cnnperf-against`` in pairs with the
revision's, one after the other; with ``--cnnperf-metric=instructions`` each side's step is
counted once more, in a process under Valgrind.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from .gate.policy import COUNTED_STEPS
from .gate.sequential import Gating, Next, Pairing, Saving
from .model import BenchConfig, Instructions, Measurement, Result
from .sampling.manager import Sampler, Target
from .sampling.messages import BenchmarkError, TakenSample


@dataclass(frozen=True)
class Sources:
    """Where a benchmark's samples come from: this checkout's ``sampler``, the revision's gated
    against in this run (``base``), and the processes that count instructions, of this checkout
    and of that revision (each started at its first count)."""

    sampler: Sampler
    base: Sampler | None = None
    counting: Callable[[], Sampler] | None = None
    counting_base: Callable[[], Sampler] | None = None
    #: keeps the counting processes still while samples are timed
    held: Callable[[], AbstractContextManager[None]] = nullcontext


def follow(
    config: BenchConfig, test_id: str, target: Target, course: Gating | Saving, sources: Sources
) -> Result:
    """Take the samples the gate asks for, look after look, until its decision is final
    (against a revision, as many of the revision's, in turn)."""
    taken: list[TakenSample] = []
    base_taken: list[TakenSample] = []
    base = sources.base
    step: Next | None = course.first()
    while step is not None:
        if step.paired and base is not None:
            first = len(taken), len(base_taken)
            with sources.held():
                base = _take_pairs(target, step, course, sources.sampler, base, taken, base_taken)
            if step.instructions and base is not None:  # each side counted once
                _with_counts(taken, first[0], _count(target, sources.counting))
                _with_counts(base_taken, first[1], _count(target, sources.counting_base))
        else:
            with sources.held():
                batch = sources.sampler.take(_asked(target, step), step.samples)
            if step.instructions and batch:  # kept with the batch's first sample
                _with_counts(batch, 0, _count(target, sources.counting))
            taken += batch
        result = measured(config, test_id, taken)
        if isinstance(course, Pairing):
            reference = measured(config, test_id, base_taken) if base and base_taken else None
            decision, step = course.look(result, reference)
        else:
            decision, step = course.look(result)
    if base_taken:  # the revision's samples, beside the verdict they decided
        decision = dataclasses.replace(
            decision, reference=measured(config, test_id, base_taken).measured
        )
    found = decision.attribution
    if found is not None and target.trace and os.path.exists(target.trace):
        decision = dataclasses.replace(
            decision, attribution=dataclasses.replace(found, trace=target.trace)
        )
    return dataclasses.replace(result, decision=decision)


def measured(config: BenchConfig, test_id: str, taken: list[TakenSample]) -> Result:
    """The result of the samples taken so far, without a decision."""
    return Result(
        config=config,
        test_id=test_id,
        recorded=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        environment=taken[0].environment,
        measurement=Measurement(config.batch_size, tuple(t.sample for t in taken), config.unit),
    )


def _count(target: Target, counting: Callable[[], Sampler] | None) -> Instructions:
    """The instructions of ``target``'s step, counted in a counting process."""
    if counting is None:
        raise BenchmarkError("this process cannot count instructions")
    counted = dataclasses.replace(
        target,
        plan=dataclasses.replace(target.plan, instructions=COUNTED_STEPS),
        memory_samples=0,
        counted_samples=0,
        profile_samples=0,
        trace=None,
    )
    (taken,) = counting().take(counted, 1)
    if taken.sample.instructions is None:
        raise BenchmarkError("the counting process returned no instructions")
    return taken.sample.instructions


def _take_pairs(
    target: Target,
    step: Next,
    course: Gating | Saving,
    own: Sampler,
    base: Sampler,
    taken: list[TakenSample],
    base_taken: list[TakenSample],
) -> Sampler | None:
    """``step.samples`` samples of each side, one after the other, the revision's first in
    every other pair (A B B A ...: a drift of the machine reaches both alike); the i-th of
    each with the same passes (the revision's without a trace). Returns the revision's
    sampler, ``None`` once it turned out not to make this benchmark call."""
    sampler: Sampler | None = base
    for i in range(step.samples):
        asked = _asked(target, step, i)
        sides = [(own, asked, taken)]
        if sampler is not None:
            theirs = dataclasses.replace(asked, trace=None)
            sides.insert(0 if len(taken) % 2 == 0 else 1, (sampler, theirs, base_taken))
        for side, what, into in sides:
            try:
                into += side.take(what, 1)
            except BenchmarkError as exc:
                if side is own or exc.problem != "absent":
                    raise
                assert isinstance(course, Pairing)
                course.lost(str(exc))
                sampler = None
    return sampler


def _with_counts(taken: list[TakenSample], index: int, counts: Instructions) -> None:
    """Keep ``counts`` with the ``index``-th sample taken."""
    kept = taken[index]
    sample = dataclasses.replace(kept.sample, instructions=counts)
    taken[index] = TakenSample(sample, kept.environment)


def _asked(target: Target, step: Next, i: int | None = None) -> Target:
    """``target`` with the passes ``step`` asks of its samples, or (``i``) of its ``i``-th."""
    if i is None:
        memory, counted, profile = step.memory, step.counted, step.profile
    else:
        memory, counted, profile = (int(i < n) for n in (step.memory, step.counted, step.profile))
    return dataclasses.replace(
        target, memory_samples=memory, counted_samples=counted, profile_samples=profile
    )
