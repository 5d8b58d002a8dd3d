"""The creep gate on synthetic samples: the best of the recent runs stands in for a baseline,
judged by the gate's own rules at the creep threshold, and worded in the failing test's message."""

from __future__ import annotations

import dataclasses

import known
import numpy as np
from factories import ENV

from pytest_cnnperf import explain, gate
from pytest_cnnperf.history import creep
from pytest_cnnperf.history.runs import Entry
from pytest_cnnperf.policy import CPU
from pytest_cnnperf.results import (
    BenchConfig,
    BenchmarkResult,
    Creep,
    Decision,
    Measurement,
    MemoryPeak,
    Sample,
    Verdict,
)

SETTINGS = gate.GateSettings(
    CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False
)
CONFIG = BenchConfig(kind="train_step", model="m", batch_size=8, image_size=(64, 64))


def measurement(center: float, seed: int, memory: int = 100 << 20) -> Measurement:
    times = center * np.exp(np.random.default_rng(seed).normal(0, 0.02, 8))
    return Measurement(
        8,
        tuple(
            Sample(
                step_time_s=float(t),
                step_times_s=(float(t),),
                phases={},
                cold_step_s=float(t),
                warmup_steps=3,
                warmup_steady=True,
                calibration_s=None,
                memory=MemoryPeak(memory, None, "cpu-profiler"),
                cpu_contention=0.0,
            )
            for t in times
        ),
    )


def entry(run: int, center: float, memory: int = 100 << 20) -> Entry:
    result = BenchmarkResult(
        test_id="test_m.py::test_m",
        key=CONFIG.key(),
        config=CONFIG,
        decision=Decision(Verdict.OK),
        environment=ENV,
        measurement=measurement(center, seed=run, memory=memory),
    )
    return Entry(run + 1, known.run_info(run), result)


#: five recent runs, newest first; the best (fastest) is run 2 at 40 ms
RECENT = [entry(4, 0.046), entry(3, 0.044), entry(2, 0.040), entry(1, 0.042), entry(0, 0.043)]


def judged(current: Measurement, decision: Decision | None = None) -> Decision:
    return creep.judge(decision or Decision(Verdict.OK), current, ENV, RECENT, SETTINGS, 0.10)


def test_the_best_recent_run_is_the_fastest() -> None:
    best = creep.best_run(RECENT)
    assert best is not None
    assert best.run_id == 3


def test_past_the_threshold_against_the_best_fails() -> None:
    decision = judged(measurement(0.048, seed=9))  # 20% slower than the best
    assert decision.verdict is Verdict.REGRESSED
    assert decision.failed
    (reason,) = decision.reasons
    assert isinstance(reason, Creep)
    (comparison,) = reason.comparisons
    assert comparison.metric == "throughput"
    assert comparison.threshold == 0.10
    assert 0.12 < comparison.change < 0.22
    assert (reason.runs, reason.best_commit) == (5, known.commit(2))


def test_within_the_threshold_passes_unchanged() -> None:
    before = Decision(Verdict.OK, baseline_file="baselines/x.json")
    assert judged(measurement(0.041, seed=9), before) == before


def test_no_recent_run_leaves_the_decision_alone() -> None:
    before = Decision(Verdict.NEW)
    after = creep.judge(before, measurement(0.08, seed=1), ENV, [], SETTINGS, 0.10)
    assert after == before


def test_memory_grown_past_the_threshold_fails_too() -> None:
    decision = judged(measurement(0.041, seed=9, memory=120 << 20))
    (reason,) = decision.reasons
    assert isinstance(reason, Creep)
    assert [c.metric for c in reason.comparisons] == ["memory"]


def test_the_failure_says_it_is_the_history_and_how_to_accept_it() -> None:
    decision = judged(measurement(0.048, seed=9))
    result = BenchmarkResult(
        "test_m.py::test_m", CONFIG.key(), CONFIG, decision, ENV, measurement(0.048, seed=9)
    )
    (reason,) = decision.reasons
    assert isinstance(reason, Creep)
    change = reason.comparisons[0].change
    lines = explain.failure(result, SETTINGS.policy.alpha).splitlines()
    assert lines[0] == (
        "cnnperf: train_step m bs=8 64x64 regressed (throughput against the best of its recent "
        "runs in the history)"
    )
    assert lines[1] == (
        f"  note: creep: worse than the best of its last 5 runs on this machine in the history "
        f"(commit {known.commit(2)[:7]}, 2026-11-01 06:00): throughput "
        f"{reason.comparisons[0].current:.0f} images/s against 200 images/s, "
        f"-{change * 100:.1f}% (fails below -10%)"
    )
    assert (
        lines[-1]
        == "  To accept it, run: pytest --cnnperf --cnnperf-creep-accept test_m.py::test_m"
    )


def test_a_baseline_regression_and_a_creep_are_accepted_together() -> None:
    regressed = Decision(Verdict.REGRESSED, failed=True, throughput=None)
    decision = judged(measurement(0.048, seed=9), regressed)
    baseline_comparison = dataclasses.replace(creep_comparison(decision), verdict=Verdict.REGRESSED)
    decision = dataclasses.replace(decision, throughput=baseline_comparison)
    result = BenchmarkResult("test_m.py::test_m", CONFIG.key(), CONFIG, decision, ENV)
    lines = explain.failure(result, SETTINGS.policy.alpha).splitlines()
    assert lines[0].endswith(
        "regressed (throughput; throughput against the best of its recent runs in the history)"
    )
    assert lines[-1] == (
        "  To accept it as the new baseline and in the history, run: "
        "pytest --cnnperf --cnnperf-save --cnnperf-creep-accept test_m.py::test_m"
    )


def creep_comparison(decision: Decision):  # type: ignore[no-untyped-def]
    reason = explain.creep_of(decision)
    assert reason is not None
    return reason.comparisons[0]


def test_the_markdown_summary_names_the_creep() -> None:
    from pytest_cnnperf.reports import markdown

    decision = judged(measurement(0.048, seed=9))
    result = BenchmarkResult(
        "test_m.py::test_m", CONFIG.key(), CONFIG, decision, ENV, measurement(0.048, seed=9)
    )
    text = markdown.render([result])
    assert text.startswith("### ❌ cnnperf: 1 of 1 benchmark regressed\n")
    (line,) = [line for line in text.splitlines() if line.startswith("- ❌")]
    assert line.startswith(
        "- ❌ `test_m` (m bs=8 64x64): creep: worse than the best of its last 5 runs on this "
        "machine in the history"
    )
