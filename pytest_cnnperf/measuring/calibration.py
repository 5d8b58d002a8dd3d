"""A fixed reference workload, timed in every sample next to the benchmark.

On a shared machine the same work drifts in speed with the machine's neighbours; a workload
timed in the same processes follows much of that drift, so the gate can allow for it (the
manual's validation page has the figures). On the CPU it is a small convolutional net's training
step; on CUDA fp16 matrix products of 4096² on random data, one per 16 multiprocessors, which
depend on the clocks and on no flag a benchmark varies (TF32, cuDNN mode).

Every unit has an id (``cpu-convnet-v1``, ``cuda-mm-fp16-4096x8``), recorded with the samples
and the baseline: calibration times of different units are not compared (see ``gate``).
"""

from __future__ import annotations

import statistics
from typing import Any

from ..model.config import CPU_CALIBRATION_UNIT
from .timing import Clock

WARMUP = 3
REPEATS = 15
#: the CUDA unit's matrices are N x N
CUDA_N = 4096
#: one product per this many streaming multiprocessors, at most CUDA_MAX_PRODUCTS
SMS_PER_PRODUCT = 16
CUDA_MAX_PRODUCTS = 16


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


def cuda_products(multiprocessors: int) -> int:
    """How many products make one CUDA unit on a device with ``multiprocessors`` SMs."""
    return max(1, min(CUDA_MAX_PRODUCTS, multiprocessors // SMS_PER_PRODUCT))


def _cuda_unit(device: Any, torch: Any) -> tuple[Any, str]:
    count = cuda_products(int(torch.cuda.get_device_properties(device).multi_processor_count))
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    shape, half = (CUDA_N, CUDA_N), torch.float16
    a = torch.randn(shape, device=device, dtype=half, generator=generator)
    b = torch.randn(shape, device=device, dtype=half, generator=generator)
    out = torch.empty_like(a)  # no allocator traffic inside the unit

    def unit() -> None:
        with torch.no_grad():
            for _ in range(count):
                torch.mm(a, b, out=out)

    return unit, f"cuda-mm-fp16-{CUDA_N}x{count}"


def calibrate(device: Any, clock: Clock, torch_module: Any = None) -> tuple[float, str]:
    """Median seconds of one unit of the reference workload on ``device``, and the unit's id.
    On CUDA the unit is timed with events on ``device``'s stream (``clock``)."""
    if torch_module is None:
        import torch as torch_module
    torch = torch_module
    state = torch.get_rng_state()
    try:
        if device.type == "cuda":
            unit, unit_id = _cuda_unit(device, torch)
        else:
            unit, unit_id = _cpu_unit(), CPU_CALIBRATION_UNIT
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
    return statistics.median(times), unit_id
