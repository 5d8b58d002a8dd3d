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
    #: pids of other processes with a context on the GPU; ``None`` where NVML cannot tell (in
    #: a container with its own pid namespace it lists host pids, ours among them unrecognised)
    other_processes: tuple[int, ...] | None
    problems: tuple[str, ...]
    #: fraction of the measurement the GPU's clocks were held back, by cause (``power``,
    #: ``thermal``, ...), from NVML's cumulative violation counters
    throttled: dict[str, float] = field(default_factory=dict)

    @property
    def trustworthy(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class StepFlops:
    """Floating-point operations of one step, as PyTorch's own counter
    (``torch.utils.flop_counter.FlopCounterMode``) counts them: matrix products and
    convolutions only, two per multiply-add. Normalisation, activations, pooling, the loss's
    elementwise work and the optimizer's updates count 0 (the convention of torchvision's
    published operation counts and of MFU figures)."""

    #: per phase: ``forward`` (with the loss), ``backward``, ``optimizer``; ``step`` for a
    #: ``measure()`` step
    phases: dict[str, int]
    #: per operator, summed over the phases (``aten.convolution``, ``aten.mm``, ...)
    operators: dict[str, int]
    #: the items the counted step processed (one rank's batch in a data-parallel step)
    items: int
    #: ``meta``: counted on meta tensors, without computing; ``step``: counted on one real
    #: step, outside the timed ones
    method: str

    @property
    def total(self) -> int:
        return sum(self.phases.values())

    @property
    def per_item(self) -> float:
        return self.total / self.items

    @property
    def convolution_share(self) -> float:
        """The share of the FLOPs in convolutions (the rest: matrix products)."""
        conv = sum(v for k, v in self.operators.items() if "convolution" in k)
        return conv / self.total if self.total else 0.0


@dataclass(frozen=True)
class Peak:
    """The device's peak FLOP/s for the precision a benchmark ran in, which its utilisation
    (MFU) is measured against. ``flops_per_s`` is ``None`` when the peak is unknown, and
    ``detail`` then says why."""

    #: ``fp32``, ``tf32``, ``bf16`` or ``fp16``; ``None`` where the precision is unknown
    #: (a ``measure()`` step)
    precision: str | None
    flops_per_s: float | None
    #: ``table`` (a datasheet's dense figure), ``measured`` (a matrix product on the CPU),
    #: ``setting`` (``cnnperf_peak_tflops``) or ``unknown``
    source: str
    #: where the figure comes from, in words, or why there is none
    detail: str


#: the shortest timed window (all samples together) whose energy a report shows, per counter:
#: NVML's advances every 20 to 100 ms, so 2 s keeps its error under 10% at the slowest rate;
#: RAPL's every millisecond or so
ENERGY_MIN_WINDOW_S = {"nvml": 2.0, "rapl": 0.1}


@dataclass(frozen=True)
class Energy:
    """Energy the device used over timed steps, from its cumulative counter: NVML's for the
    whole GPU board, RAPL's for the CPU packages. Other processes on the device count too."""

    joules: float
    #: wall time between the two readings
    seconds: float
    #: items the timed steps processed on this device
    items: int
    #: ``nvml`` or ``rapl``
    source: str

    @property
    def joules_per_item(self) -> float:
        return self.joules / self.items

    @property
    def mean_power_w(self) -> float:
        return self.joules / self.seconds

    @property
    def min_window_s(self) -> float:
        return ENERGY_MIN_WINDOW_S.get(self.source, 2.0)

    @property
    def long_enough(self) -> bool:
        """Whether the window is long enough for the counter's update rate."""
        return self.seconds >= self.min_window_s

    @classmethod
    def total(cls, parts: Sequence[Energy]) -> Energy | None:
        """The energy of several windows together (the samples of a benchmark)."""
        if not parts:
            return None
        return cls(
            joules=sum(p.joules for p in parts),
            seconds=sum(p.seconds for p in parts),
            items=sum(p.items for p in parts),
            source=parts[0].source,
        )


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


#: a value of an inductor option as ``torch.compile(options=...)`` takes it
OptionValue = bool | int | float | str


@dataclass(frozen=True)
class CompileSetting:
    """How a benchmark is compiled: ``compile=`` of ``train_step`` and ``inference``, as the
    arguments of ``torch.compile`` it stands for (``dynamic`` defaults to ``False`` here: a
    benchmark's shapes are fixed)."""

    backend: str = "inductor"
    #: ``None``: torch's default mode
    mode: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = False
    #: inductor options, sorted by name
    options: tuple[tuple[str, OptionValue], ...] = ()

    def label(self) -> str:
        """``compile`` for ``compile=True``, else ``compile=`` and what differs from it:
        ``compile=max-autotune``, ``compile=aot_eager,fullgraph``."""
        parts = [] if self.backend == "inductor" else [self.backend]
        if self.mode:
            parts.append(self.mode)
        if self.fullgraph:
            parts.append("fullgraph")
        if self.dynamic is not False:
            parts.append(f"dynamic={'auto' if self.dynamic is None else 'true'}")
        parts += [f"{name}={value}" for name, value in self.options]
        return "compile=" + ",".join(parts) if parts else "compile"


@dataclass(frozen=True)
class GraphBreak:
    """Where ``torch.compile`` split a compiled function, and why."""

    #: the first line of Dynamo's reason: ``Failed to trace builtin operator``
    reason: str
    #: ``file:line`` of the code it broke at
    location: str | None = None
    #: that line of code
    code: str | None = None
    #: inside PyTorch's own code: the optimizer's deliberate breaks around its step
    internal: bool = False


@dataclass(frozen=True)
class Compilation:
    """What ``torch.compile`` did in one sample (see ``measuring.compiled``)."""

    #: first call until steady, less as many steady steps; ``None`` when this process had
    #: compiled it already (samples taken in-process after the first)
    compile_s: float | None
    #: the compiler cache at the first call: ``cold`` (nothing cached), ``warm`` (all of it),
    #: ``partial``; ``None`` where the backend keeps none
    cache: str | None
    #: graphs compiled
    graphs: int
    graph_breaks: tuple[GraphBreak, ...] = ()
    #: frames compiled again during the timed steps, and during the warm-up before them
    recompiles: int = 0
    warmup_recompiles: int = 0
    #: why they were recompiled (Dynamo's guard failures), first lines
    recompile_reasons: tuple[str, ...] = ()
    #: frames torch.compile gave up on at its recompile limit and ran eagerly from then on
    eager_frames: int = 0
    #: compiled graphs the CUDA-graph modes ran without CUDA graphs
    cudagraph_skips: int = 0

    @property
    def user_breaks(self) -> tuple[GraphBreak, ...]:
        """The graph breaks in the benchmark's code, not PyTorch's own."""
        return tuple(b for b in self.graph_breaks if not b.internal)


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
    #: compiled benchmarks: what compiling did
    compilation: Compilation | None = None
    #: which calibration workload ``calibration_s`` timed (``measuring.calibration``)
    calibration_unit: str | None = None
    #: the step's FLOPs, counted in the benchmark's first sample only (they do not vary)
    flops: StepFlops | None = None
    #: the device's peak for the precision in use, found with the FLOPs
    peak: Peak | None = None
    #: the energy the device used over the timed steps, where a counter is readable
    energy: Energy | None = None


#: the CPU's calibration workload (unchanged since before units had ids)
CPU_CALIBRATION_UNIT = "cpu-convnet-v1"
#: the calibration unit of samples and baselines recorded before units had ids, by device type:
#: on CUDA, four fp16 products of 2048², which mostly timed kernel launches on a large GPU
UNSTAMPED_CALIBRATION_UNITS = {"cpu": CPU_CALIBRATION_UNIT, "cuda": "cuda-mm-fp16-2048x4"}


def calibration_unit(stamped: str | None, device: str) -> str:
    """The calibration unit of a sample or baseline on ``device`` (``cpu``, ``cuda:0``)."""
    return stamped or UNSTAMPED_CALIBRATION_UNITS.get(device.split(":")[0], "unknown")


@dataclass(frozen=True)
class Flags:
    """The global switches that change how fast the same code runs."""

    cudnn_mode: str | None
    #: whether cuDNN convolutions and cuBLAS matmuls may use TF32 (CUDA runs), whichever API
    #: set it
    cudnn_tf32: bool | None
    matmul_tf32: bool | None
    #: ``torch.get_float32_matmul_precision()``; ``mixed`` where torch >= 2.9 refuses to say
    #: (the legacy and new APIs were mixed: ``fp32_precision`` then says what is in force)
    matmul_precision: str
    deterministic_algorithms: bool
    #: torch >= 2.9: the ``fp32_precision`` flags that are set (not ``none``), by backend and
    #: operator (``cuda.matmul``, ``cudnn.conv``, ``mkldnn``, ...); empty before 2.9
    fp32_precision: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompilerStack:
    """What compiled code was built with: Triton where present, the C++ compiler that
    inductor uses on the CPU."""

    triton: str | None = None
    #: the C++ compiler's command and the first line of its ``--version``
    cxx: str | None = None
    cxx_version: str | None = None

    def describe(self) -> str:
        parts = []
        if self.cxx_version or self.cxx:
            parts.append(self.cxx_version or self.cxx or "")
        if self.triton:
            parts.append(f"Triton {self.triton}")
        return ", ".join(parts) or "none"


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
    #: compiled benchmarks: the compiler stack
    compiler: CompilerStack | None = None

    #: fields whose change makes old baselines doubtful (reported, or failed in strict mode)
    SOFTWARE_FIELDS = ("torch", "torchvision", "cuda", "cudnn", "driver", "device_name")

    def changes_from(self, old: Environment) -> tuple[str, ...]:
        """Human-readable differences in software and hardware from ``old``."""
        changes = []
        for name in self.SOFTWARE_FIELDS:
            before, after = getattr(old, name), getattr(self, name)
            if before != after:
                changes.append(f"{name} {before or 'none'} -> {after or 'none'}")
        if self.compiler and old.compiler and self.compiler != old.compiler:
            changes.append(f"compiler {old.compiler.describe()} -> {self.compiler.describe()}")
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
    #: ``torch.compile``'s arguments; ``None``: eager
    compile: CompileSetting | None = None
    #: the whole step captured and replayed as a CUDA graph
    cuda_graphs: bool = False

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
        if self.compile:
            parts.append(self.compile.label())
        if self.cuda_graphs:
            parts.append("cuda_graphs")
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
    def calibration_unit(self) -> str | None:
        """The calibration workload's id as the samples recorded it (``None``: unstamped)."""
        return next((s.calibration_unit for s in self.samples if s.calibration_unit), None)

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
    def compilations(self) -> tuple[Compilation, ...]:
        """Compiled benchmarks: what compiling did in each sample."""
        return tuple(s.compilation for s in self.samples if s.compilation)

    def compile_time(self, cache: str) -> float | None:
        """Median compile time of the samples that found the compiler cache ``cold`` (nothing
        in it, or a backend that keeps none) or ``warm``."""
        caches = ("cold", "none") if cache == "cold" else (cache,)
        values = [
            c.compile_s for c in self.compilations if c.compile_s is not None and c.cache in caches
        ]
        return statistics.median(values) if values else None

    @property
    def graph_breaks(self) -> tuple[GraphBreak, ...]:
        """The graph breaks in the benchmark's code (not PyTorch's own), each once."""
        return tuple(dict.fromkeys(b for c in self.compilations for b in c.user_breaks))

    @property
    def recompiles(self) -> int:
        """Frames compiled again during the timed steps, in the sample with the most."""
        return max((c.recompiles for c in self.compilations), default=0)

    @property
    def warmup_recompiles(self) -> int:
        """Frames compiled again after the first step and before the timed steps, in the
        sample with the most."""
        return max((c.warmup_recompiles for c in self.compilations), default=0)

    @property
    def recompile_reasons(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for c in self.compilations for r in c.recompile_reasons))

    @property
    def eager_frames(self) -> int:
        """Frames that torch.compile gave up on and ran eagerly, in the worst sample."""
        return max((c.eager_frames for c in self.compilations), default=0)

    @property
    def cudagraph_skips(self) -> int:
        return max((c.cudagraph_skips for c in self.compilations), default=0)

    @property
    def flops(self) -> StepFlops | None:
        """The step's FLOPs (counted in one sample)."""
        return next((s.flops for s in self.samples if s.flops), None)

    @property
    def flops_per_step(self) -> float | None:
        """FLOPs of one step of all ``items_per_step`` (all ranks of a data-parallel step)."""
        flops = self.flops
        return flops.per_item * self.items_per_step if flops else None

    @property
    def achieved_flops_per_s(self) -> float | None:
        """FLOPs per step over the step time: what the step achieved."""
        flops = self.flops
        return flops.per_item * self.items_per_second if flops else None

    @property
    def peak(self) -> Peak | None:
        return next((s.peak for s in self.samples if s.peak), None)

    @property
    def utilisation(self) -> float | None:
        """Achieved FLOP/s over the device's peak for the precision in use (MFU)."""
        achieved, peak = self.achieved_flops_per_s, self.peak
        if achieved is None or peak is None or not peak.flops_per_s:
            return None
        return achieved / peak.flops_per_s

    @property
    def energy(self) -> Energy | None:
        """The energy of all samples' timed steps together."""
        return Energy.total([s.energy for s in self.samples if s.energy])

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


@dataclass(frozen=True)
class CompileComparison:
    """A compiled benchmark's compiler figures against its baseline's (``None``: no baseline,
    or it did not have the figure). Graph breaks and recompiles are counts, so any change
    counts; compile time is noisy (cold compiles of one model spread by half on a busy CPU)
    and fails only past its own threshold, when one is set."""

    graph_breaks: int
    baseline_graph_breaks: int | None
    #: frames compiled again during the timed steps, and frames run eagerly after giving up
    recompiles: int
    eager_frames: int
    #: frames compiled again before the timed steps (reported, not failed)
    warmup_recompiles: int = 0
    #: the compile times compared: the cold ones where both have them, else the warm ones
    cache: str | None = None
    compile_s: float | None = None
    baseline_compile_s: float | None = None
    #: compile-time growth that fails (``None``: it never does)
    threshold: float | None = None
    verdict: Verdict = Verdict.OK

    @property
    def compile_change(self) -> float | None:
        """Fractional growth of the compile time."""
        if self.compile_s is None or not self.baseline_compile_s:
            return None
        return self.compile_s / self.baseline_compile_s - 1


# ---- why the gate decided as it did: reasons as data, worded by ``explain`` ----


@dataclass(frozen=True)
class NoBaseline:
    """No baseline entry applies to the benchmark on this kind of machine."""

    #: the kind of machine whose baselines were looked for
    machine: str = ""
    #: other kinds of machine that have a baseline of the benchmark
    elsewhere: tuple[str, ...] = ()


@dataclass(frozen=True)
class MachineDrift:
    """The calibration workload ran at another speed than when the baseline was recorded."""

    #: calibration time now / in the baseline (above 1: the machine runs slower)
    ratio: float
    #: when the verdict depends on how much of the drift reached the benchmark: the verdicts
    #: as measured, allowing for all of it and for twice it; ``None`` when they agree
    verdicts: tuple[Verdict, Verdict, Verdict] | None = None


@dataclass(frozen=True)
class CalibrationChanged:
    """The calibration workload is another than the baseline's (a new version of the plugin
    sized it anew), so its times say nothing about the machine's speed: compared as measured."""

    baseline_unit: str
    current_unit: str


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
class NewGraphBreaks:
    """A compiled benchmark breaks its graph in more places than its baseline did."""

    count: int
    baseline_count: int
    #: the breaks the baseline did not have (all of them when only their lines moved)
    breaks: tuple[GraphBreak, ...]


@dataclass(frozen=True)
class Recompiled:
    """torch.compile compiled again during the timed steps, or gave up and ran eagerly: the
    steady figure is then not the compiled step's."""

    recompiles: int
    reasons: tuple[str, ...]
    eager_frames: int = 0


@dataclass(frozen=True)
class SlowerCompile:
    """Compiling took longer than the baseline's past ``compile_time_threshold``."""

    current_s: float
    baseline_s: float
    threshold: float
    cache: str


@dataclass(frozen=True)
class CudaGraphsSkipped:
    """A CUDA-graph compile mode ran compiled graphs without CUDA graphs (always on the CPU)."""

    count: int
    device: str


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
    | CalibrationChanged
    | SoftwareChanged
    | Disturbed
    | UntrustworthyGpu
    | SamplingChanged
    | NewGraphBreaks
    | Recompiled
    | SlowerCompile
    | CudaGraphsSkipped
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
    #: compiled benchmarks: graph breaks, recompiles and compile time against the baseline
    compile: CompileComparison | None = None


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
    #: the calibration workload's id (``None`` in baselines recorded before units had ids)
    calibration_unit: str | None = None
    peak_allocated_bytes: tuple[int, ...] = ()
    peak_reserved_bytes: int | None = None
    memory_source: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    cold_step_s: float | None = None
    in_process: bool = False
    #: compiled benchmarks: compile time with the compiler cache cold and warm, graph breaks
    compile_cold_s: float | None = None
    compile_warm_s: float | None = None
    graph_breaks: tuple[GraphBreak, ...] = ()

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
            calibration_unit=m.calibration_unit,
            peak_allocated_bytes=tuple(s.memory.allocated_bytes for s in m.samples if s.memory),
            peak_reserved_bytes=m.peak_reserved_bytes,
            memory_source=m.memory_source,
            phases_s={name: spread.median for name in m.phase_names if (spread := m.phase(name))},
            cold_step_s=m.cold_step_s,
            in_process=m.in_process,
            compile_cold_s=m.compile_time("cold"),
            compile_warm_s=m.compile_time("warm"),
            graph_breaks=m.graph_breaks,
        )

    @property
    def items_per_second(self) -> float:
        return self.items_per_step / statistics.median(self.step_time_s)


@dataclass(frozen=True)
class BaselineFile:
    """The baselines of one test module on one kind of machine: test -> key -> entry.

    The file names its machine and its test module itself, so that a copy or a download of it
    compares and gates like the original (files from before ``module`` was written lack it)."""

    machine: str
    entries: dict[str, dict[str, BaselineEntry]]
    #: the test module's key, e.g. ``tests/perf/test_models`` (see ``location.module_key``)
    module: str | None = None
