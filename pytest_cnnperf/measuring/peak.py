"""The device's peak FLOP/s for the precision a step runs in: what utilisation (MFU) is
measured against. ``cnnperf_peak_tflops`` overrides both sources.

On a GPU, the dense datasheet figure (``peak_table``) for the step's precision: ``bf16``/``fp16``
under AMP; for fp32 on Ampere or newer, ``tf32`` where the switch governing most of the step's
FLOPs allows it. On the CPU, where no datasheet figure is worth the name, the best of a few
large matrix products on the benchmark's threads, once per process and precision.
"""

from __future__ import annotations

import time
from typing import Any

from ..model import Flags, Peak, StepFlops
from .peak_table import PeakSetting, lookup

#: the matrix products the CPU's peak is measured with: size, and the bounds on their number and
#: time (about half a second: it is measured in every benchmark's first sample process)
CPU_MATRIX = 2048
CPU_MIN_CALLS = 2
CPU_MAX_CALLS = 5
CPU_BUDGET_S = 0.5

_measured: dict[tuple[str, int], tuple[float, str]] = {}


def gpu_precision(
    precision: str, capability: tuple[int, int], flops: StepFlops, flags: Flags
) -> str:
    """The precision whose peak applies to a step on a GPU of ``capability``."""
    if precision != "fp32" or capability < (8, 0):
        return precision
    cudnn_on = flags.cudnn_mode != "off"
    conv_tf32 = bool(flags.cudnn_tf32) if cudnn_on else bool(flags.matmul_tf32)
    tf32 = conv_tf32 if flops.convolution_share >= 0.5 else bool(flags.matmul_tf32)
    return "tf32" if tf32 else "fp32"


#: a measure() step's precision is not known, and so neither is its peak
_UNKNOWN_PRECISION = Peak(None, None, "unknown", "the precision of a measure() step is unknown")


def gpu_peak(
    device_name: str,
    sms: int | None,
    capability: tuple[int, int],
    precision: str | None,
    flops: StepFlops,
    flags: Flags,
    setting: PeakSetting | None,
) -> Peak:
    """The peak of a GPU from the table (or the setting), for the step's precision."""
    chosen = gpu_precision(precision, capability, flops, flags) if precision else None
    given = _stated(chosen, setting)
    if given is not None:
        return given
    if chosen is None:
        return _UNKNOWN_PRECISION
    found = lookup(device_name, sms)
    row = found.row
    if row is None:
        return Peak(chosen, None, "unknown", str(found.problem))
    tflops = row.tflops(chosen)
    if tflops is None:
        return Peak(chosen, None, "unknown", f"{row.name} has no {chosen} tensor cores")
    checked = "" if row.verified else "; figure unverified"
    return Peak(
        chosen, tflops * 1e12, "table", f"{row.name}, dense {chosen}: {row.source}{checked}"
    )


def _stated(precision: str | None, setting: PeakSetting | None) -> Peak | None:
    """The peak ``cnnperf_peak_tflops`` states for ``precision``, if it does."""
    stated = setting.tflops(precision) if setting else None
    if stated is None:
        return None
    return Peak(precision, stated * 1e12, "setting", f"cnnperf_peak_tflops = {setting}")


def cpu_peak(precision: str, threads: int) -> tuple[float, str]:
    """The best FLOP/s of ``torch.mm`` on two square matrices of ``precision`` on the current
    threads, and how it was measured; measured once per process, precision and thread count."""
    key = (precision, threads)
    if key not in _measured:
        import torch

        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        n = CPU_MATRIX
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        out = torch.empty(n, n, dtype=dtype)
        torch.mm(a, b, out=out)  # warm-up: packing buffers, thread pool
        times: list[float] = []
        started = time.perf_counter()
        while len(times) < CPU_MIN_CALLS or (
            len(times) < CPU_MAX_CALLS and time.perf_counter() - started < CPU_BUDGET_S
        ):
            before = time.perf_counter()
            torch.mm(a, b, out=out)
            times.append(time.perf_counter() - before)
        best = 2 * n**3 / min(times)
        detail = (
            f"measured: torch.mm of two {n}x{n} {precision} matrices on {threads} "
            f"thread{'' if threads == 1 else 's'}, best of {len(times)}"
        )
        _measured[key] = (best, detail)
    return _measured[key]


def find(device: Any, precision: str | None, flops: StepFlops, setting: PeakSetting | None) -> Peak:
    """The peak that a step of ``precision`` with ``flops`` on ``device`` is measured against."""
    import torch

    from .environment import current_flags

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return gpu_peak(
            torch.cuda.get_device_name(device),
            int(props.multi_processor_count),
            (int(props.major), int(props.minor)),
            precision,
            flops,
            current_flags(device),
            setting,
        )
    given = _stated(precision, setting)
    if given is not None:
        return given
    if precision is None:
        return _UNKNOWN_PRECISION
    if device.type != "cpu":
        return Peak(precision, None, "unknown", f"no peak is known for {device.type} devices")
    flops_per_s, detail = cpu_peak(precision, torch.get_num_threads())
    return Peak(precision, flops_per_s, "measured", detail)
