"""The sequential gate on scripted samples: where it stops, what each look asks for, what it
says, and its error rates over all looks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from factories import CONFIG, ENV, QUIET
from scripted import Scripted

from pytest_cnnperf.gate.design import Design, doubling
from pytest_cnnperf.gate.policy import CPU, CUDA, GateSettings, SamplingPolicy
from pytest_cnnperf.gate.sequential import PROFILED_SAMPLES, Gating, Next, Reference, Saving
from pytest_cnnperf.gate.stats import smallest_p
from pytest_cnnperf.model import (
    Decision,
    Measurement,
    MemoryPeak,
    OperatorTime,
    Profile,
    Result,
    Sample,
    Verdict,
)

SETTINGS = GateSettings(CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False)
DESIGN = CPU.sampling.design(CPU.gate)
PROFILE = Profile("cpu", 4, 0.04, (OperatorTime("aten::conv2d", 1, 0.03),))

#: draws one sample's step time: ``draw(index)``, ``index`` counting from 0 over the run
Draw = Callable[[int], float]


def noisy(center: float, spread: float, seed: int) -> Draw:
    values = center * np.exp(np.random.default_rng(seed).normal(0, spread, 200))
    return lambda i: float(values[i])


def sample(step: float, step_index: int, asked: Next, memory: int, **fields: object) -> Sample:
    """A sample as the runner takes it for ``asked``: the first ones of the batch measure memory
    and profile, as it says."""
    return Sample(
        step_time_s=step,
        step_times_s=(step,) * 4,
        calibration_s=1e-3,
        memory=MemoryPeak(memory, memory, "test") if step_index < asked.memory else None,
        profile=PROFILE if step_index < asked.profile else None,
        **fields,  # type: ignore[arg-type]
    )


def result_of(samples: list[Sample]) -> Result:
    return Result(
        config=CONFIG,
        test_id="tests/test_m.py::test_m",
        environment=ENV,
        measurement=Measurement(CONFIG.batch_size, tuple(samples), CONFIG.unit),
    )


def baseline(
    count: int = 11, memory: int = 100 << 20, seed: int = 1, spread: float = 0.02
) -> Result:
    draw = noisy(0.040, spread, seed)
    asked = Next(count, memory=3, profile=3)
    return result_of([sample(draw(i), i, asked, memory) for i in range(count)]).as_baseline()


def follow(
    course: Gating | Saving, draw: Draw, memory: int = 100 << 20, **fields: object
) -> tuple[Decision, list[Next]]:
    """Run ``course`` as the runner does, each batch drawn from ``draw``: the final decision and
    what each batch asked for."""
    samples: list[Sample] = []
    asked: list[Next] = []
    step: Next | None = course.first()
    decision: Decision | None = None
    while step is not None:
        asked.append(step)
        start = len(samples)
        samples += [sample(draw(start + i), i, step, memory, **fields) for i in range(step.samples)]
        decision, step = course.look(result_of(samples))
        assert len(asked) < 20, "the course never ended"
    assert decision is not None
    return decision, asked


def gating(
    reference: Result | None,
    settings: GateSettings = SETTINGS,
    design: Design = DESIGN,
    profiled: bool = True,
) -> Gating:
    return Gating(
        settings,
        design,
        lambda result: Reference(reference, "b.json", noise=QUIET),
        profiled=profiled,
    )


def test_looks_double_from_the_first_to_the_cap() -> None:
    assert doubling(3, 12) == (3, 6, 12)
    assert doubling(3, 6) == (3, 6)
    assert doubling(3, 4) == (3, 4)
    assert doubling(3, 100) == (3, 6, 12, 24, 48, 100)
    assert doubling(3, 50) == (3, 6, 12, 24, 50)
    assert doubling(1, 1) == (1,)


def test_each_look_spends_an_equal_share_of_both_rates() -> None:
    looks = [DESIGN.look(i) for i in range(len(DESIGN.looks))]
    assert [look.number for look in looks] == [1, 2, 3]
    assert sum(look.alpha for look in looks) == pytest.approx(CPU.gate.alpha)
    assert sum(look.beta for look in looks) == pytest.approx(CPU.gate.beta)


@pytest.mark.parametrize("policy", [CPU, CUDA], ids=["cpu", "cuda"])
def test_no_look_is_planned_that_cannot_reach_its_share(policy: object) -> None:
    """A save keeps as many samples as a first look against it needs to reach its share of
    alpha (the smallest p-value of m against n is 1 / C(m + n, m))."""
    design = policy.sampling.design(policy.gate)  # type: ignore[attr-defined]
    needed = design.smallest_reference()
    share, first = design.alpha / len(design.looks), design.looks[0]
    assert smallest_p(first, needed) <= share < smallest_p(first, needed - 1)
    assert design.reachable(needed) == design


def test_the_defaults_first_look_needs_a_dozen_baseline_samples() -> None:
    assert DESIGN.looks == (3, 6, 12)
    assert DESIGN.smallest_reference() == 11  # 1 / C(14, 3) = 1/364 < 0.01 / 3
    cuda = CUDA.sampling.design(CUDA.gate)
    assert cuda.looks == (3, 6)
    assert cuda.smallest_reference() == 9  # 1 / C(12, 3) = 1/220 < 0.01 / 2


def test_a_baseline_too_small_for_the_first_looks_drops_them() -> None:
    """An old CUDA baseline of six samples: three against six cannot reach a share of 1%; six
    against six can, as the only look left (which then has the whole rate)."""
    cuda = CUDA.sampling.design(CUDA.gate)
    assert cuda.reachable(6).looks == (6,)
    assert cuda.reachable(2).looks == (6,)  # the last look stays whatever it can reach


def test_unchanged_code_is_ok_at_the_first_look() -> None:
    decision, asked = follow(gating(baseline()), noisy(0.040, 0.02, seed=2))
    assert decision.verdict is Verdict.OK
    assert [a.samples for a in asked] == [3]
    assert asked[0] == Next(3, memory=1, counted=1, profile=0)
    assert decision.throughput is not None
    assert decision.throughput.look is not None
    assert str(decision.throughput.look) == "look 1 of 3"


def test_a_large_slowdown_regresses_at_the_first_look_and_then_profiles_its_operators() -> None:
    decision, asked = follow(gating(baseline()), noisy(0.060, 0.02, seed=2))
    assert decision.verdict is Verdict.REGRESSED
    assert decision.failed
    assert [a.samples for a in asked] == [3, PROFILED_SAMPLES]
    assert asked[1] == Next(3, memory=0, profile=3)
    # the profiled samples do not decide again: the verdict stands as its look made it
    assert decision.throughput is not None
    assert decision.throughput.current_samples == 3
    assert decision.attribution is not None


def test_without_a_profile_in_the_baseline_no_samples_are_taken_to_profile() -> None:
    bare = baseline()
    samples = tuple(dataclasses.replace(s, profile=None) for s in bare.measured.samples)
    bare = dataclasses.replace(
        bare, measurement=dataclasses.replace(bare.measured, samples=samples)
    )
    decision, asked = follow(gating(bare), noisy(0.060, 0.02, seed=2))
    assert decision.verdict is Verdict.REGRESSED
    assert [a.samples for a in asked] == [3]
    assert any("no operator profile" in str(r) for r in decision.reasons)


def test_noise_as_large_as_the_threshold_is_looked_at_to_the_cap_then_inconclusive() -> None:
    decision, asked = follow(gating(baseline()), noisy(0.043, 0.12, seed=3))
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert [a.samples for a in asked] == [3, 3, 6]
    assert decision.throughput is not None
    assert decision.throughput.look is not None
    assert str(decision.throughput.look) == "look 3 of 3"
    assert decision.throughput.current_samples == 12


def test_a_change_near_the_threshold_profiles_the_next_looks_samples() -> None:
    """Leaning to a change past the threshold but not yet shown: the next look's samples profile
    the operators, so that a verdict there needs no more."""
    _, asked = follow(gating(baseline()), noisy(0.0455, 0.05, seed=4))
    assert len(asked) >= 2
    assert asked[1].profile == PROFILED_SAMPLES


def test_memory_is_measured_once_and_a_change_confirmed_in_three_samples() -> None:
    same, asked = follow(gating(baseline()), noisy(0.040, 0.02, seed=2))
    assert same.memory is not None
    assert same.memory.verdict is Verdict.OK
    assert sum(a.memory for a in asked) == 1
    grown, asked = follow(gating(baseline()), noisy(0.040, 0.02, seed=2), memory=120 << 20)
    assert grown.verdict is Verdict.REGRESSED
    assert grown.memory is not None
    assert grown.memory.verdict is Verdict.REGRESSED
    assert grown.memory.current_samples == 3
    assert [(a.samples, a.memory) for a in asked] == [(3, 1), (3, 2)]


def test_every_sample_disturbed_stops_at_the_first_look() -> None:
    """A loaded machine: more samples would be as disturbed."""
    decision, asked = follow(gating(baseline()), noisy(0.080, 0.02, seed=2), cpu_contention=0.5)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert [a.samples for a in asked] == [3]


def test_without_a_baseline_the_first_look_is_the_result() -> None:
    decision, asked = follow(gating(None), noisy(0.040, 0.02, seed=2))
    assert decision.verdict is Verdict.NEW
    assert [a.samples for a in asked] == [3]


def test_against_a_small_baseline_the_dropped_looks_samples_are_taken_first() -> None:
    decision, asked = follow(gating(baseline(count=4)), noisy(0.040, 0.02, seed=2))
    # three against four cannot reach a share of 1% over three looks (1/35); six against four
    # can reach a share over two (1/210 < 0.005)
    assert [a.samples for a in asked] == [3, 3]
    assert decision.throughput is not None
    assert decision.throughput.look is not None
    assert str(decision.throughput.look) == "look 1 of 2"


def test_a_regressions_evidence_names_the_look_the_test_and_the_rates() -> None:
    decision, _ = follow(gating(baseline()), noisy(0.060, 0.02, seed=2))
    assert decision.throughput is not None
    test, rates = decision.throughput.evidence()
    assert test.startswith(
        "3 samples now against 11 (look 1 of 3): exact one-sided Mann-Whitney test p = 0.0027, "
        "at most this look's 0.0033; with 99.7% confidence, allowing for +-1.4% between the two "
        "runs beside their samples, the loss is at least "
    )
    assert rates == (
        "error rates fixed in advance: 1% false alarms and 5% missed slowdowns over 3 looks, "
        "split equally"
    )


def test_an_inconclusive_verdicts_evidence_says_what_ok_needs() -> None:
    decision, _ = follow(gating(baseline()), noisy(0.043, 0.12, seed=3))
    assert decision.throughput is not None
    test, _ = decision.throughput.evidence()
    assert "(look 3 of 3, the last): " in test
    assert ", above this look's 0.0033; " in test
    assert test.endswith("(ok needs it below the threshold)")


def test_unchanged_code_is_called_a_regression_at_most_alpha_of_the_time() -> None:
    """Over all looks together, on exchangeable samples (no drift between the sides): the
    union of the looks' shares bounds it. And a slowdown of the threshold is rarely ok."""
    false_alarms = oks_at_threshold = 0
    runs = 300
    for seed in range(runs):
        ref = baseline(seed=10_000 + seed, spread=0.08)
        same, _ = follow(gating(ref, profiled=False), noisy(0.040, 0.08, seed=seed))
        false_alarms += same.verdict is Verdict.REGRESSED
        slow, _ = follow(gating(ref, profiled=False), noisy(0.040 / 0.9, 0.08, seed=seed))
        oks_at_threshold += slow.verdict is Verdict.OK
    assert false_alarms <= 3  # 1% of 300
    assert oks_at_threshold <= 15  # 5% of 300


def save(settings: GateSettings = SETTINGS, sampling: SamplingPolicy = CPU.sampling) -> Saving:
    return Saving(settings, sampling, sampling.design(settings.policy), profiled=True)


def test_a_save_keeps_what_a_first_look_needs_and_stops_when_precise() -> None:
    decision, asked = follow(save(), noisy(0.040, 0.02, seed=2))
    assert decision.verdict is Verdict.SAVED
    assert asked == [Next(11, memory=3, counted=1, profile=3)]
    assert not decision.reasons


def test_a_noisy_save_takes_more_samples_up_to_twice_as_many_and_says_so() -> None:
    decision, asked = follow(save(), noisy(0.040, 0.15, seed=2))
    assert decision.verdict is Verdict.SAVED
    assert sum(a.samples for a in asked) == 22
    assert [a.samples for a in asked[1:]] == [3, 3, 3, 2]
    assert [str(r) for r in decision.reasons] == [
        f"the baseline's median step time is known within +-{r.spread * 100:.1f}% after 22 "  # type: ignore[union-attr]
        "samples, where +-2.5% was wanted: the machine was noisy; record it again when it is "
        "quieter"
        for r in decision.reasons
    ]


def test_a_quick_save_keeps_two_samples() -> None:
    quick = SamplingPolicy(first=1, cap=1, save=2)
    decision, asked = follow(save(sampling=quick), noisy(0.040, 0.15, seed=2))
    assert decision.verdict is Verdict.SAVED
    assert [a.samples for a in asked] == [2]  # however noisy: a smoke run


# ---- end to end, on scripted samples ----

BENCH = """
from models import Sleepy


def test_a(cnnperf):
    cnnperf.train_step(Sleepy(name="a"), batch_size=2, image_size=8)
"""


def test_a_run_takes_the_samples_each_look_asks_for(
    scripted_project: pytest.Pytester, scripted: Scripted
) -> None:
    """The project's ini allows four samples (looks after three and four) at a 30% threshold:
    a save keeps nine (what three against it need), an unchanged rerun stops at its first look,
    a step twice as slow regresses there, and one 42% slower (a loss of 30%, just past the
    threshold: the first look cannot tell) is looked at again, and, still undecided at the
    last look, is inconclusive, which strict mode fails with the look and the rates."""
    scripted_project.makepyfile(test_bench=BENCH)
    scripted_project.runpytest("--cnnperf", "--cnnperf-save").assert_outcomes(passed=1)
    scripted_project.runpytest("--cnnperf").assert_outcomes(passed=1)
    scripted.slow_down("test_a", 2.0)
    scripted_project.runpytest("--cnnperf").assert_outcomes(failed=1)
    scripted.slow_down("test_a", 1.42)
    result = scripted_project.runpytest("--cnnperf", "--cnnperf-strict")
    result.assert_outcomes(failed=1)
    assert [count for _, count in scripted.script.taken] == [9, 3, 3, 3, 1]
    result.stdout.fnmatch_lines(
        [
            "cnnperf: train_step Sleepy bs=2 8x8 opt=sgd is inconclusive (strict mode fails it): "
            "its samples could not tell, by the last look, whether it changed by the threshold "
            "or not",
            "  throughput  * images/s now, 200 images/s in the baseline: -29.*% (fails below -30%)",
            "              4 samples now against 9 (look 2 of 2, the last): exact one-sided "
            "Mann-Whitney test p = *, at most this look's 0.005; with 97.5% confidence, allowing "
            "for +-1.4% between the two runs beside their samples, the loss is at most *% (ok "
            "needs it below the threshold)",
            "              error rates fixed in advance: 1% false alarms and 5% missed slowdowns "
            "over 2 looks, split equally",
        ]
    )
