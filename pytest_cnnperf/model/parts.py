"""The parts of a sample that only some benchmarks measure: what ``torch.compile`` did (compiled
ones), the loader's waits (``train_loop``) and the step's instructions
(``--cnnperf-metric=instructions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .values import Count, NonNegative, PositiveInt, Seconds


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
    compile_s: NonNegative | None
    #: the compiler cache at the first call: ``cold`` (nothing cached), ``warm`` (all of it),
    #: ``partial``; ``None`` where the backend keeps none
    cache: str | None
    #: graphs compiled (``None`` in baselines recorded before version 2)
    graphs: Count | None = None
    graph_breaks: tuple[GraphBreak, ...] = ()
    #: frames compiled again during the timed steps, and during the warm-up before them
    recompiles: Count = 0
    warmup_recompiles: Count = 0
    #: why they were recompiled (Dynamo's guard failures), first lines
    recompile_reasons: tuple[str, ...] = ()
    #: frames torch.compile gave up on at its recompile limit and ran eagerly from then on
    eager_frames: Count = 0
    #: compiled graphs the CUDA-graph modes ran without CUDA graphs
    cudagraph_skips: Count = 0

    @property
    def user_breaks(self) -> tuple[GraphBreak, ...]:
        """The graph breaks in the benchmark's code, not PyTorch's own."""
        return tuple(b for b in self.graph_breaks if not b.internal)


@dataclass(frozen=True)
class Loading:
    """What a ``train_loop`` sample measured of its loader beside the timed steps (each timed
    step's ``wait`` and ``copy`` are phases of the sample, beside forward, backward and the
    optimizer)."""

    #: seconds from ``iter(loader)`` to its first batch: worker start-up and the first fetch
    #: (reported, not gated)
    first_batch_s: NonNegative
    #: the timed steps' mean time waiting for the next batch: the host's on the CPU; on CUDA
    #: the device's idle time before the batch's copy, from events
    wait_s: NonNegative
    #: the timed steps' mean time moving the batch to the device
    copy_s: NonNegative
    #: the same train step on a batch already on the device, timed in the same sample after the
    #: loop as ``train_step`` times it: what the model alone runs at
    synthetic_step_s: Seconds
    #: passes over the loader restarted during the sample, outside the timed steps
    restarts: Count = 0
    #: batches in one pass over the loader; ``None``: not known (an iterable without a length
    #: that did not end during the sample)
    batches: Count | None = None
    #: whether ``train_loop`` seeded the loader's order (a DataLoader's sampler and workers), so
    #: that every sample reads the same items; ``False``: an iterable whose order is its own
    seeded: bool = False
    #: the CPUs the sample's process could run on, which more workers could use
    cpus: PositiveInt | None = None
    #: cores' worth of CPU time the loader's worker processes used while the steps were timed:
    #: near their number when they compute, far below it when they wait (storage, a sleep);
    #: ``None`` without workers, or off Linux
    worker_cpu: NonNegative | None = None


@dataclass(frozen=True)
class OperatorInstructions:
    """An ATen operator's instructions in a counted step, its callees' included (callgrind's
    inclusive cost of ``at::_ops::<name>::call``)."""

    #: ``aten::convolution_backward``
    name: str
    #: its instructions in the step, its callees' included
    instructions: Count


@dataclass(frozen=True)
class Counter:
    """What counted a step, beside the code and its libraries: the Valgrind, and the kernels
    the counting process pinned the libraries to (``revision.counting``)."""

    #: Valgrind's version: ``3.19.0``
    valgrind: str
    #: the kernels the libraries were pinned to: ``no-fma`` (SSE, and AVX without fused
    #: multiply-adds, which Valgrind before 3.23 runs lane by lane in helpers) or ``avx2``
    kernels: str
    #: the processor architecture: ``x86_64``
    arch: str


@dataclass(frozen=True)
class Instructions:
    """The instructions a benchmark's steps executed, counted under Valgrind's callgrind in one
    process: each counted step phase by phase. Counts do not vary with the machine's load; they
    vary with the code, the torch build, Python, and the Valgrind and kernels that counted them
    (``counter``), not with the host's CPU."""

    #: per phase (forward, backward, optimizer; ``step`` for a step of one phase), the count
    #: of each counted step
    phases: dict[str, tuple[Count, ...]]
    #: the instruction set torch dispatched to under Valgrind (which has no AVX-512)
    capability: str | None = None
    #: the operators of the last counted step with the most instructions, callees included
    operators: tuple[OperatorInstructions, ...] = ()
    #: the wall time the counting took, Valgrind's start excluded
    seconds: NonNegative = 0.0
    #: what counted them (``None``: counted before counts named their Valgrind and kernels)
    counter: Counter | None = None

    @property
    def steps(self) -> tuple[int, ...]:
        """Each counted step's instructions, all its phases together."""
        counts = list(self.phases.values())
        return tuple(sum(step) for step in zip(*counts, strict=True)) if counts else ()

    @property
    def per_step(self) -> float:
        """The fewest instructions of a counted step: the figure the gate compares. What is
        left of warm-up only adds to a step (PyTorch's own count gates take the minimum too)."""
        return float(min(self.steps))
