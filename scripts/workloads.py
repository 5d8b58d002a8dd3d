"""The injectable models the gate's scripts measure (``gate-quality``, ``gate-noise``,
``sample-cost``): written into each throw-away project as ``workload.py``.

``model(name)`` builds a small conv net (``smallnet``: four convolutions, 20 ms steps at batch
8 and 64 px on two threads) or a torchvision model, wrapped so that environment variables inject
a change the way a commit would: ``QUALITY_EXTRA_IMAGES`` runs forward and backward on that many
extra images (slower and hungrier), ``QUALITY_EXTRA_PASSES`` runs the first convolution again
that many times without autograd (slower, memory as before), ``QUALITY_EXTRA_BYTES`` keeps that
many bytes alive from one step to the next (hungrier, as fast).
"""

from __future__ import annotations

SOURCE = '''
import os

import torch
import torchvision
from torch import nn

BATCH, SIZE = 8, 64


def smallnet():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    )


class Injected(nn.Module):
    """The model, with injected extra compute (images, or passes without autograd) and memory
    (bytes kept across steps)."""

    def __init__(self, inner, extra_images, extra_bytes, extra_passes=0):
        super().__init__()
        self.inner = inner
        self.extra_images = extra_images
        self.extra_bytes = extra_bytes
        self.extra_passes = extra_passes
        self.first = next(m for m in inner.modules() if isinstance(m, nn.Conv2d))
        self.cache = None

    def forward(self, x):
        if self.extra_passes:
            with torch.no_grad():  # time without memory: nothing of it is kept
                for _ in range(self.extra_passes):
                    self.first(x)
        if self.extra_images:
            x = torch.cat([x, x[: self.extra_images]])
        out = self.inner(x)[: x.shape[0] - self.extra_images]
        if self.extra_bytes:
            self.cache = None
            self.cache = torch.empty(self.extra_bytes // 4)  # kept until the next step
        return out


def model(name, extra_images=None, extra_passes=None):
    inner = smallnet() if name == "smallnet" else torchvision.models.get_model(name, num_classes=10)
    if extra_images is None:
        extra_images = int(os.environ.get("QUALITY_EXTRA_IMAGES", "0"))
    if extra_passes is None:
        extra_passes = int(os.environ.get("QUALITY_EXTRA_PASSES", "0"))
    extra_bytes = int(os.environ.get("QUALITY_EXTRA_BYTES", "0"))
    return Injected(inner, extra_images, extra_bytes, extra_passes)
'''
