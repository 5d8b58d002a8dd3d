"""The bundled model zoo: ``pytest --cnnperf --pyargs pytest_cnnperf.zoo``.

The CNNs the field compares (cnn-benchmarks, the cuDNN and AMP articles): the ResNet family,
VGG-16, MobileNet-V2, EfficientNet-B0, GoogLeNet and Inception-V3. On a GPU each trains at its
published input size (224 px, 299 for Inception-V3) and a published batch size (32 to 256); on the
CPU at small sizes that finish in minutes on two cores. ``--cnnperf-zoo-*`` options choose models,
batch sizes, image size, AMP, memory format and compile modes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .. import settings


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
    def of(cls, values: settings.Settings) -> ZooOptions:
        return cls(
            models=values[settings.ZOO_MODELS],
            batch_sizes=values[settings.ZOO_BATCH_SIZE],
            image_size=values[settings.ZOO_IMAGE_SIZE],
            amp=values[settings.ZOO_AMP],
            channels_last=values[settings.ZOO_MEMORY_FORMAT],
            compile=values[settings.ZOO_COMPILE],
        )


@dataclass(frozen=True)
class ZooModel:
    name: str
    gpu_batch: int
    cpu_batch: int
    #: image size on the CPU; ``None``: the model's own (Inception-V3's auxiliary head needs 299)
    cpu_image: int | None = 64


CATALOG = (
    ZooModel("resnet18", gpu_batch=256, cpu_batch=8),
    ZooModel("resnet50", gpu_batch=128, cpu_batch=8),
    ZooModel("vgg16", gpu_batch=64, cpu_batch=2),
    ZooModel("mobilenet_v2", gpu_batch=128, cpu_batch=8),
    ZooModel("efficientnet_b0", gpu_batch=128, cpu_batch=8),
    ZooModel("googlenet", gpu_batch=128, cpu_batch=8),
    ZooModel("inception_v3", gpu_batch=64, cpu_batch=2, cpu_image=None),
)
DEFAULT_MODELS = tuple(m.name for m in CATALOG)


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
    catalog = {m.name: m for m in CATALOG}
    result = []
    for name in options.models or DEFAULT_MODELS:
        entry = catalog.get(name, ZooModel(name, gpu_batch=64, cpu_batch=4))
        batches = options.batch_sizes or (entry.gpu_batch if on_gpu else entry.cpu_batch,)
        image = options.image_size or (None if on_gpu else entry.cpu_image)
        for batch, amp, channels_last, compile_mode in itertools.product(
            batches, options.amp, options.channels_last, options.compile
        ):
            result.append(ZooCase(name, batch, image, amp, channels_last, compile_mode))
    return result
