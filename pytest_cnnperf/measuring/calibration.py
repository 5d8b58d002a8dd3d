"""A fixed reference workload, timed in every sample next to the benchmark.

The same work on the same kind of machine should take the same time. On a shared machine it does
not: a virtual machine's speed drifts with its neighbours, and here ResNet-18 steps measured in
different sessions differed by up to 23% while the steps of one session agreed far better. A
calibration workload timed in the same processes follows much of that drift (over 20 sessions its
median correlated 0.72 with ResNet-18's), so the gate divides it out when the baseline and the run
share their software; and when the machine ran far slower or faster than for the baseline (a
loaded runner, a throttled GPU), the gate gives no verdict at all.

On the CPU the workload is a small convolutional net's training step (two convolutions, pooling,
a linear layer, SGD); on CUDA an fp16 matrix product, which depends on the clocks and on no flag a
benchmark varies (TF32, cuDNN mode).
"""

from __future__ import annotations

import statistics
from typing import Any

from .timing import Clock

WARMUP = 3
REPEATS = 15


def _cpu_unit() -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))

    def unit() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(net(images), labels).backward()
        optimizer.step()

    return unit


def _cuda_unit(device: Any) -> Any:
    import torch

    a = torch.full((2048, 2048), 0.5, device=device, dtype=torch.float16)

    def unit() -> None:
        with torch.no_grad():
            for _ in range(4):
                torch.mm(a, a)

    return unit


def calibrate(device: Any, clock: Clock) -> float:
    """Median seconds of one unit of the reference workload on ``device``."""
    import torch

    state = torch.get_rng_state()
    try:
        unit = _cuda_unit(device) if device.type == "cuda" else _cpu_unit()
    finally:
        torch.set_rng_state(state)
    for _ in range(WARMUP):
        unit()
    clock.sync()
    times = []
    for _ in range(REPEATS):
        start = clock.mark()
        unit()
        end = clock.mark()
        clock.sync()
        times.append(clock.seconds_between(start, end))
    return statistics.median(times)
