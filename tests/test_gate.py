"""The gate's decisions on synthetic samples: both directions, the machine, memory, strictness."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from factories import ENV, QUIET, one_look, result

from pytest_cnnperf.gate import noise
from pytest_cnnperf.gate.decide import decide
from pytest_cnnperf.gate.policy import CPU, GateSettings
from pytest_cnnperf.gate.throughput import throughput_at
from pytest_cnnperf.model import (
    Decision,
    DeviceHealth,
    Environment,
    Measurement,
    NoBaseline,
    NoiseProfile,
    Result,
    StepNumbers,
    Verdict,
)

SETTINGS = GateSettings(CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False)
STRICT = dataclasses.replace(SETTINGS, strict=True)
#: one look at the device's error rates: what these tests decide at
LOOK = one_look(CPU.gate.alpha, CPU.gate.beta)


#: a machine whose drift the calibration follows: its runs' levels differ by 5%, by 1% after
#: dividing by the calibration's, over a drift of up to 22% between two runs
FOLLOWED = NoiseProfile(
    within=0.02, between=0.05, between_calibrated=0.01, calibration_within=0.02, drift_covered=0.2
)


def judge(
    current: Result,
    reference: Result | None,
    settings: GateSettings = SETTINGS,
    profile: NoiseProfile = FOLLOWED,
    **kw: Any,
) -> Decision:
    """``decide`` at :data:`LOOK`, with the kind of machine's noise ``profile`` (by default
    one whose runs barely differ once the calibration is divided out: these tests are about
    the samples and the machine's drift)."""
    throughput = None
    if reference is not None:
        throughput = throughput_at(current, reference, settings, LOOK, profile)
    return decide(current, reference, settings, LOOK, throughput=throughput, **kw)


def notes(decision: Decision) -> list[str]:
    """The decision's reasons as the reader gets them."""
    return [str(reason) for reason in decision.reasons]


def times(n: int, center: float, seed: int, spread: float = 0.02) -> list[float]:
    return list(center * np.exp(np.random.default_rng(seed).normal(0, spread, n)))


def baseline(steps: list[float], calibration: float = 1e-3, memory: int = 100 << 20) -> Result:
    """A baseline entry: one sample per step time."""
    return result(steps, calibration=calibration, memory=memory).as_baseline()


def measurement(
    steps: list[float],
    calibration: float = 1e-3,
    memory: int = 100 << 20,
    health: DeviceHealth | None = None,
    environment: Environment = ENV,
    **fields: Any,
) -> Result:
    """A fresh measurement to gate: one sample per step time (``fields`` sets more fields of
    every sample)."""
    measured = result(steps, calibration=calibration, memory=memory, health=health, **fields)
    return dataclasses.replace(measured, environment=environment)


BASE = baseline(times(12, 0.040, seed=1))


def test_no_baseline_is_new_and_fails_only_in_strict_mode() -> None:
    m = measurement(times(6, 0.040, seed=2))
    assert judge(m, None, SETTINGS).verdict is Verdict.NEW
    assert not judge(m, None, SETTINGS).failed
    assert judge(m, None, STRICT).failed
    absent = NoBaseline("cpu-test-2t", ("nvidia-h200",))
    assert notes(judge(m, None, SETTINGS, absent=absent)) == [
        "no baseline for cpu-test-2t; baselines of it exist for nvidia-h200"
    ]


def test_the_same_speed_is_ok() -> None:
    decision = judge(measurement(times(6, 0.040, seed=2)), BASE, SETTINGS)
    assert decision.verdict is Verdict.OK
    assert not decision.failed
    assert decision.throughput is not None
    assert abs(decision.throughput.change) < 0.05


def test_a_large_slowdown_regresses_and_fails() -> None:
    decision = judge(measurement(times(6, 0.050, seed=2)), BASE, SETTINGS)
    assert decision.verdict is Verdict.REGRESSED
    assert decision.failed
    assert decision.throughput is not None
    assert decision.throughput.change == pytest.approx(0.2, abs=0.03)  # 20% fewer images/s
    assert decision.throughput.p_value is not None
    assert decision.throughput.p_value < 0.01


def test_a_large_speedup_is_an_improvement_and_passes() -> None:
    decision = judge(measurement(times(6, 0.030, seed=2)), BASE, SETTINGS)
    assert decision.verdict is Verdict.IMPROVED
    assert not decision.failed


def test_a_slowdown_below_the_threshold_is_not_a_regression() -> None:
    decision = judge(measurement(times(6, 0.0416, seed=2)), BASE, SETTINGS)
    assert decision.verdict in (Verdict.OK, Verdict.INCONCLUSIVE)


def test_noise_larger_than_the_threshold_is_inconclusive_and_fails_in_strict_mode() -> None:
    noisy = baseline(times(12, 0.040, seed=1, spread=0.3))
    current = measurement(times(6, 0.040, seed=2, spread=0.3))
    assert judge(current, noisy, SETTINGS).verdict is Verdict.INCONCLUSIVE
    assert not judge(current, noisy, SETTINGS).failed
    assert judge(current, noisy, STRICT).failed


def test_a_slightly_slower_machine_is_allowed_for() -> None:
    """The machine ran 6% slower (calibration) and so did the benchmark: ok, and said so."""
    decision = judge(measurement(times(6, 0.0424, seed=2), calibration=1.06e-3), BASE, SETTINGS)
    assert decision.verdict is Verdict.OK
    assert decision.throughput is not None
    assert decision.throughput.raw_change == pytest.approx(0.05, abs=0.03)
    assert decision.throughput.change == pytest.approx(0.0, abs=0.03)
    assert (
        "the machine ran 6% slower than when the baseline was recorded (calibration workload); "
        "throughput compared after allowing for it, and for its error"
    ) in notes(decision)


def test_a_drift_the_noise_profile_has_seen_is_allowed_for() -> None:
    """15% slower in the calibration and in the benchmark: within the drift the profile saw
    the benchmarks follow (22%), so it is allowed for: ok."""
    decision = judge(measurement(times(6, 0.046, seed=2), calibration=1.15e-3), BASE, SETTINGS)
    assert decision.verdict is Verdict.OK
    assert decision.throughput is not None
    assert decision.throughput.machine_factor == pytest.approx(1.15)


def test_a_drift_beyond_the_noise_profile_gives_no_verdict_unless_every_share_agrees() -> None:
    """The calibration 40% slower, the benchmark 40% slower: more drift than the profile saw
    between two runs, so how much of it reached the benchmark is unknown; as measured it would
    be a regression, allowing for it ok: no verdict, and the note says why."""
    decision = judge(measurement(times(6, 0.056, seed=2), calibration=1.4e-3), BASE, SETTINGS)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert not decision.failed
    assert (
        "the machine ran 40% slower than when the baseline was recorded (calibration workload), "
        "more than the drift this kind of machine its recorded noise profile saw between two runs "
        "(up to 22%): how "
        "much of it reached this benchmark is unknown, so no verdict; re-run it when the "
        "machine is as fast as then, or gate against the base revision in the same job "
        "(--cnnperf-against=REV)"
    ) in notes(decision)


def test_a_faster_machine_is_allowed_for() -> None:
    """12% faster in the calibration and in the benchmark: ok, though twice the drift would
    have made it a regression (a hidden regression that large is the rarer risk)."""
    decision = judge(measurement(times(6, 0.0352, seed=2), calibration=0.88e-3), BASE, SETTINGS)
    assert decision.verdict is Verdict.OK
    assert (
        "the machine ran 14% faster than when the baseline was recorded (calibration workload); "
        "throughput compared after allowing for it, and for its error"
    ) in notes(decision)


def test_a_faster_machine_does_not_make_an_unchanged_benchmark_a_regression() -> None:
    """The calibration ran 12% faster, the benchmark as before (its work gained nothing from
    what sped the machine up): as measured it is ok, allowing for the drift it looks 12%
    slower. Where no profile says how closely this machine's benchmarks follow the
    calibration (the default allows a 4% residual a run), that is not a regression."""
    faster = measurement(times(6, 0.040, seed=2), calibration=0.88e-3)
    decision = judge(faster, BASE, SETTINGS, profile=noise.default("cpu"))
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert not decision.failed


def test_a_regression_on_a_slower_machine_is_still_caught() -> None:
    decision = judge(measurement(times(6, 0.060, seed=2), calibration=1.15e-3), BASE, SETTINGS)
    assert decision.verdict is Verdict.REGRESSED


def test_a_loaded_machine_gives_no_verdict() -> None:
    """Twice as slow, calibration too: how much of it the load explains is unknown."""
    decision = judge(measurement(times(6, 0.085, seed=2), calibration=2e-3), BASE, SETTINGS)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert not decision.failed
    assert any("100% slower" in note and "so no verdict" in note for note in notes(decision))


def test_a_huge_regression_shows_even_on_a_loaded_machine() -> None:
    decision = judge(measurement(times(6, 0.400, seed=2), calibration=1.5e-3), BASE, SETTINGS)
    assert decision.verdict is Verdict.REGRESSED


def test_a_software_change_is_reported_and_not_calibrated_away() -> None:
    """After a torch upgrade the calibration itself may have changed: no allowance then."""
    upgraded = dataclasses.replace(ENV, torch="2.15.0")
    decision = judge(
        measurement(times(6, 0.046, seed=2), calibration=1.15e-3, environment=upgraded),
        BASE,
        SETTINGS,
    )
    assert decision.environment_changes == ("torch 2.14.1 -> 2.15.0",)
    assert decision.verdict is not Verdict.OK
    same = measurement(times(6, 0.040, seed=2), environment=upgraded)
    assert judge(same, BASE, STRICT).failed
    assert not judge(same, BASE, SETTINGS).failed


def test_memory_growth_regresses_and_shrinking_improves() -> None:
    grown = judge(measurement(times(6, 0.040, seed=2), memory=110 << 20), BASE, SETTINGS)
    assert grown.verdict is Verdict.REGRESSED
    assert grown.memory is not None
    assert grown.memory.change == pytest.approx(0.10)
    small = judge(measurement(times(6, 0.040, seed=2), memory=80 << 20), BASE, SETTINGS)
    assert small.memory is not None
    assert small.memory.verdict is Verdict.IMPROVED


def test_memory_within_slack_is_never_a_regression() -> None:
    tiny = baseline(times(12, 0.040, seed=1), memory=10_000)
    decision = judge(measurement(times(6, 0.040, seed=2), memory=20_000), tiny, SETTINGS)
    assert decision.memory is not None
    assert decision.memory.verdict is Verdict.OK


def test_an_untrustworthy_gpu_turns_a_regression_inconclusive() -> None:
    throttled = DeviceHealth(
        1200,
        1980,
        3200,
        88,
        650.0,
        700.0,
        ("HwThermalSlowdown",),
        (),
        ("GPU clocks were throttled (HwThermalSlowdown)",),
    )
    decision = judge(measurement(times(6, 0.050, seed=2), health=throttled), BASE, SETTINGS)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert any("untrustworthy GPU state: GPU clocks were throttled" in n for n in notes(decision))


def disturb(r: Result, count: int, **changes: Any) -> Result:
    """``r`` with the first ``count`` samples of its measurement changed."""
    m = r.measured
    samples = [dataclasses.replace(s, **changes) for s in m.samples[:count]]
    changed = dataclasses.replace(m, samples=(*samples, *m.samples[count:]))
    return dataclasses.replace(r, measurement=changed)


ERRATIC = {"step_times_s": (0.04, 0.3, 0.05, 0.9, 0.06, 1.2), "step_time_s": 0.3}


def test_a_regression_must_show_in_the_samples_the_machine_did_not_disturb() -> None:
    """Most samples with wildly varying steps (another process competing for the cores): the
    slowdown they show is the machine's, not the code's."""
    busy = disturb(measurement(times(6, 0.048, seed=2)), 5, **ERRATIC)
    decision = judge(busy, BASE, SETTINGS, profile=QUIET)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert (
        "the machine was busy: 5 of 6 samples had erratic step times, a slow calibration or threads kept waiting for the CPU, and the other one alone does not show a regression: no throughput verdict; re-run it when the machine is quieter"
        in notes(decision)
    )
    # a real slowdown shows in the quiet samples too
    slower = disturb(measurement(times(6, 0.060, seed=2)), 3, **ERRATIC)
    decision = judge(slower, BASE, SETTINGS)
    assert decision.verdict is Verdict.REGRESSED
    assert (
        "3 of 6 samples had erratic step times, a slow calibration or threads kept waiting for the CPU; the other 3 alone show the regression"
        in notes(decision)
    )


def test_erratic_steps_are_no_disturbance_where_the_cpu_time_denied_is_measured() -> None:
    """On Linux CPU runs the samples say how much CPU others took from them: uneven steps
    without it are the benchmark's own (its threads waiting for each other)."""
    uneven = disturb(measurement(times(6, 0.060, seed=2)), 6, cpu_contention=0.0)
    uneven = disturb(uneven, 5, step_times_s=(0.03, 0.06, 0.03, 0.06, 0.03, 0.06))
    decision = judge(uneven, BASE, SETTINGS)
    assert decision.verdict is Verdict.REGRESSED
    assert not any("samples had" in note for note in notes(decision))


def test_steady_contention_for_the_cores_gives_no_regression() -> None:
    """Another process on one core of two: the steps are twice as slow but steady, and the short
    calibration does not notice; the samples' CPU accounting does."""
    contended = disturb(measurement(times(6, 0.080, seed=2)), 6, cpu_contention=0.5)
    decision = judge(contended, BASE, SETTINGS)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert not decision.failed
    assert any(
        "6 of 6 samples" in n and "so none can show a regression" in n for n in notes(decision)
    )
    # threads that barely waited were not competing
    quiet = disturb(measurement(times(6, 0.080, seed=2)), 6, cpu_contention=0.05)
    assert judge(quiet, BASE, SETTINGS).verdict is Verdict.REGRESSED


def test_a_benchmark_without_baseline_says_when_the_machine_was_busy() -> None:
    """No baseline to judge against, but its figures are read: a run most of whose samples
    waited for the CPU says so beside them."""
    busy = disturb(measurement(times(6, 0.040, seed=2)), 4, cpu_contention=0.9)
    decision = judge(busy, None)
    assert decision.verdict is Verdict.NEW
    assert (
        "the machine was busy: 4 of 6 samples had erratic step times, a slow calibration or "
        "threads kept waiting for the CPU"
    ) in notes(decision)
    quiet = disturb(measurement(times(6, 0.040, seed=2)), 1, cpu_contention=0.9)
    assert not any("busy" in note for note in notes(judge(quiet, None)))


def test_a_busy_machine_can_show_an_improvement_but_not_vouch_for_ok() -> None:
    """A busy machine only slows a benchmark, so an improvement stands; but "ok" must hold on
    the samples nothing disturbed, and when every one was, there are none to vouch for it."""
    same = disturb(measurement(times(6, 0.040, seed=2)), 6, cpu_contention=0.5)
    decision = judge(same, BASE, SETTINGS)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert (
        "the machine was busy: 6 of 6 samples had erratic step times, a slow calibration or "
        "threads kept waiting for the CPU, so none can show that it is ok: no throughput "
        "verdict; re-run it when the machine is quieter"
    ) in notes(decision)
    some = disturb(measurement(times(6, 0.040, seed=2)), 2, cpu_contention=0.5)
    assert judge(some, BASE, SETTINGS).verdict is Verdict.OK  # the other four vouch for it
    faster = disturb(measurement(times(6, 0.030, seed=2)), 6, cpu_contention=0.5)
    assert judge(faster, BASE, SETTINGS).verdict is Verdict.IMPROVED


def test_throughput_is_reported_in_items_per_second() -> None:
    decision = judge(measurement(times(6, 0.040, seed=2)), BASE, SETTINGS)
    assert decision.throughput is not None
    assert decision.throughput.baseline == pytest.approx(8 / 0.040, rel=0.05)


def test_a_changed_calibration_unit_is_compared_as_measured_with_a_note() -> None:
    """A CUDA baseline recorded with the old calibration unit (four 2048² products, unstamped)
    against samples of the new one: the calibration times are not compared, so a machine that
    seems three times slower is no reason to call a 20% slowdown ok; throughput as measured."""
    cuda = dataclasses.replace(ENV, device="cuda:0", machine="nvidia-h200")
    base = dataclasses.replace(baseline(times(12, 0.040, seed=1), 1e-4), environment=cuda)
    current = measurement(
        times(6, 0.050, seed=2),
        calibration=1.6e-3,
        environment=cuda,
        calibration_unit="cuda-mm-fp16-4096x8",
    )
    decision = judge(current, base, SETTINGS)
    assert decision.verdict is Verdict.REGRESSED
    assert decision.throughput is not None
    assert decision.throughput.machine_factor == 1.0
    assert (
        "the calibration workload changed since the baseline was recorded "
        "(cuda-mm-fp16-2048x4 -> cuda-mm-fp16-4096x8), so the machine's speed is not allowed "
        "for: throughput compared as measured; record the baseline again (--cnnperf-save) to "
        "compare allowing for it"
    ) in notes(decision)


def test_an_unstamped_cpu_baseline_has_the_cpu_unit_of_today() -> None:
    """The CPU's calibration did not change when units got ids: old CPU baselines still allow
    for the machine's speed."""
    current = measurement(
        times(6, 0.0424, seed=2), calibration=1.06e-3, calibration_unit="cpu-convnet-v1"
    )
    decision = judge(current, BASE, SETTINGS)
    assert decision.throughput is not None
    assert decision.throughput.machine_factor == pytest.approx(1.06)
    assert not any("calibration workload changed" in note for note in notes(decision))


def test_a_calibration_as_noisy_as_the_threshold_cannot_show_a_change() -> None:
    """A step 30% slower, and a calibration whose samples say 0.85 to 1.25 of the baseline's:
    its bounds (5% faster to 20% slower) are wider than the threshold either side, so it cannot
    tell the code's change from the machine's: inconclusive, and the note says why."""
    current = measurement(times(6, 0.052, seed=2))
    noisy = tuple(
        dataclasses.replace(s, calibration_s=1e-3 * f)
        for s, f in zip(current.measured.samples, (0.85, 1.25, 1.0, 1.1, 0.95, 1.2), strict=True)
    )
    current = dataclasses.replace(
        current, measurement=dataclasses.replace(current.measured, samples=noisy)
    )
    assert judge(measurement(times(6, 0.052, seed=2)), BASE, SETTINGS).verdict is Verdict.REGRESSED
    decision = judge(current, BASE, SETTINGS)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert not decision.failed
    (drift,) = [n for n in notes(decision) if n.startswith("the machine ran")]
    assert drift == (
        "the machine ran 5% slower than when the baseline was recorded (5% faster to 20% "
        "slower) (calibration workload); throughput compared after allowing for it, and for "
        "its error"
    )
    (noise,) = [n for n in notes(decision) if "own noise" in n]
    assert noise.startswith("the calibration workload's own noise (+-1")
    assert noise.endswith(
        "%) is larger than the threshold (10%), so the machine's speed cannot be allowed for "
        "and no change can be shown against a stored baseline; re-run it when the machine is "
        "quieter"
    )


def test_the_machines_speed_is_read_from_the_samples_nothing_disturbed() -> None:
    """A step 30% slower, whose third to sixth samples ran during a spell that slowed the
    whole machine by 60%, calibration included: their calibrations measured the spell, not the
    machine's steady speed, so the drift comes from the other samples' (as the baseline's), and
    the undisturbed samples show the regression (recorded on the project's AMD machine,
    2026-12-02: the spell's calibrations alone made the bounds too wide to show anything)."""
    steps = times(12, 0.052, seed=2)
    factors = [1.6 if i in (2, 3, 4, 5) else 1.0 for i in range(12)]
    current = measurement([t * f for t, f in zip(steps, factors, strict=True)])
    spells = tuple(
        dataclasses.replace(s, calibration_s=1e-3 * f)
        for s, f in zip(current.measured.samples, factors, strict=True)
    )
    current = dataclasses.replace(
        current, measurement=dataclasses.replace(current.measured, samples=spells)
    )
    decision = judge(current, baseline(times(12, 0.040, seed=1)), SETTINGS)
    assert decision.verdict is Verdict.REGRESSED
    assert not any("own noise" in note for note in notes(decision))
    assert "4 of 12 samples had erratic step times, a slow calibration or threads kept " in (
        " ".join(notes(decision))
    )


def test_a_faster_machine_must_not_hide_a_slowdown_from_ok() -> None:
    """The calibration says the machine ran 10% faster: "ok" must hold after allowing for all
    of that too, so a step as slow as the baseline's (which on this faster machine is a 10%
    loss) is not ok."""
    decision = judge(measurement(times(6, 0.040, seed=2), calibration=0.9e-3), BASE, SETTINGS)
    assert decision.verdict is not Verdict.OK
    assert judge(measurement(times(6, 0.040, seed=2)), BASE, SETTINGS).verdict is Verdict.OK


def on(capability: str | None, r: Result) -> Result:
    """``r`` measured where torch dispatched its CPU kernels to ``capability``."""
    assert r.environment is not None
    return dataclasses.replace(
        r, environment=dataclasses.replace(r.environment, cpu_capability=capability)
    )


def test_a_baseline_from_another_cpu_capability_is_not_a_regression() -> None:
    """A baseline recorded where torch ran AVX2 kernels, gated on AVX-512 under a shared machine
    name (--cnnperf-machine): 40% slower, 40% more memory and other losses, all the hardware's
    doing as far as the gate can tell. No change is shown, each figure says why, and the
    numbers name the likely cause rather than the code."""
    numbers = StepNumbers((4.8313, 4.7, 4.6), 10.0, 0.001)
    other = StepNumbers((4.80152, 4.7, 4.6), 10.0, 0.001)
    base = on("AVX2", baseline(times(12, 0.040, seed=1))).as_baseline()
    base = dataclasses.replace(base, measurement=with_numbers(base.measured, numbers))
    slower = on("AVX512", measurement(times(6, 0.056, seed=2), memory=140 << 20, numbers=other))
    decision = judge(slower, base, SETTINGS)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert not decision.failed
    assert decision.memory is not None
    assert decision.memory.verdict is Verdict.INCONCLUSIVE
    assert (
        "the baseline was measured on other hardware (CPU capability AVX2 -> AVX512), which "
        "picks other kernels: a change of speed or memory cannot be told from the hardware's, "
        "so none is shown; record a baseline for this kind of machine (--cnnperf-save, without "
        "--cnnperf-machine naming another kind)"
    ) in notes(decision)
    (computes,) = [n for n in notes(decision) if n.startswith("numbers:")]
    assert computes == (
        "numbers: the loss of step 1 is 4.80152 now, 4.8313 before (-0.6%, where runs of the "
        "same code differ by at most 0.1%); likely cause: CPU capability AVX2 -> AVX512 (other "
        "kernels round otherwise), not the code; record a baseline on this kind of machine "
        "(--cnnperf-save) to compare the code's numbers"
    )
    assert decision.environment_changes == ("CPU capability AVX2 -> AVX512",)
    # the same capability on both sides: the slowdown is the code's
    same = judge(on("AVX2", slower), base, SETTINGS)
    assert same.verdict is Verdict.REGRESSED


def with_numbers(m: Measurement, numbers: StepNumbers) -> Measurement:
    return dataclasses.replace(
        m, samples=tuple(dataclasses.replace(s, numbers=numbers) for s in m.samples)
    )


def calibrated(r: Result, factors: tuple[float, ...]) -> Result:
    """``r`` whose samples' calibrations took ``factors`` times a millisecond."""
    m = r.measured
    samples = tuple(
        dataclasses.replace(s, calibration_s=1e-3 * f)
        for s, f in zip(m.samples, factors, strict=True)
    )
    return dataclasses.replace(r, measurement=dataclasses.replace(m, samples=samples))


#: a machine whose runs barely differ once the calibration is divided out
STEADY = NoiseProfile(within=0.02, between=0.03, between_calibrated=0.005, calibration_within=0.02)


def test_each_sample_is_divided_by_its_own_calibration() -> None:
    """A step 3% slower than the baseline's, its samples ok by themselves. Where each sample's
    calibration moved with its steps (the machine ran 10% slower for some samples, 10% faster
    for others), dividing each by its own takes that out: ok. Where the calibrations spread by
    as much without the steps following (+-9%, though less than the threshold), dividing by
    them carries their noise into the samples' bounds: inconclusive."""
    same = measurement(times(6, 0.0412, seed=2))
    assert judge(same, BASE, SETTINGS, profile=STEADY).verdict is Verdict.OK
    factors = (0.9, 1.1, 1.0, 1.09, 0.91, 1.0)
    moved = [t * f for t, f in zip(same.measured.step_times, factors, strict=True)]
    followed = calibrated(measurement(moved), factors)
    assert judge(followed, BASE, SETTINGS, profile=STEADY).verdict is Verdict.OK
    uncertain = calibrated(same, factors)
    decision = judge(uncertain, BASE, SETTINGS, profile=STEADY)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert decision.throughput is not None
    assert decision.throughput.high is not None
    assert decision.throughput.high > 0.10


def test_the_between_run_spread_widens_the_ok_bound() -> None:
    """The same samples are ok where the kind of machine's runs barely differ, and inconclusive
    where its recorded profile says a run's level moves by 6% after calibration: the bound
    holds that spread, which no number of samples averages away."""
    same = measurement(times(6, 0.040, seed=2))
    quiet = judge(same, BASE, SETTINGS, profile=STEADY)
    noisy_profile = dataclasses.replace(STEADY, between=0.10, between_calibrated=0.06)
    noisy = judge(same, BASE, SETTINGS, profile=noisy_profile)
    assert quiet.verdict is Verdict.OK
    assert noisy.verdict is Verdict.INCONCLUSIVE
    assert quiet.throughput is not None
    assert noisy.throughput is not None
    assert quiet.throughput.change == pytest.approx(noisy.throughput.change)
    assert noisy.throughput.high is not None
    assert quiet.throughput.high is not None
    assert noisy.throughput.high > quiet.throughput.high + 0.05
    (unvouched,) = [n for n in notes(noisy) if n.startswith("a stored baseline cannot")]
    assert (
        "how much runs differ on this kind of machine (runs differ by 6% after calibration, "
        "recorded over 0 runs)" in unvouched
    )
    # with no profile recorded, the device's default: on the CPU the noisier of the project's
    # machines, where a stored baseline cannot vouch for ok at 10%; the note says how to record
    # this machine's own
    default = judge(same, BASE, SETTINGS, profile=noise.default("cpu"))
    assert default.verdict is Verdict.INCONCLUSIVE
    (unvouched,) = [n for n in notes(default) if n.startswith("a stored baseline cannot")]
    assert unvouched.endswith(
        "assumed: none recorded); gate it against the base revision in the same job "
        "(--cnnperf-against=REV), which has no between-run noise, or count instructions, which "
        "no noise moves (--cnnperf-metric=instructions); `cnnperf noise -- PYTEST_ARGS` records "
        "this machine's own noise profile"
    )
