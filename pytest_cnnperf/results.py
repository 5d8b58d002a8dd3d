"""What a benchmark produces: samples, measurements, environments, verdicts and results.

Plain frozen dataclasses with no torch in them, so that reports, baselines and the ``cnnperf``
command can read and write them anywhere. ``formats`` maps them to JSON files and back.
"""

from __future__ import annotations

import dataclasses
import enum
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field


class Verdict(str, enum.Enum):
    """The outcome of one benchmark against its baseline."""

    OK = "ok"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    SAVED = "saved"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Spread:
    """Median and spread of a set of values (seconds, bytes, ...)."""

    median: float
    q1: float
    q3: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("a spread needs at least one value")
        ordered = sorted(values)
        if len(ordered) == 1:
            q1 = q3 = ordered[0]
        else:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        return cls(
            median=statistics.median(ordered),
            q1=q1,
            q3=q3,
            low=ordered[0],
            high=ordered[-1],
            n=len(ordered),
        )

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def relative_iqr(self) -> float:
        """IQR / median: torch.utils.benchmark warns above 0.1 ("system fluctuation")."""
        return self.iqr / self.median if self.median else 0.0


@dataclass(frozen=True)
class MemoryPeak:
    """Peak memory of a steady-state step, read in a pass of its own.

    CUDA: the caching allocator's peak allocated and reserved bytes. CPU: the peak of tensor
    bytes alive during a step, as PyTorch's profiler tracks allocations (``allocated_bytes``),
    and the process's peak resident set size over that pass (``reserved_bytes``).
    """

    allocated_bytes: int
    reserved_bytes: int | None
    source: str
    alloc_retries: int | None = None


@dataclass(frozen=True)
class DeviceHealth:
    """The GPU's state around a measurement, from NVML."""

    sm_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None
    clock_event_reasons: tuple[str, ...]
    other_processes: tuple[int, ...]
    problems: tuple[str, ...]

    @property
    def trustworthy(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class TimedSteps:
    """The timed part of a sample: the cold step, the warm-up and a block of timed steps.

    ``step_time_s`` is the sample's figure that the gate compares: the median of its step
    times on the CPU, the synchronized wall clock of its timed block divided by its steps on
    CUDA. ``phases`` holds per-step times of forward + loss, backward and the optimizer step
    (CUDA events on a GPU).
    """

    step_time_s: float
    step_times_s: tuple[float, ...]
    phases: dict[str, tuple[float, ...]]
    cold_step_s: float
    #: steps run before the timed block: the cold one, the warm-up, one to size the block
    warmup_steps: int
    warmup_steady: bool


@dataclass(frozen=True)
class Sample(TimedSteps):
    """One independent measurement: a fresh process (or one in-process round) of timed steps,
    with what was measured around them."""

    calibration_s: float | None
    memory: MemoryPeak | None
    health: DeviceHealth | None = None
    in_process: bool = False
    #: data-parallel runs: the step time of one rank alone, measured in the same process
    single_rank_step_s: float | None = None
    #: CPU runs: cores' worth of CPU time other processes and the hypervisor denied this
    #: process's threads during the timed steps (see ``measuring.cpuload``); ``None`` off Linux
    cpu_contention: float | None = None


@dataclass(frozen=True)
class Flags:
    """The global switches that change how fast the same code runs."""

    cudnn_mode: str | None
    cudnn_tf32: bool | None
    matmul_tf32: bool | None
    matmul_precision: str
    deterministic_algorithms: bool


@dataclass(frozen=True)
class Environment:
    """What the numbers belong to. ``machine`` names the kind of machine whose baselines apply."""

    machine: str
    device: str
    device_name: str
    driver: str | None
    cuda: str | None
    cudnn: str | None
    torch: str
    torchvision: str | None
    python: str
    platform: str
    cpu: str
    threads: int
    interop_threads: int
    flags: Flags

    #: fields whose change makes old baselines doubtful (reported, or failed in strict mode)
    SOFTWARE_FIELDS = ("torch", "torchvision", "cuda", "cudnn", "driver", "device_name")

    def changes_from(self, old: Environment) -> tuple[str, ...]:
        """Human-readable differences in software and hardware from ``old``."""
        changes = []
        for name in self.SOFTWARE_FIELDS:
            before, after = getattr(old, name), getattr(self, name)
            if before != after:
                changes.append(f"{name} {before or 'none'} -> {after or 'none'}")
        return tuple(changes)

    def describe(self) -> str:
        """One line for reports: device, software stack and threads."""
        parts = [self.device_name]
        if self.cuda:
            parts.append(f"CUDA {self.cuda}")
        if self.cudnn:
            parts.append(f"cuDNN {self.cudnn}")
        if self.driver:
            parts.append(f"driver {self.driver}")
        parts.append(f"torch {self.torch}")
        if self.torchvision:
            parts.append(f"torchvision {self.torchvision}")
        parts.append(f"Python {self.python}")
        parts.append(f"{self.threads} thread{'' if self.threads == 1 else 's'}")
        return ", ".join(parts)


@dataclass(frozen=True)
class BenchConfig:
    """The configuration that identifies a benchmark inside its test."""

    kind: str
    model: str
    batch_size: int
    image_size: tuple[int, int] | None
    amp: str | None = None
    channels_last: bool = False
    optimizer: str | None = None
    loss: str | None = None
    cudnn_mode: str | None = None
    world_size: int = 1
    unit: str = "images"
    label: str | None = None

    def key(self) -> str:
        """A stable, readable key: ``train_step resnet18 bs=32 224x224 amp=bf16 channels_last``."""
        parts = [self.kind, self.label or self.model, f"bs={self.batch_size}"]
        if self.image_size:
            parts.append(f"{self.image_size[0]}x{self.image_size[1]}")
        if self.amp:
            parts.append(f"amp={self.amp}")
        if self.channels_last:
            parts.append("channels_last")
        if self.optimizer:
            parts.append(f"opt={self.optimizer}")
        if self.loss:
            parts.append(f"loss={self.loss}")
        if self.cudnn_mode:
            parts.append(f"cudnn={self.cudnn_mode}")
        if self.world_size != 1:
            parts.append(f"world={self.world_size}")
        return " ".join(parts)


@dataclass(frozen=True)
class Measurement:
    """All samples of one benchmark, with the figures reports show."""

    items_per_step: int
    samples: tuple[Sample, ...]
    unit: str = "images"

    @property
    def step_times(self) -> tuple[float, ...]:
        return tuple(s.step_time_s for s in self.samples)

    @property
    def step(self) -> Spread:
        """Spread of the samples' step times: the between-process noise."""
        return Spread.of(self.step_times)

    @property
    def step_time_s(self) -> float:
        return self.step.median

    @property
    def items_per_second(self) -> float:
        return self.items_per_step / self.step_time_s

    @property
    def cold_step_s(self) -> float:
        return statistics.median(s.cold_step_s for s in self.samples)

    def phase(self, name: str) -> Spread | None:
        """Spread of one phase's per-step times, pooled over samples."""
        values = [t for s in self.samples for t in s.phases.get(name, ())]
        return Spread.of(values) if values else None

    @property
    def phase_names(self) -> tuple[str, ...]:
        names: dict[str, None] = {}
        for sample in self.samples:
            names.update(dict.fromkeys(sample.phases))
        return tuple(names)

    @property
    def calibrations(self) -> tuple[float, ...]:
        return tuple(s.calibration_s for s in self.samples if s.calibration_s is not None)

    @property
    def peak_allocated_bytes(self) -> int | None:
        values = [s.memory.allocated_bytes for s in self.samples if s.memory]
        return int(statistics.median(values)) if values else None

    @property
    def peak_reserved_bytes(self) -> int | None:
        values = [
            s.memory.reserved_bytes for s in self.samples if s.memory and s.memory.reserved_bytes
        ]
        return int(statistics.median(values)) if values else None

    @property
    def memory_source(self) -> str | None:
        return next((s.memory.source for s in self.samples if s.memory), None)

    @property
    def health_problems(self) -> tuple[str, ...]:
        problems: dict[str, None] = {}
        for sample in self.samples:
            if sample.health:
                problems.update(dict.fromkeys(sample.health.problems))
        return tuple(problems)

    @property
    def in_process(self) -> bool:
        return any(s.in_process for s in self.samples)

    @property
    def scaling_efficiency(self) -> float | None:
        """Data-parallel runs: throughput of all ranks / (ranks x throughput of one rank alone),
        which is the single rank's step time over the data-parallel step time."""
        ratios = [
            s.single_rank_step_s / s.step_time_s for s in self.samples if s.single_rank_step_s
        ]
        return statistics.median(ratios) if ratios else None


@dataclass(frozen=True)
class Comparison:
    """One metric of a fresh measurement against its baseline.

    ``change`` is relative and signed so that positive is worse: for throughput the fractional
    loss of items per second, for memory the fractional growth. ``low`` and ``high`` bound it
    with the gate's confidence; ``p_value`` is the one-sided test for "worse".
    """

    metric: str
    baseline: float
    current: float
    change: float
    threshold: float
    verdict: Verdict
    p_value: float | None = None
    low: float | None = None
    high: float | None = None
    baseline_samples: int = 0
    current_samples: int = 0
    #: throughput: how much slower the machine ran than for the baseline (calibration workload,
    #: current / baseline); ``change`` allows for it, ``raw_change`` does not
    machine_factor: float = 1.0
    raw_change: float | None = None


# ---- why the gate decided as it did: reasons as data, worded by ``explain`` ----


@dataclass(frozen=True)
class NoBaseline:
    """No baseline entry applies to the benchmark."""


@dataclass(frozen=True)
class MachineDrift:
    """The calibration workload ran at another speed than when the baseline was recorded."""

    #: calibration time now / in the baseline (above 1: the machine runs slower)
    ratio: float
    #: when the verdict depends on how much of the drift reached the benchmark: the verdicts
    #: as measured, allowing for all of it and for twice it; ``None`` when they agree
    verdicts: tuple[Verdict, Verdict, Verdict] | None = None


@dataclass(frozen=True)
class SoftwareChanged:
    """The software changed since the baseline, so times were compared as measured too."""


class Disturbance(str, enum.Enum):
    """What disturbed samples did to a verdict."""

    #: a third of the samples or more were disturbed; the verdict stands
    NOTED = "noted"
    #: a regression shows in the undisturbed samples alone
    QUIET_REGRESSED = "quiet-regressed"
    #: the undisturbed samples alone show no regression: no throughput verdict
    NO_VERDICT = "no-verdict"
    #: a third of the samples or more of a recorded baseline were disturbed
    RECORDED = "recorded"


@dataclass(frozen=True)
class Disturbed:
    """Samples taken while something else ran on the machine (see ``gate.disturbed``)."""

    count: int
    total: int
    effect: Disturbance


@dataclass(frozen=True)
class UntrustworthyGpu:
    """NVML reported conditions that make GPU timings untrustworthy."""

    problems: tuple[str, ...]


@dataclass(frozen=True)
class SamplingChanged:
    """The baseline's samples were taken otherwise (in-process or in fresh processes)."""

    baseline_in_process: bool
    current_in_process: bool


@dataclass(frozen=True)
class Creep:
    """The benchmark is worse than the best of its recent runs on this machine in the history by
    more than the creep threshold (``--cnnperf-creep``), whatever its baseline says."""

    #: the metrics past the threshold, each against the best run's figure
    comparisons: tuple[Comparison, ...]
    #: the recent runs the best was taken from
    runs: int
    #: the best run: its commit (``None`` when unknown) and when it was recorded
    best_commit: str | None
    best_recorded: str
    unit: str = "images"


@dataclass(frozen=True)
class Remark:
    """A note as text, as a results file keeps it."""

    text: str


Reason = (
    NoBaseline
    | MachineDrift
    | SoftwareChanged
    | Disturbed
    | UntrustworthyGpu
    | SamplingChanged
    | Creep
    | Remark
)


@dataclass(frozen=True)
class Decision:
    """The gate's verdict on one benchmark, with the evidence for it."""

    verdict: Verdict
    throughput: Comparison | None = None
    memory: Comparison | None = None
    machine_speed: float | None = None
    environment_changes: tuple[str, ...] = ()
    reasons: tuple[Reason, ...] = ()
    baseline_file: str | None = None
    failed: bool = False
    #: whether more samples could change the verdict
    remeasure: bool = False


@dataclass(frozen=True)
class BenchmarkResult:
    """Everything known about one benchmark after it ran."""

    test_id: str
    key: str
    config: BenchConfig
    decision: Decision
    environment: Environment | None = None
    measurement: Measurement | None = None
    duration_s: float = 0.0
    error: str | None = None

    @property
    def name(self) -> str:
        """The test id, with the configuration key when a test measures more than one thing."""
        return f"{self.test_id} [{self.key}]"

    def with_decision(self, decision: Decision) -> BenchmarkResult:
        return dataclasses.replace(self, decision=decision)


@dataclass(frozen=True)
class ResultsFile:
    """The ``--cnnperf-json`` document: every result of a session."""

    created: str
    machine: str | None
    results: tuple[BenchmarkResult, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class BaselineEntry:
    """One benchmark's baseline: its configuration, environment and per-sample figures."""

    recorded: str
    config: BenchConfig
    environment: Environment
    items_per_step: int
    step_time_s: tuple[float, ...]
    calibration_s: tuple[float, ...] = ()
    peak_allocated_bytes: tuple[int, ...] = ()
    peak_reserved_bytes: int | None = None
    memory_source: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    cold_step_s: float | None = None
    in_process: bool = False

    @classmethod
    def of(
        cls, recorded: str, config: BenchConfig, environment: Environment, m: Measurement
    ) -> BaselineEntry:
        """The entry that records ``m`` as the baseline of ``config``."""
        return cls(
            recorded=recorded,
            config=config,
            environment=environment,
            items_per_step=m.items_per_step,
            step_time_s=m.step_times,
            calibration_s=m.calibrations,
            peak_allocated_bytes=tuple(s.memory.allocated_bytes for s in m.samples if s.memory),
            peak_reserved_bytes=m.peak_reserved_bytes,
            memory_source=m.memory_source,
            phases_s={name: spread.median for name in m.phase_names if (spread := m.phase(name))},
            cold_step_s=m.cold_step_s,
            in_process=m.in_process,
        )

    @property
    def items_per_second(self) -> float:
        return self.items_per_step / statistics.median(self.step_time_s)


@dataclass(frozen=True)
class BaselineFile:
    """The baselines of one test module on one kind of machine: test -> key -> entry."""

    machine: str
    entries: dict[str, dict[str, BaselineEntry]]
