"""How hard to measure and how strictly to judge, per device and effort level.

All the tuned numbers live here. The CPU figures were chosen with ``scripts/gate-quality``
on a 2-core shared machine (README, "How good is the gate"); the GPU figures follow the
methodology notes: a GPU is far quieter between processes, so fewer samples and a tighter
threshold suffice.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass


class Effort(str, enum.Enum):
    """How much measuring a benchmark gets: ``quick`` for a smoke run, ``thorough`` for release
    gates on noisy runners."""

    QUICK = "quick"
    STANDARD = "standard"
    THOROUGH = "thorough"

    def __str__(self) -> str:
        return self.value


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


@dataclass(frozen=True)
class GatePolicy:
    """The thresholds and confidence the gate decides with."""

    throughput_threshold: float
    memory_threshold: float
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


CPU = DevicePolicy(
    timing=TimingPolicy(
        warmup_min_steps=3,
        warmup_max_steps=30,
        warmup_max_s=3.0,
        warmup_tolerance=0.15,
        warmup_window=3,
        min_steps=6,
        max_steps=60,
        min_time_s=0.4,
    ),
    sampling=SamplingPolicy(samples=6, max_samples=12, save_samples=12),
    gate=GatePolicy(
        throughput_threshold=0.10,
        memory_threshold=0.05,
        alpha=0.01,
        ok_confidence=0.90,
        memory_slack_bytes=1 << 20,
    ),
)

CUDA = DevicePolicy(
    timing=TimingPolicy(
        warmup_min_steps=5,
        warmup_max_steps=200,
        warmup_max_s=20.0,
        warmup_tolerance=0.05,
        warmup_window=5,
        min_steps=20,
        max_steps=500,
        min_time_s=1.0,
    ),
    sampling=SamplingPolicy(samples=3, max_samples=6, save_samples=6),
    gate=GatePolicy(
        throughput_threshold=0.05,
        memory_threshold=0.05,
        alpha=0.01,
        ok_confidence=0.90,
        memory_slack_bytes=16 << 20,
    ),
)


def for_device(device_type: str) -> DevicePolicy:
    return CUDA if device_type == "cuda" else CPU


def with_tuning(
    policy: DevicePolicy, samples: int | None, min_time_s: float | None
) -> DevicePolicy:
    """Apply the ``cnnperf_samples`` and ``cnnperf_min_time`` ini settings."""
    if samples:
        policy = dataclasses.replace(
            policy,
            sampling=SamplingPolicy(samples, max_samples=2 * samples, save_samples=2 * samples),
        )
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
