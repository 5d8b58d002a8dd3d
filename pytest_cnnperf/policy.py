"""How hard to measure and how strictly to judge, per device and effort level.

The tuned numbers that are not settings live here; those a user can set (thresholds, samples,
seconds of timed steps) are rows of :mod:`pytest_cnnperf.settings`, with their defaults per
device. The CPU figures were chosen with ``scripts/gate-quality`` on a 2-core shared machine
(README, "How good is the gate"); the GPU figures follow the methodology notes: a GPU is far
quieter between processes, so fewer samples and a tighter threshold suffice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .settings import MIN_TIME, SAMPLES, Effort


@dataclass(frozen=True)
class TimingPolicy:
    """Steps inside one sample."""

    warmup_min_steps: int
    warmup_max_steps: int
    warmup_max_s: float
    #: warm-up ends when the last ``warmup_window`` steps are within this fraction of each other
    warmup_tolerance: float
    warmup_window: int
    min_steps: int
    max_steps: int
    min_time_s: float
    memory_steps: int = 2


@dataclass(frozen=True)
class SamplingPolicy:
    """Samples (fresh processes) per benchmark."""

    samples: int
    max_samples: int
    save_samples: int
    #: samples that also measure peak memory (it barely varies; each pass costs steps)
    memory_samples: int = 3

    @classmethod
    def of(cls, samples: int) -> SamplingPolicy:
        """``samples`` at the first look, twice as many to re-measure or save."""
        return cls(samples, max_samples=2 * samples, save_samples=2 * samples)


@dataclass(frozen=True)
class GatePolicy:
    """The confidence the gate decides with (the thresholds are settings)."""

    #: one-sided significance level for "regressed" / "improved"
    alpha: float
    #: one-sided confidence for "ok": the slowdown is below the threshold with this confidence
    ok_confidence: float
    #: memory below this many bytes of growth is never a regression (allocator granularity)
    memory_slack_bytes: int


@dataclass(frozen=True)
class DevicePolicy:
    timing: TimingPolicy
    sampling: SamplingPolicy
    gate: GatePolicy


_TIMING = {
    "cpu": TimingPolicy(
        warmup_min_steps=3,
        warmup_max_steps=30,
        warmup_max_s=3.0,
        warmup_tolerance=0.15,
        warmup_window=3,
        min_steps=6,
        max_steps=60,
        min_time_s=MIN_TIME.default_for("cpu") or 0.4,
    ),
    "cuda": TimingPolicy(
        warmup_min_steps=5,
        warmup_max_steps=200,
        warmup_max_s=20.0,
        warmup_tolerance=0.05,
        warmup_window=5,
        min_steps=20,
        max_steps=500,
        min_time_s=MIN_TIME.default_for("cuda") or 1.0,
    ),
}
_GATE = {
    "cpu": GatePolicy(alpha=0.01, ok_confidence=0.90, memory_slack_bytes=1 << 20),
    "cuda": GatePolicy(alpha=0.01, ok_confidence=0.90, memory_slack_bytes=16 << 20),
}


def _kind(device_type: str) -> str:
    return "cuda" if device_type == "cuda" else "cpu"


def gate_policy(device_type: str) -> GatePolicy:
    return _GATE[_kind(device_type)]


def for_device(device_type: str) -> DevicePolicy:
    """The policy of a device at the default settings."""
    kind = _kind(device_type)
    return DevicePolicy(
        timing=_TIMING[kind],
        sampling=SamplingPolicy.of(SAMPLES.default_for(kind) or 1),
        gate=_GATE[kind],
    )


CPU = for_device("cpu")
CUDA = for_device("cuda")


def for_run(
    device_type: str, effort: Effort, *, samples: int | None, min_time_s: float | None
) -> DevicePolicy:
    """The policy of a device at an effort level, with the ``samples`` and ``min_time``
    settings where they were given (they hold whatever the effort)."""
    policy = with_effort(for_device(device_type), effort)
    if samples:
        policy = dataclasses.replace(policy, sampling=SamplingPolicy.of(samples))
    if min_time_s:
        policy = dataclasses.replace(
            policy, timing=dataclasses.replace(policy.timing, min_time_s=min_time_s)
        )
    return policy


def with_effort(policy: DevicePolicy, effort: Effort) -> DevicePolicy:
    """Scale samples and steps: ``quick`` measures one short sample (no gate can be sure of
    anything from it), ``thorough`` doubles samples and steps."""
    if effort is Effort.STANDARD:
        return policy
    t, s = policy.timing, policy.sampling
    if effort is Effort.QUICK:
        timing = dataclasses.replace(
            t,
            warmup_min_steps=2,
            warmup_max_s=t.warmup_max_s / 3,
            min_steps=max(3, t.min_steps // 3),
            min_time_s=t.min_time_s / 4,
        )
        sampling = SamplingPolicy(samples=1, max_samples=1, save_samples=2)
    else:
        timing = dataclasses.replace(t, min_steps=t.min_steps * 2, min_time_s=t.min_time_s * 2)
        sampling = SamplingPolicy(
            samples=s.samples * 2, max_samples=s.max_samples * 2, save_samples=s.save_samples * 2
        )
    return dataclasses.replace(policy, timing=timing, sampling=sampling)
