"""What a benchmark measured: its samples and the figures reports show of them."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, TypeVar, overload

from .parts import Compilation, GraphBreak, Instructions, Loading
from .profile import PeakParts, Profile
from .structure import StepNumbers, Structure
from .values import NONEMPTY, Bytes, Count, NonNegative, Positive, PositiveInt, Seconds

T = TypeVar("T")
R = TypeVar("R")


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
    def relative_iqr(self) -> float:
        """IQR / median: torch.utils.benchmark warns above 0.1 ("system fluctuation")."""
        return (self.q3 - self.q1) / self.median if self.median else 0.0


@dataclass(frozen=True)
class MemoryPeak:
    """Peak memory of a steady-state step, read in a pass of its own.

    CUDA: the caching allocator's peak allocated and reserved bytes. CPU: the peak of tensor
    bytes alive during a step, as PyTorch's profiler tracks allocations (``allocated_bytes``),
    and the process's peak resident set size over that pass (``reserved_bytes``).
    """

    allocated_bytes: Bytes
    reserved_bytes: Bytes | None
    source: str
    alloc_retries: Count | None = None
    #: what the peak holds for certain: the weights, their gradients and the optimizer's state
    #: (``None`` where the step has no model or optimizer of ours, or in older files)
    parameters_bytes: Bytes | None = None
    gradients_bytes: Bytes | None = None
    optimizer_bytes: Bytes | None = None

    @property
    def parts(self) -> PeakParts | None:
        """The breakdown, where the pass recorded one (the rest: activations, workspaces, the
        batch)."""
        weights, grads, state = self.parameters_bytes, self.gradients_bytes, self.optimizer_bytes
        if weights is None or grads is None or state is None:
            return None
        return PeakParts(
            weights, grads, state, max(0, self.allocated_bytes - weights - grads - state)
        )


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
    throttled: dict[str, NonNegative] = field(default_factory=dict)


@dataclass(frozen=True)
class StepFlops:
    """Floating-point operations of one step, as PyTorch's own counter
    (``torch.utils.flop_counter.FlopCounterMode``) counts them: matrix products and
    convolutions only, two per multiply-add. Normalisation, activations, pooling, the loss's
    elementwise work and the optimizer's updates count 0 (the convention of torchvision's
    published operation counts and of MFU figures)."""

    #: per phase: ``forward`` (with the loss), ``backward``, ``optimizer``; ``step`` for a
    #: ``measure()`` step
    phases: dict[str, Count]
    #: per operator, summed over the phases (``aten.convolution``, ``aten.mm``, ...)
    operators: dict[str, Count]
    #: the items the counted step processed (one rank's batch in a data-parallel step)
    items: PositiveInt
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
    flops_per_s: Positive | None
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

    joules: NonNegative
    #: wall time between the two readings
    seconds: Positive
    #: items the timed steps processed on this device
    items: PositiveInt
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
class Sample:
    """One independent measurement: a fresh process (or one in-process round) of timed steps,
    with what was measured around them.

    ``step_time_s`` is the figure the gate compares: the median of the sample's step times on
    the CPU, the synchronized wall clock of its timed block over its steps on CUDA. A baseline
    keeps a sample without its steps (see :meth:`without_steps`)."""

    step_time_s: Seconds
    step_times_s: tuple[Seconds, ...] = ()
    #: per-step times of forward + loss, backward and the optimizer step (CUDA events on a GPU)
    phases: dict[str, tuple[NonNegative, ...]] = field(default_factory=dict)
    #: the first step, cold; the steps run before the timed block, and whether they steadied
    cold_step_s: NonNegative | None = None
    warmup_steps: Count | None = None
    warmup_steady: bool | None = None
    #: the calibration workload's time, and which workload it was (``measuring.calibration``)
    calibration_s: Seconds | None = None
    calibration_unit: str | None = None
    memory: MemoryPeak | None = None
    health: DeviceHealth | None = None
    in_process: bool = False
    #: data-parallel runs: the step time of one rank alone, measured in the same process
    single_rank_step_s: Seconds | None = None
    #: CPU runs: cores' worth of CPU time other processes and the hypervisor denied this
    #: process's threads during the timed steps (see ``measuring.cpuload``); ``None`` off Linux
    cpu_contention: NonNegative | None = None
    #: compiled benchmarks: what compiling did
    compilation: Compilation | None = None
    #: the step's FLOPs, counted in the benchmark's first sample only (they do not vary)
    flops: StepFlops | None = None
    #: the device's peak for the precision in use, found with the FLOPs
    peak: Peak | None = None
    #: the energy the device used over the timed steps, where a counter is readable
    energy: Energy | None = None
    #: the model's parameters, trainable or not (``None``: a ``measure()`` step has no model)
    parameters: Count | None = None
    #: where the step's time and memory go, operator by operator (in one sample of a
    #: benchmark); why there is none when profiling failed
    profile: Profile | None = None
    profile_error: str | None = None
    #: what the step calls, exactly, counted in the benchmark's first sample (see
    #: ``model.structure``)
    structure: Structure | None = None
    #: why there are no counts, when counting the step failed
    structure_error: str | None = None
    #: what a train step's first steps compute from the initial weights (in its first sample)
    numbers: StepNumbers | None = None
    #: ``train_loop``: what the sample measured of the loader (the step time is end to end:
    #: waiting for the batch, copying it, and the train step)
    loading: Loading | None = None
    #: ``--cnnperf-metric=instructions``: the step's instructions, counted in a process under
    #: callgrind, kept with the benchmark's first sample
    instructions: Instructions | None = None

    def without_steps(self) -> Sample:
        """The sample as a baseline keeps it: each phase's median instead of its steps."""
        return dataclasses.replace(
            self,
            step_times_s=(),
            phases={
                name: (statistics.median(times),) for name, times in self.phases.items() if times
            },
        )


def _first(values: list[T]) -> T | None:
    return values[0] if values else None


def _most(values: list[int]) -> int:
    return max(values, default=0)


def _each(values: list[tuple[T, ...]]) -> tuple[T, ...]:
    """Every item of every tuple, each once, in the order met."""
    return tuple(dict.fromkeys(item for items in values for item in items))


class Pooled(Generic[T, R]):
    """A figure of the :class:`Measurement` pooled from each sample's figure at ``path`` (a
    field, ``compilation.recompiles``: by default the figure's own name), those that have it
    (not ``None``): declared once with how they combine, as ``energy = Pooled(Energy.total)``."""

    def __init__(self, combine: Callable[[list[T]], R], path: str = "") -> None:
        self.combine = combine
        self.path = path.split(".") if path else []

    def __set_name__(self, owner: type, name: str) -> None:
        self.path = self.path or [name]

    @overload
    def __get__(self, measurement: None, owner: type) -> Pooled[T, R]: ...

    @overload
    def __get__(self, measurement: Measurement, owner: type) -> R: ...

    def __get__(self, measurement: Measurement | None, owner: type) -> Pooled[T, R] | R:
        if measurement is None:  # on the class: the descriptor itself
            return self
        found = []
        for sample in measurement.samples:
            value: Any = sample
            for name in self.path:
                value = getattr(value, name) if value is not None else None
            if value is not None:
                found.append(value)
        return self.combine(found)


class Once(Pooled[T, "T | None"]):
    """A figure one sample takes for the whole benchmark (they do not vary: FLOPs, counts, the
    first steps' numbers): the first sample's that has it, as ``flops = Once[StepFlops]()``."""

    def __init__(self) -> None:
        super().__init__(_first)


@dataclass(frozen=True)
class Measurement:
    """All samples of one benchmark, with the figures reports show."""

    items_per_step: PositiveInt
    samples: Annotated[tuple[Sample, ...], NONEMPTY]
    unit: str = "images"

    # the figures one sample takes for the benchmark
    flops = Once[StepFlops]()
    peak = Once[Peak]()
    parameters = Once[int]()
    structure = Once[Structure]()
    structure_error = Once[str]()
    numbers = Once[StepNumbers]()
    #: the calibration workload's id as the samples recorded it (``None``: unstamped)
    calibration_unit = Once[str]()
    instructions = Once[Instructions]()
    profile_error = Once[str]()

    # the figures pooled from every sample's
    step_times = Pooled[float, tuple[float, ...]](tuple, "step_time_s")
    calibrations = Pooled[float, tuple[float, ...]](tuple, "calibration_s")
    #: the peak allocated bytes of the samples that measured memory
    memory_peaks = Pooled[int, tuple[int, ...]](tuple, "memory.allocated_bytes")
    health_problems = Pooled[tuple[str, ...], tuple[str, ...]](_each, "health.problems")
    in_process = Pooled[bool, bool](any)
    #: the energy of all samples' timed steps together
    energy = Pooled(Energy.total)
    #: the operator profile of the samples that took one, merged
    profile = Pooled(Profile.merged)

    # compiled benchmarks: what compiling did in each sample, and in the sample with the most
    compilations = Pooled[Compilation, tuple[Compilation, ...]](tuple, "compilation")
    #: the graph breaks in the benchmark's code (not PyTorch's own), each once
    graph_breaks = Pooled[tuple[GraphBreak, ...], tuple[GraphBreak, ...]](
        _each, "compilation.user_breaks"
    )
    recompile_reasons = Pooled[tuple[str, ...], tuple[str, ...]](
        _each, "compilation.recompile_reasons"
    )
    #: frames compiled again during the timed steps, and after the first step before them
    recompiles = Pooled(_most, "compilation.recompiles")
    warmup_recompiles = Pooled(_most, "compilation.warmup_recompiles")
    #: frames that torch.compile gave up on and ran eagerly
    eager_frames = Pooled(_most, "compilation.eager_frames")
    cudagraph_skips = Pooled(_most, "compilation.cudagraph_skips")

    def without_steps(self) -> Measurement:
        """The measurement as a baseline keeps it: its samples without their steps, and their
        operator profiles merged into one, kept by the first sample that took one (a baseline
        entry grows by one profile, not one a profiled sample)."""
        samples = [s.without_steps() for s in self.samples]
        profiled = [i for i, s in enumerate(samples) if s.profile is not None]
        for i in profiled:
            kept = self.profile if i == profiled[0] else None
            samples[i] = dataclasses.replace(samples[i], profile=kept)
        return dataclasses.replace(self, samples=tuple(samples))

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
    def rates(self) -> tuple[float, ...]:
        """Each sample's throughput."""
        return tuple(self.items_per_step / t for t in self.step_times)

    def phase(self, name: str) -> Spread | None:
        """Spread of one phase's per-step times, pooled over samples."""
        values = [t for s in self.samples for t in s.phases.get(name, ())]
        return Spread.of(values) if values else None

    @property
    def peak_allocated_bytes(self) -> int | None:
        values = self.memory_peaks
        return int(statistics.median(values)) if values else None

    def compile_time(self, cache: str) -> float | None:
        """Median compile time of the samples that found the compiler cache ``cold`` (nothing
        in it, or a backend that keeps none) or ``warm``."""
        caches = ("cold", "none") if cache == "cold" else (cache,)
        values = [
            c.compile_s for c in self.compilations if c.compile_s is not None and c.cache in caches
        ]
        return statistics.median(values) if values else None

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
    def utilisation(self) -> float | None:
        """Achieved FLOP/s over the device's peak for the precision in use (MFU)."""
        achieved, peak = self.achieved_flops_per_s, self.peak
        if achieved is None or peak is None or not peak.flops_per_s:
            return None
        return achieved / peak.flops_per_s

    @property
    def joules_per_item(self) -> float | None:
        """Energy per item, where the timed window was long enough for the counter to show."""
        energy = self.energy
        return energy.joules_per_item if energy and energy.long_enough else None

    @property
    def memory(self) -> MemoryPeak | None:
        """The memory pass of the median peak, with its breakdown."""
        peaks = sorted(
            (s.memory for s in self.samples if s.memory), key=lambda m: m.allocated_bytes
        )
        return peaks[(len(peaks) - 1) // 2] if peaks else None

    @property
    def peak_parts(self) -> PeakParts | None:
        """What the median peak holds, where its pass recorded that."""
        return self.memory.parts if self.memory else None

    @property
    def scaling_efficiency(self) -> float | None:
        """Data-parallel runs: throughput of all ranks / (ranks x throughput of one rank alone),
        which is the single rank's step time over the data-parallel step time."""
        ratios = [
            s.single_rank_step_s / s.step_time_s for s in self.samples if s.single_rank_step_s
        ]
        return statistics.median(ratios) if ratios else None
