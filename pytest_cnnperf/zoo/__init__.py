"""The bundled model zoo: ``pytest --cnnperf --pyargs pytest_cnnperf.zoo``.

The CNNs the field compares, each on a GPU at its published input and batch size, on the CPU at
small sizes that finish in minutes on two cores; ``--cnnperf-zoo-*`` options choose the cases.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..parsers import (
    parse_amp_list,
    parse_compile_modes,
    parse_memory_formats,
    parse_names,
    parse_positive_ints,
    positive_int,
)
from ..settings import Setting, Settings


@dataclass(frozen=True)
class ZooModel:
    name: str
    gpu_batch: int
    cpu_batch: int
    #: image size on the CPU; ``None``: the model's own (Inception-V3's auxiliary head needs 299)
    cpu_image: int | None = 64
    #: the smallest batch it trains at (Inception-V3's auxiliary head batch-normalises a 1x1 map)
    min_batch: int = 1


CATALOG = (
    ZooModel("resnet18", gpu_batch=256, cpu_batch=8),
    ZooModel("resnet50", gpu_batch=128, cpu_batch=8),
    ZooModel("vgg16", gpu_batch=64, cpu_batch=2),
    ZooModel("mobilenet_v2", gpu_batch=128, cpu_batch=8),
    ZooModel("efficientnet_b0", gpu_batch=128, cpu_batch=8),
    ZooModel("googlenet", gpu_batch=128, cpu_batch=8),
    ZooModel("inception_v3", gpu_batch=64, cpu_batch=2, cpu_image=None, min_batch=2),
)
DEFAULT_MODELS = tuple(m.name for m in CATALOG)

# fmt: off
MODELS: Setting[tuple[str, ...] | None] = Setting(
    "zoo_models", parse_names, "Models of the bundled zoo (--pyargs pytest_cnnperf.zoo), "
    f"comma-separated. Default: {','.join(DEFAULT_MODELS)}", flag=True, metavar="NAMES"
)
BATCH_SIZE: Setting[tuple[int, ...] | None] = Setting(
    "zoo_batch_size", parse_positive_ints, "Batch sizes for the zoo. Default: each model's "
    "published size on a GPU, a small one on the CPU", flag=True, metavar="N[,N...]"
)
IMAGE_SIZE: Setting[int | None] = Setting(
    "zoo_image_size", positive_int("an image size", 224), "Image size for the zoo. Default: "
    "each model's own (224, 299 for inception_v3) on a GPU, small on the CPU",
    flag=True, metavar="PX"
)
AMP: Setting[tuple[str | None, ...]] = Setting(
    "zoo_amp", parse_amp_list, "Automatic mixed precision for the zoo: off, fp16, bf16, or "
    "several. Default: off", flag=True, metavar="MODE[,MODE...]", default=(None,)
)
MEMORY_FORMAT: Setting[tuple[bool, ...]] = Setting(
    "zoo_memory_format", parse_memory_formats, "Memory format for the zoo: contiguous, "
    "channels_last, or both. Default: contiguous", flag=True, metavar="FORMAT[,FORMAT...]",
    default=(False,)
)
COMPILE: Setting[tuple[str | None, ...]] = Setting(
    "zoo_compile", parse_compile_modes, "torch.compile modes for the zoo: off (eager), default, "
    "reduce-overhead, max-autotune, max-autotune-no-cudagraphs, or several. Default: off",
    flag=True, metavar="MODE[,MODE...]", default=(None,)
)
# fmt: on
#: the zoo's settings, after the plugin's in ``pytest --help``
SETTINGS = (MODELS, BATCH_SIZE, IMAGE_SIZE, AMP, MEMORY_FORMAT, COMPILE)


@dataclass(frozen=True)
class ZooOptions:
    """The ``--cnnperf-zoo-*`` options."""

    models: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    image_size: int | None = None
    amp: tuple[str | None, ...] = (None,)
    channels_last: tuple[bool, ...] = (False,)
    #: ``None``: eager; else a ``torch.compile`` mode
    compile: tuple[str | None, ...] = (None,)

    @classmethod
    def of(cls, values: Settings) -> ZooOptions:
        return cls(
            models=values[MODELS],
            batch_sizes=values[BATCH_SIZE],
            image_size=values[IMAGE_SIZE],
            amp=values[AMP],
            channels_last=values[MEMORY_FORMAT],
            compile=values[COMPILE],
        )


def model(name: str) -> ZooModel:
    """The catalog's entry for ``name``; a model it does not list trains at batch 64 on a GPU
    and 4 on the CPU."""
    return next((m for m in CATALOG if m.name == name), ZooModel(name, gpu_batch=64, cpu_batch=4))


def refusal(case: ZooCase) -> str | None:
    """Why ``case`` cannot train, in the words of a failed test; ``None``: it can."""
    least = model(case.model).min_batch
    if case.batch_size >= least:
        return None
    return (
        f"{case.model} trains at a batch size of {least} or more, not {case.batch_size}: one "
        "of its batch normalisations sees a 1x1 map, which needs more than one image in "
        f"training; give --cnnperf-zoo-batch-size={least} or more, or leave {case.model} out "
        "with --cnnperf-zoo-models"
    )


@dataclass(frozen=True)
class ZooCase:
    model: str
    batch_size: int
    image_size: int | None
    amp: str | None
    channels_last: bool
    compile: str | None = None

    def id(self, several_batches: bool) -> str:
        parts = [self.model]
        if several_batches:
            parts.append(f"bs{self.batch_size}")
        if self.amp:
            parts.append(self.amp)
        if self.channels_last:
            parts.append("channels_last")
        if self.compile:
            parts.append("compile" if self.compile == "default" else f"compile_{self.compile}")
        return "-".join(parts)


def cases(options: ZooOptions, on_gpu: bool) -> list[ZooCase]:
    """The zoo's benchmarks for these options on this kind of device."""
    result = []
    for name in options.models or DEFAULT_MODELS:
        entry = model(name)
        batches = options.batch_sizes or (entry.gpu_batch if on_gpu else entry.cpu_batch,)
        image = options.image_size or (None if on_gpu else entry.cpu_image)
        for batch, amp, channels_last, compile_mode in itertools.product(
            batches, options.amp, options.channels_last, options.compile
        ):
            result.append(ZooCase(name, batch, image, amp, channels_last, compile_mode))
    return result
