"""The creep gate on synthetic samples: the best of the recent runs stands in for a baseline,
judged by the gate's own rules at the creep threshold, and worded in the failing test's message."""

from __future__ import annotations

import dataclasses

import known
import numpy as np
from factories import ENV, QUIET, one_look

from pytest_cnnperf.gate import creep
from pytest_cnnperf.gate.creep import Run
from pytest_cnnperf.gate.policy import CPU, GateSettings
from pytest_cnnperf.model import (
    BenchConfig,
    Comparison,
    Creep,
    Decision,
    Measurement,
    MemoryPeak,
    Result,
    Sample,
    Verdict,
)
from pytest_cnnperf.reports import explain

SETTINGS = GateSettings(CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False)
LOOK = one_look(CPU.gate.alpha, CPU.gate.beta)
CONFIG = BenchConfig(kind="train_step", model="m", batch_size=8, image_size=(64, 64))


def measured(center: float, seed: int, memory: int = 100 << 20) -> Result:
    """A result of eight samples around ``center`` seconds a step (2% noise), undecided."""
    times = center * np.exp(np.random.default_rng(seed).normal(0, 0.02, 8))
    samples = tuple(
        Sample(
            step_time_s=float(t),
            step_times_s=(float(t),),
            cold_step_s=float(t),
            warmup_steps=3,
            warmup_steady=True,
            memory=MemoryPeak(memory, None, "cpu-profiler"),
            cpu_contention=0.0,
        )
        for t in times
    )
    return Result(
        config=CONFIG,
        test_id="test_m.py::test_m",
        environment=ENV,
        measurement=Measurement(8, samples),
    )


def run(number: int, center: float, memory: int = 100 << 20) -> Run:
    """Run ``number`` (0-based) of the history, gated ok at the time."""
    info = known.run_info(number)
    result = dataclasses.replace(
        measured(center, seed=number, memory=memory), decision=Decision(Verdict.OK)
    )
    return Run(result, info.commit, info.recorded)


#: five recent runs, newest first; the best (fastest) is run 2 at 40 ms
RECENT = [run(4, 0.046), run(3, 0.044), run(2, 0.040), run(1, 0.042), run(0, 0.043)]


def judged(current: Result, decision: Decision | None = None) -> Decision:
    judged, _ = creep.judge(
        decision or Decision(Verdict.OK), current, RECENT, SETTINGS, 0.10, LOOK, QUIET
    )
    return judged


def decided(current: Result, decision: Decision) -> Result:
    return dataclasses.replace(current, decision=decision)


def test_the_best_recent_run_is_the_fastest() -> None:
    best = creep.best_run(RECENT)
    assert best is RECENT[2]
    assert (best.commit, best.recorded) == (known.commit(2), "2026-11-01T06:00:00Z")


def test_past_the_threshold_against_the_best_fails() -> None:
    decision = judged(measured(0.048, seed=9))  # 20% slower than the best
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
    assert judged(measured(0.041, seed=9), before) == before


def test_no_recent_run_leaves_the_decision_alone() -> None:
    before = Decision(Verdict.NEW)
    after, undecided = creep.judge(before, measured(0.08, seed=1), [], SETTINGS, 0.10, LOOK)
    assert after == before
    assert not undecided


def test_memory_grown_past_the_threshold_fails_too() -> None:
    decision = judged(measured(0.041, seed=9, memory=120 << 20))
    (reason,) = decision.reasons
    assert isinstance(reason, Creep)
    assert [c.metric for c in reason.comparisons] == ["memory"]


def test_the_failure_says_it_is_the_history_and_how_to_accept_it() -> None:
    current = measured(0.048, seed=9)
    decision = judged(current)
    result = decided(current, decision)
    (reason,) = decision.reasons
    assert isinstance(reason, Creep)
    change = reason.comparisons[0].change
    lines = explain.failure(result).splitlines()
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
    decision = judged(measured(0.048, seed=9), regressed)
    baseline_comparison = dataclasses.replace(creep_comparison(decision), verdict=Verdict.REGRESSED)
    decision = dataclasses.replace(decision, throughput=baseline_comparison)
    result = Result(CONFIG, "test_m.py::test_m", environment=ENV, decision=decision)
    lines = explain.failure(result).splitlines()
    assert lines[0].endswith(
        "regressed (throughput; throughput against the best of its recent runs in the history)"
    )
    assert lines[-1] == (
        "  To accept it as the new baseline and in the history, run: "
        "pytest --cnnperf --cnnperf-save --cnnperf-creep-accept test_m.py::test_m"
    )


def creep_comparison(decision: Decision) -> Comparison:
    reason = decision.creep
    assert isinstance(reason, Creep)
    return reason.comparisons[0]


def test_the_markdown_summary_names_the_creep() -> None:
    from pytest_cnnperf.reports import markdown

    current = measured(0.048, seed=9)
    decision = judged(current)
    result = decided(current, decision)
    text = markdown.render([result])
    assert text.startswith("### ❌ cnnperf: 1 of 1 benchmark regressed\n")
    (line,) = [line for line in text.splitlines() if line.startswith("- ❌")]
    assert line.startswith(
        "- ❌ `test_m` (m bs=8 64x64): creep: worse than the best of its last 5 runs on this "
        "machine in the history"
    )
