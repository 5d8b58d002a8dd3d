"""What a benchmark is and where it ran: its configuration and its environment."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

from .because import plural
from .values import Count, PositiveInt

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
        parts = [
            self.backend if self.backend != "inductor" else "",
            self.mode or "",
            "fullgraph" if self.fullgraph else "",
            {None: "dynamic=auto", True: "dynamic=true"}.get(self.dynamic, ""),
            *(f"{name}={value}" for name, value in self.options),
        ]
        shown = ",".join(part for part in parts if part)
        return f"compile={shown}" if shown else "compile"


@dataclass(frozen=True)
class LoaderSetting:
    """What a ``train_loop`` benchmark reads: the loader's configuration, as its key names it
    (unless the benchmark has a ``name``)."""

    #: the dataset's class (a DataLoader's ``dataset``), or the iterable's own class
    dataset: str
    #: a DataLoader's worker processes (0: batches are made between steps); ``None``: an
    #: iterable that is not a DataLoader
    workers: Count | None = None
    #: batches put in pinned memory by the DataLoader, which a CUDA copy needs to overlap
    pin_memory: bool = False
    #: workers kept from one pass over the dataset to the next, not started again for each
    persistent_workers: bool = False
    #: batches each worker prepares ahead; ``None`` without workers
    prefetch_factor: PositiveInt | None = None

    def label(self) -> str:
        """``FakeData workers=4 pin_memory``: the dataset and what differs from a plain loader."""
        parts = [
            self.dataset,
            f"workers={self.workers}" if self.workers is not None else "",
            "pin_memory" if self.pin_memory else "",
            "persistent" if self.persistent_workers else "",
            # 2 is the DataLoader's default
            f"prefetch={self.prefetch_factor}" if self.prefetch_factor not in (None, 2) else "",
        ]
        return " ".join(part for part in parts if part)


#: the calibration unit of samples and baselines recorded before units had ids, by device type:
#: the CPU's is unchanged since; on CUDA, four fp16 products of 2048², which mostly timed kernel
#: launches on a large GPU
UNSTAMPED_CALIBRATION_UNITS = {"cpu": "cpu-convnet-v1", "cuda": "cuda-mm-fp16-2048x4"}


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
        parts = [self.cxx_version or self.cxx or "", f"Triton {self.triton}" if self.triton else ""]
        return ", ".join(part for part in parts if part) or "none"


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
    threads: PositiveInt
    interop_threads: PositiveInt
    flags: Flags
    #: compiled benchmarks: the compiler stack
    compiler: CompilerStack | None = None
    #: the instruction set torch's CPU kernels were picked for (``AVX512``, ``AVX2``,
    #: ``DEFAULT``; ``ATEN_CPU_CAPABILITY`` lowers it); ``None``: a torch that cannot say
    cpu_capability: str | None = None
    #: ``family 25 model 17 stepping 1``: the CPU's generation where its name is masked
    cpu_id: str | None = None

    #: fields whose change makes old baselines doubtful (reported, or failed in strict mode)
    SOFTWARE_FIELDS: ClassVar[tuple[str, ...]] = (
        "torch",
        "torchvision",
        "cuda",
        "cudnn",
        "driver",
        "device_name",
    )
    #: the hardware fields that pick the kernels a step runs, as messages name them: a
    #: baseline that differs in one measured other code than the code under test
    KERNEL_FIELDS: ClassVar[dict[str, str]] = {
        "device_name": "device",
        "cpu_capability": "CPU capability",
        "cpu_id": "CPU generation",
    }

    def kernel_changes(self, old: Environment) -> tuple[str, ...]:
        """The kernel-picking fields (:attr:`KERNEL_FIELDS`) known on both sides that differ
        from ``old``'s: ``CPU capability AVX2 -> AVX512``. The CPU's fields count on the CPU
        only: a GPU's kernels do not depend on its host."""
        names = ["device_name"] if self.device.startswith("cuda") else self.KERNEL_FIELDS
        changes = []
        for name in names:
            before, after = getattr(old, name), getattr(self, name)
            if before is not None and after is not None and before != after:
                changes.append(f"{self.KERNEL_FIELDS[name]} {before} -> {after}")
        return tuple(changes)

    def changes_from(self, old: Environment) -> tuple[str, ...]:
        """Human-readable differences in software and hardware from ``old``."""
        changes = []
        for name in self.SOFTWARE_FIELDS:
            before, after = getattr(old, name), getattr(self, name)
            if before != after:
                changes.append(f"{name} {before or 'none'} -> {after or 'none'}")
        changes += [c for c in self.kernel_changes(old) if not c.startswith("device ")]
        if self.compiler and old.compiler and self.compiler != old.compiler:
            changes.append(f"compiler {old.compiler.describe()} -> {self.compiler.describe()}")
        return tuple(changes)

    def describe(self) -> str:
        """One line for reports: device, software stack and threads."""
        parts = [
            self.device_name,
            f"CUDA {self.cuda}" if self.cuda else "",
            f"cuDNN {self.cudnn}" if self.cudnn else "",
            f"driver {self.driver}" if self.driver else "",
            f"torch {self.torch}",
            f"torchvision {self.torchvision}" if self.torchvision else "",
            f"Python {self.python}",
            plural(self.threads, "thread"),
        ]
        return ", ".join(part for part in parts if part)


@dataclass(frozen=True)
class BenchConfig:
    """The configuration that identifies a benchmark inside its test."""

    kind: str
    model: str
    batch_size: PositiveInt
    image_size: tuple[PositiveInt, PositiveInt] | None
    amp: str | None = None
    channels_last: bool = False
    optimizer: str | None = None
    loss: str | None = None
    cudnn_mode: str | None = None
    world_size: PositiveInt = 1
    unit: str = "images"
    label: str | None = None
    #: ``torch.compile``'s arguments; ``None``: eager
    compile: CompileSetting | None = None
    #: the whole step captured and replayed as a CUDA graph
    cuda_graphs: bool = False
    #: ``train_loop``: the loader the steps read their batches from
    loader: LoaderSetting | None = None

    @functools.cached_property
    def key(self) -> str:
        """A stable, readable key: ``train_step resnet18 bs=32 224x224 amp=bf16 channels_last``;
        a loop's names its loader unless a ``name`` names the benchmark (so that a change of
        the loader is gated against the same baseline)."""
        parts = [
            self.kind,
            self.label or self.model,
            f"bs={self.batch_size}",
            self.loader.label() if self.loader and not self.label else "",
            f"{self.image_size[0]}x{self.image_size[1]}" if self.image_size else "",
            f"amp={self.amp}" if self.amp else "",
            "channels_last" if self.channels_last else "",
            f"opt={self.optimizer}" if self.optimizer else "",
            f"loss={self.loss}" if self.loss else "",
            f"cudnn={self.cudnn_mode}" if self.cudnn_mode else "",
            f"world={self.world_size}" if self.world_size != 1 else "",
            self.compile.label() if self.compile else "",
            "cuda_graphs" if self.cuda_graphs else "",
        ]
        return " ".join(part for part in parts if part)
