"""The timing loop, driven by a fake clock: warm-up until steady, cold step, phases, blocks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_cnnperf.gate.policy import CPU, TimingPolicy
from pytest_cnnperf.measuring.timing import steps_for
from pytest_cnnperf.measuring.timing import time_steps as measure_steps


class FakeClock:
    """Time advances only when a phase says so; ``sync`` waits for queued device work."""

    def __init__(self) -> None:
        self.t = 0.0
        self.pending = 0.0
        self.syncs = 0

    def sync(self) -> None:
        self.t += self.pending
        self.pending = 0.0
        self.syncs += 1

    def now(self) -> float:
        return self.t

    def mark(self) -> float:
        return self.t + self.pending

    def seconds_between(self, start: float, end: float) -> float:
        return end - start

    def reserve(self, marks: int) -> None:
        pass


def phases(
    clock: FakeClock, durations: Iterator[tuple[float, float, float]], queue: bool = False
) -> list[tuple[str, Any]]:
    """Three phases whose durations come from ``durations``, one tuple per step."""
    current: dict[str, tuple[float, float, float]] = {}

    def make(i: int) -> Any:
        def run() -> None:
            if i == 0:
                current["step"] = next(durations)
            if queue:
                clock.pending += current["step"][i]
            else:
                clock.t += current["step"][i]

        return run

    return [(name, make(i)) for i, name in enumerate(("forward", "backward", "optimizer"))]


POLICY = TimingPolicy(
    warmup_min_steps=3,
    warmup_max_steps=20,
    warmup_max_s=100.0,
    warmup_tolerance=0.05,
    warmup_window=3,
    min_steps=5,
    max_steps=50,
    min_time_s=0.5,
)


def steady(after: int, cold: float = 1.0) -> Iterator[tuple[float, float, float]]:
    """A cold step, ``after`` slowing-down warm-up steps, then steady 10/20/5 ms steps."""
    yield (cold, 0.0, 0.0)
    for i in range(after):
        scale = 1 + (after - i) * 0.5
        yield (0.010 * scale, 0.020 * scale, 0.005 * scale)
    while True:
        yield (0.010, 0.020, 0.005)


def test_cold_step_is_kept_apart_and_warmup_runs_until_steady() -> None:
    clock = FakeClock()
    timed = measure_steps(phases(clock, steady(after=6)), clock, POLICY, per_step_wall=True)
    assert timed.cold_step_s == pytest.approx(1.0)
    assert timed.warmup_steady
    # 6 slow steps, then 3 steady ones make a steady window; plus the cold and the estimate step
    assert timed.warmup_steps == 6 + 3 + 2
    assert timed.step_time_s == pytest.approx(0.035)
    assert timed.phases["forward"] == pytest.approx([0.010] * len(timed.step_times_s))
    assert timed.phases["backward"] == pytest.approx([0.020] * len(timed.step_times_s))
    assert timed.phases["optimizer"] == pytest.approx([0.005] * len(timed.step_times_s))


def test_timed_steps_fill_the_minimum_time() -> None:
    clock = FakeClock()
    timed = measure_steps(phases(clock, steady(after=0)), clock, POLICY, per_step_wall=True)
    assert len(timed.step_times_s) == steps_for(0.035, POLICY) == 15  # ceil(0.5 / 0.035)


def test_step_bounds() -> None:
    assert steps_for(10.0, POLICY) == POLICY.min_steps
    assert steps_for(1e-6, POLICY) == POLICY.max_steps


def test_warmup_gives_up_at_its_budget_and_says_so() -> None:
    def erratic() -> Iterator[tuple[float, float, float]]:
        yield (1.0, 0, 0)
        i = 0
        while True:
            i += 1
            yield (0.01 * (1 + i % 2), 0.0, 0.0)  # alternates 10 and 20 ms: never steady

    clock = FakeClock()
    timed = measure_steps(phases(clock, erratic()), clock, POLICY, per_step_wall=True)
    assert not timed.warmup_steady
    assert timed.warmup_steps == POLICY.warmup_max_steps + 2


def test_device_clock_figure_is_the_synchronised_block_over_its_steps() -> None:
    """With queued (asynchronous) work, the figure is block wall time / steps and the timed
    block synchronises only at its ends."""
    clock = FakeClock()
    timed = measure_steps(
        phases(clock, steady(after=0), queue=True), clock, POLICY, per_step_wall=False
    )
    steps = len(timed.step_times_s)
    assert timed.step_time_s == pytest.approx(0.035)
    assert sum(timed.step_times_s) == pytest.approx(0.035 * steps)


def test_cpu_policy_is_sane() -> None:
    assert CPU.timing.min_steps <= CPU.timing.max_steps
    assert CPU.sampling.first <= CPU.sampling.cap
