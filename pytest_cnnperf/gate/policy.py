"""How hard to measure and how strictly to judge, per device and effort level, and a test's
:class:`Plan`: all of it resolved once from the test's settings.

The tuned numbers that are not settings live here; those a user can set (thresholds, samples,
seconds of timed steps) are rows of :mod:`pytest_cnnperf.settings`, with their defaults per
device. The manual's validation page says how the CPU figures were chosen; a GPU is far quieter
between processes, so fewer samples and a tighter threshold suffice there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .. import settings as s
from ..count_kinds import GATED_BY_DEFAULT
from ..measuring.sample import SamplePlan
from ..measuring.timing import TimingPolicy
from ..model import BenchConfig
from ..parsers import Effort
from ..settings import MIN_TIME, SAMPLES, Configuration, Settings
from .design import Design, doubling

#: samples at a gated run's first look: the fewest whose exact test can reach a look's share of
#: the false-alarm rate against a baseline of a dozen
FIRST_LOOK = 3
#: steps whose instructions are counted (``--cnnperf-metric=instructions``), after one
#: instrumented step uncounted (lazy initialisation, the allocator's growth and the
#: interpreter's specialising happen there): the fewer is the figure, their spread a check
COUNTED_STEPS = 2


@dataclass(frozen=True)
class SamplingPolicy:
    """How many samples (fresh processes) a benchmark takes."""

    #: samples at a gated run's first look; the looks double from there to ``cap``
    first: int
    #: the most samples a gated run takes
    cap: int
    #: the fewest a save keeps; ``None``: what a first look against the baseline needs
    save: int | None = None

    @classmethod
    def of(cls, cap: int) -> SamplingPolicy:
        """At most ``cap`` samples, looking first after three (or ``cap``, if fewer)."""
        return cls(first=min(FIRST_LOOK, cap), cap=cap)

    def design(self, gate: GatePolicy) -> Design:
        """The sequential design of a gated run: its looks and error rates."""
        return Design(doubling(self.first, self.cap), gate.alpha, gate.beta)


@dataclass(frozen=True)
class GatePolicy:
    """The error rates the gate decides with (the thresholds are settings)."""

    #: the rate of calling a regression on unchanged code, over all looks (and the same for
    #: an improvement)
    alpha: float
    #: the rate of calling a slowdown of the threshold's size "ok", over all looks
    beta: float
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
    "cpu": GatePolicy(alpha=0.01, beta=0.05, memory_slack_bytes=1 << 20),
    "cuda": GatePolicy(alpha=0.01, beta=0.05, memory_slack_bytes=16 << 20),
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
    """The policy of a device at an effort level, with the ``samples`` (the most a gated run
    takes) and ``min_time`` settings where they were given (they hold whatever the effort)."""
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
    anything from it) and saves two, ``thorough`` doubles samples and steps."""
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
        sampling = SamplingPolicy(first=1, cap=1, save=2)
    else:
        timing = dataclasses.replace(t, min_steps=t.min_steps * 2, min_time_s=t.min_time_s * 2)
        sampling = dataclasses.replace(s, cap=s.cap * 2)
    return dataclasses.replace(policy, timing=timing, sampling=sampling)


@dataclass(frozen=True)
class GateSettings:
    """The gate policy with a test's thresholds and strictness resolved."""

    policy: GatePolicy
    throughput_threshold: float
    memory_threshold: float
    strict: bool
    #: compile-time growth that fails a compiled benchmark; ``None``: never
    compile_time_threshold: float | None = None
    #: which verdicts name the operators that changed: ``changes`` (regressed and improved),
    #: ``always`` or ``off``
    attribution: str = "changes"
    #: the kinds of exact counts that fail a benchmark when they grow (``model.structure``),
    #: and the host-device synchronisations per step it may add
    structure: frozenset[str] = GATED_BY_DEFAULT
    allowed_syncs: int = 0
    #: what gates throughput: ``time`` or ``instructions`` (counted under callgrind), and the
    #: growth of instructions per step that fails
    metric: str = "time"
    instructions_threshold: float = 0.01


@dataclass(frozen=True)
class CreepPlan:
    """The creep gate's threshold and the recent runs it takes the best of."""

    threshold: float
    runs: int


@dataclass(frozen=True)
class Plan:
    """How a test's benchmarks are measured and judged, resolved once from its settings."""

    #: how each sample is taken
    sample: SamplePlan
    sampling: SamplingPolicy
    gate: GateSettings
    #: record baselines instead of gating
    save: bool
    #: the folder the profiled steps' traces are written to (``--cnnperf-trace``)
    trace: Path | None
    #: ``None``: the creep gate does not judge this run
    creep: CreepPlan | None


def plan(values: Settings, configuration: Configuration, device_type: str) -> Plan:
    """The plan of a test whose settings (with its marker's) are ``values``."""
    given = configuration.given
    policy = for_run(
        device_type,
        values[s.EFFORT],
        samples=values[SAMPLES] if given(SAMPLES) else None,
        min_time_s=values[MIN_TIME] if given(MIN_TIME) else None,
    )
    creep = values[s.CREEP]
    applies = creep is not None and values[s.HISTORY] is not None and not values[s.CREEP_ACCEPT]
    return Plan(
        sample=SamplePlan(
            timing=policy.timing,
            calibrate=values[s.CALIBRATION],
            machine=values[s.MACHINE],
            peak_tflops=values[s.PEAK_TFLOPS],
        ),
        sampling=policy.sampling,
        gate=GateSettings(
            policy=policy.gate,
            throughput_threshold=values[s.THRESHOLD],
            memory_threshold=values[s.MEMORY_THRESHOLD],
            strict=values[s.STRICT],
            compile_time_threshold=values[s.COMPILE_TIME_THRESHOLD],
            attribution=values[s.ATTRIBUTION],
            structure=values[s.STRUCTURE],
            allowed_syncs=values[s.ALLOWED_SYNCS],
            metric=values[s.METRIC],
            instructions_threshold=values[s.INSTRUCTIONS_THRESHOLD],
        ),
        save=values[s.SAVE],
        trace=values[s.TRACE],
        creep=CreepPlan(creep, values[s.CREEP_RUNS]) if applies and creep is not None else None,
    )


def uncountable(config: BenchConfig, world_size: int, device: str) -> str | None:
    """Why ``config`` cannot be gated by its instructions on ``device``, or ``None``."""
    fix = "gate it by time: @pytest.mark.cnnperf(metric='time')"
    if device.split(":")[0] != "cpu":
        return (
            f"metric='instructions' counts instructions on the CPU, and this run measures "
            f"on {device}; {fix}, or run it with --cnnperf-device=cpu"
        )
    if config.compile is not None:
        return (
            f"{config.compile.label()} under metric='instructions': compiling under Valgrind "
            f"takes hours, and a compiled step's kernels are generated code; {fix}"
        )
    if config.loader is not None:
        return (
            "train_loop under metric='instructions': the loader's worker processes and its "
            f"waits are not the step's instructions; {fix}, or count the step alone with "
            "train_step"
        )
    if world_size != 1:
        return f"world_size={world_size} under metric='instructions': one process is counted; {fix}"
    return None
