"""The injectable models the gate's scripts measure (``gate-quality``, ``gate-noise``,
``sample-cost``): written into each throw-away project as ``workload.py``.

``model(name)`` builds a small conv net (``smallnet``: four convolutions, 20 ms steps at batch
8 and 64 px on two threads; ``bodynet``: seven body convolutions, ``QUALITY_WIDEN`` of them
widened from 3x3 to 3x5, a change a commit makes; ``QUALITY_EXTRA_1X1`` adds 1x1 convolutions
to smallnet) or a torchvision model, wrapped so that
environment variables inject a change the way a commit would: ``QUALITY_EXTRA_IMAGES`` runs
forward and backward on that many
extra images (slower and hungrier), ``QUALITY_EXTRA_PASSES`` runs the first convolution again
that many times without autograd (slower, memory as before), ``QUALITY_EXTRA_BYTES`` keeps that
many bytes alive from one step to the next (hungrier, as fast). ``step_time_ratios`` measures how
much slower each number of extra passes makes the step, and ``passes_for`` picks the number for a
wanted slowdown.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

SOURCE = '''
import os

import torch
import torchvision
from torch import nn

BATCH, SIZE = 8, 64


def smallnet(extra_1x1=0):
    """Four convolutions; ``extra_1x1`` more 1x1 convolutions of 128 channels at the end (a few
    percent more work each)."""
    extra = [m for _ in range(extra_1x1) for m in (nn.Conv2d(128, 128, 1), nn.ReLU())]
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        *extra,
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    )


def bodynet(widened=0):
    """A stem, seven body convolutions of 32 channels at 32 px and a head; ``widened`` of the
    body convolutions are 3x5 instead of 3x3 (slower, memory as before: the same activations)."""
    body = []
    for i in range(7):
        kernel, padding = ((3, 5), (1, 2)) if i in WIDENED[:widened] else (3, 1)
        body += [nn.Conv2d(32, 32, kernel, padding=padding), nn.BatchNorm2d(32), nn.ReLU()]
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        *body,
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )


#: the body convolutions a widened bodynet widens, in order
WIDENED = (2, 5, 0, 3, 6, 1, 4)


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
    if name == "smallnet":
        inner = smallnet(int(os.environ.get("QUALITY_EXTRA_1X1", "0")))
    elif name == "bodynet":
        inner = bodynet(int(os.environ.get("QUALITY_WIDEN", "0")))
    else:
        inner = torchvision.models.get_model(name, num_classes=10)
    if extra_images is None:
        extra_images = int(os.environ.get("QUALITY_EXTRA_IMAGES", "0"))
    if extra_passes is None:
        extra_passes = int(os.environ.get("QUALITY_EXTRA_PASSES", "0"))
    extra_bytes = int(os.environ.get("QUALITY_EXTRA_BYTES", "0"))
    return Injected(inner, extra_images, extra_bytes, extra_passes)
'''


#: the extra passes whose step times are measured
PASSES = (2, 4, 6, 8, 12, 16, 20, 24, 28)


def step_time_ratios(folder: Path, model: str, rounds: int = 6) -> dict[int, float]:
    """Step time with each of :data:`PASSES` extra passes of the first convolution over
    without, in one process, alternating."""
    code = textwrap.dedent(
        f"""
        import statistics, time
        import torch, torch.nn.functional as F
        import workload
        nets = {{}}
        for extra in (0, *{PASSES!r}):
            net = workload.model({model!r}, extra_images=0, extra_passes=extra)
            opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
            nets[extra] = (net, opt)
        x, y = torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,))
        def step_time(extra):
            net, opt = nets[extra]
            times = []
            for i in range(8):
                t = time.perf_counter()
                opt.zero_grad(set_to_none=True); F.cross_entropy(net(x), y).backward(); opt.step()
                if i >= 3: times.append(time.perf_counter() - t)
            return statistics.median(times)
        ratios = {{extra: [] for extra in {PASSES!r}}}
        for _ in range({rounds}):
            for extra in ratios:
                ratios[extra].append(step_time(extra) / step_time(0))
        print(" ".join(f"{{statistics.median(r):.4f}}" for r in ratios.values()))
        """
    )
    output = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, check=True
    ).stdout
    return {extra: float(r) for extra, r in zip(PASSES, output.split(), strict=True)}


def passes_for(ratios: dict[int, float], slowdown: float) -> tuple[int, float]:
    """The extra passes that make the step ``slowdown`` times as long (1.3: 30% slower), and the
    ratio they give: each pass costs the same, so the ratio is a line through 1 at no pass,
    whose slope is the median of the measured ones (a single ratio is as noisy as the
    machine)."""
    slope = statistics.median((ratio - 1) / extra for extra, ratio in ratios.items())
    if slope <= 0:
        raise SystemExit(f"extra passes did not slow the step down: {ratios}")
    passes = max(1, round((slowdown - 1) / slope))
    return passes, 1 + slope * passes
