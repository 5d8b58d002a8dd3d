"""A fixed reference workload, timed in every sample next to the benchmark.

On a shared machine the same work drifts in speed with the machine's neighbours; a workload
timed in the same processes follows much of that drift, so the gate can allow for it as far as
the calibration's own noise allows (the manual's validation page has the figures). On the CPU it
is eight fp32 matrix products of 384² (about 3 ms on two cores), timed before the benchmark's
first step, where nothing the benchmark does (its heap, its caches, its threads) reaches it; on
CUDA fp16 matrix products of 4096² on random data, one per 16 multiprocessors, timed after the
steps at the clocks they ran at, which depend on no flag a benchmark varies (TF32, cuDNN mode).
Each is warmed up for a while and timed as the median of a few repeats.

Every unit has an id (``cpu-mm-fp32-384x8``, ``cuda-mm-fp16-4096x8``), recorded with the samples
and the baseline: calibration times of different units are not compared (see ``gate``).
"""

from __future__ import annotations

import statistics
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


def _cpu_unit(torch: Any) -> Any:
    generator = torch.Generator().manual_seed(0)
    shape = (CPU_N, CPU_N)
    a, b = torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)
    out = torch.empty(shape)

    def unit() -> None:
        with torch.no_grad():
            for _ in range(CPU_PRODUCTS):
                torch.mm(a, b, out=out)

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
    if device.type == "cuda":
        unit, unit_id = _cuda_unit(device, torch)
    else:
        unit, unit_id = _cpu_unit(torch), CPU_UNIT
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
