"""A fixed reference workload, timed in every sample next to the benchmark.

On a shared machine the same work drifts in speed with the neighbours; a workload timed in the
same processes follows much of that drift, so the gate can allow for it (docs/validation.md).
On the CPU it is fp32 matrix products timed before the benchmark's first step, where nothing the
benchmark does reaches it; on CUDA fp16 products sized to the GPU, timed after the steps at the
clocks they ran at, which depend on no flag a benchmark varies (TF32, the cuDNN mode). Each
unit has an id (``cpu-mm-fp32-384x8``): units differing are not compared.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from .timing import Clock

#: the unit is run at least this many times and for at least this long before it is timed
WARMUP = 3
WARMUP_S = 0.05
REPEATS = 15
#: the CPU unit's matrices are N x N, and it is this many products
CPU_N = 384
CPU_PRODUCTS = 8
CPU_UNIT = f"cpu-mm-fp32-{CPU_N}x{CPU_PRODUCTS}"
#: the CUDA unit's matrices are N x N
CUDA_N = 4096
#: one product per this many streaming multiprocessors, at most CUDA_MAX_PRODUCTS
SMS_PER_PRODUCT = 16
CUDA_MAX_PRODUCTS = 16


def _unit(device: Any, torch: Any) -> tuple[Callable[[], None], str]:
    """The unit on ``device`` and its id: matrix products on seeded random data, into a tensor
    made beforehand (no allocator traffic inside the unit)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        products = int(props.multi_processor_count) // SMS_PER_PRODUCT
        n, dtype, count = CUDA_N, torch.float16, max(1, min(CUDA_MAX_PRODUCTS, products))
        unit_id = f"cuda-mm-fp16-{n}x{count}"
    else:
        n, dtype, count, unit_id = CPU_N, None, CPU_PRODUCTS, CPU_UNIT
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    a = torch.randn((n, n), device=device, dtype=dtype, generator=generator)
    b = torch.randn((n, n), device=device, dtype=dtype, generator=generator)
    out = torch.empty_like(a)

    def unit() -> None:
        with torch.no_grad():
            for _ in range(count):
                torch.mm(a, b, out=out)

    return unit, unit_id


def calibrate(device: Any, clock: Clock, torch_module: Any = None) -> tuple[float, str]:
    """Median seconds of one unit of the reference workload on ``device``, and the unit's id.
    On CUDA the unit is timed with events on ``device``'s stream (``clock``)."""
    if torch_module is None:
        import torch as torch_module
    torch = torch_module
    unit, unit_id = _unit(device, torch)
    warmed, started = 0, clock.now()
    while warmed < WARMUP or clock.now() - started < WARMUP_S:
        unit()
        clock.sync()
        warmed += 1
    times = []
    for _ in range(REPEATS):
        start = clock.mark()
        unit()
        end = clock.mark()
        clock.sync()
        times.append(clock.seconds_between(start, end))
    return statistics.median(times), unit_id
