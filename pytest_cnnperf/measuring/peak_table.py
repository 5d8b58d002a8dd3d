"""Dense peak FLOP/s of the GPUs people run CI on, as data, and ``cnnperf_peak_tflops``.

The figures are NVIDIA's, for dense math: half the datasheets' "with sparsity" figures (Volta
and Turing have none); GeForce FP16/BF16 with FP32 accumulation, as PyTorch's kernels use;
``fp32`` the non-tensor rate. ``verified``: the row was read in a stored copy of its source;
other rows agree with SMs x FP32 lanes x 2 x boost clock, and reports say "unverified". A GPU
not in the table gets no utilisation, never a guess. Plain data: no torch here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the precisions a peak is given for
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU's dense peaks in TFLOP/s (``None``: no such math on the GPU)."""

    name: str
    #: matched against ``torch.cuda.get_device_name()``, lower-cased
    pattern: str
    #: streaming multiprocessors: the name and this count must both match (a MIG slice, or a
    #: variant with fewer SMs, is not the GPU of the row)
    sms: int
    fp32: float
    tf32: float | None
    bf16: float | None
    fp16: float | None
    source: str
    verified: bool

    def tflops(self, precision: str) -> float | None:
        value: float | None = getattr(self, precision)
        return value


_H100 = (
    "NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/"
    "nvidia-tensor-core-gpu-datasheet)"
)
_A100 = (
    "NVIDIA A100 datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): TF32 156 | 312*, BF16 312 | 624*, "
    "FP32 19.5 (the same for SXM4 and PCIe, 40 and 80 GB)"
)

#: in the order they are tried: a more specific name before a more general one
GPUS: tuple[GpuPeaks, ...] = (
    GpuPeaks(
        "NVIDIA H200 NVL",
        r"\bh200 nvl\b",
        132,
        60.0,
        417.5,
        835.5,
        835.5,
        "NVIDIA H200 product page (nvidia.com/en-us/data-center/h200/), H200 NVL column: "
        "TF32 835*, BF16/FP16 1,671* (with sparsity)",
        False,
    ),
    GpuPeaks(
        "NVIDIA H200 SXM",
        r"\bh200\b",
        132,
        67.0,
        494.5,
        989.5,
        989.5,
        "NVIDIA H200 product page (nvidia.com/en-us/data-center/h200/), H200 SXM column: "
        "TF32 989*, BF16/FP16 1,979* (with sparsity), FP32 67",
        False,
    ),
    GpuPeaks(
        "NVIDIA H100 NVL",
        r"\bh100 nvl\b",
        132,
        60.0,
        417.5,
        835.5,
        835.5,
        f"{_H100}, H100 NVL column (per GPU): TF32 835*, BF16/FP16 1,671*",
        False,
    ),
    GpuPeaks(
        "NVIDIA H100 PCIe",
        r"\bh100\b.*\bpcie\b",
        114,
        51.0,
        378.0,
        756.5,
        756.5,
        f"{_H100}, H100 PCIe column: TF32 756*, BF16/FP16 1,513*, FP32 51",
        True,
    ),
    GpuPeaks(
        "NVIDIA H100 SXM5",
        r"\bh100\b",
        132,
        67.0,
        494.5,
        989.5,
        989.5,
        f"{_H100}, H100 SXM column: TF32 989*, BF16/FP16 1,979*, FP32 67",
        True,
    ),
    GpuPeaks("NVIDIA A100", r"\ba100\b", 108, 19.5, 156.0, 312.0, 312.0, _A100, True),
    GpuPeaks(
        "NVIDIA L40S",
        r"\bl40s\b",
        142,
        91.6,
        183.0,
        362.05,
        362.05,
        "NVIDIA L40S datasheet: TF32 183 | 366*, BF16/FP16 362.05 | 733*, FP32 91.6",
        True,
    ),
    GpuPeaks(
        "NVIDIA L4",
        r"\bl4\b",
        58,
        30.3,
        60.0,
        121.0,
        121.0,
        "NVIDIA L4 datasheet: TF32 120*, BF16/FP16 242* (sparse figures only), FP32 30.3",
        True,
    ),
    GpuPeaks(
        "NVIDIA A40",
        r"\ba40\b",
        84,
        37.4,
        74.8,
        149.7,
        149.7,
        "NVIDIA A40 datasheet: TF32 74.8 | 149.6*, BF16 with FP32 accumulate 149.7 | 299.4*, "
        "FP32 37.4",
        True,
    ),
    GpuPeaks(
        "NVIDIA A10",
        r"\ba10\b",
        72,
        31.2,
        62.5,
        125.0,
        125.0,
        "NVIDIA A10 datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/"
        "a10-datasheet.pdf): TF32 62.5 | 125*, BF16 125 | 250*, FP32 31.2",
        True,
    ),
    GpuPeaks(
        "NVIDIA T4",
        r"\btesla t4\b",
        40,
        8.1,
        None,
        None,
        65.0,
        "NVIDIA T4 datasheet (t4-tensor-core-datasheet-951643.pdf): mixed precision "
        "(FP16/FP32) 65 TFLOPS, FP32 8.1; no TF32 or BF16 tensor cores",
        True,
    ),
    GpuPeaks(
        "NVIDIA V100 SXM2",
        r"\bv100-sxm2\b",
        80,
        15.7,
        None,
        None,
        125.0,
        "NVIDIA V100 datasheet (volta-v100-datasheet-update-us-1165301-r5.pdf): tensor "
        "performance 125 TFLOPS, FP32 15.7; no TF32 or BF16 tensor cores",
        True,
    ),
    GpuPeaks(
        "NVIDIA V100S PCIe",
        r"\bv100s-pcie\b",
        80,
        16.4,
        None,
        None,
        130.0,
        "NVIDIA V100 datasheet: V100S PCIe tensor performance 130 TFLOPS, FP32 16.4",
        True,
    ),
    GpuPeaks(
        "NVIDIA V100 PCIe",
        r"\bv100-pcie\b",
        80,
        14.0,
        None,
        None,
        112.0,
        "NVIDIA V100 datasheet: V100 PCIe tensor performance 112 TFLOPS, FP32 14",
        True,
    ),
    GpuPeaks(
        "NVIDIA GeForce RTX 4090",
        r"\brtx 4090$",
        128,
        82.6,
        82.6,
        165.2,
        165.2,
        "NVIDIA Ada Lovelace architecture whitepaper, appendix table: TF32 82.6 | 165.2*, "
        "BF16/FP16 with FP32 accumulate 165.2 | 330.4*, FP32 82.6",
        False,
    ),
    GpuPeaks(
        "NVIDIA GeForce RTX 3090",
        r"\brtx 3090$",
        82,
        35.6,
        35.6,
        71.0,
        71.0,
        "NVIDIA GA102 whitepaper v2, appendix A: TF32 35.6, BF16/FP16 with FP32 accumulate "
        "71, FP32 35.6",
        False,
    ),
    GpuPeaks(
        "NVIDIA RTX A6000",
        r"\brtx a6000$",
        84,
        38.7,
        77.4,
        154.8,
        154.8,
        "NVIDIA GA102 whitepaper v2, appendix C (RTX A6000): TF32 77.4, BF16/FP16 with FP32 "
        "accumulate 154.8, FP32 38.7",
        False,
    ),
    GpuPeaks(
        "NVIDIA RTX 6000 Ada Generation",
        r"\brtx 6000 ada generation$",
        142,
        91.1,
        182.1,
        364.2,
        364.2,
        "NVIDIA RTX 6000 Ada datasheet and Ada whitepaper: TF32 182.1, BF16/FP16 with FP32 "
        "accumulate 364.2, FP32 91.1",
        False,
    ),
)


@dataclass(frozen=True)
class Lookup:
    """A GPU's row in the table, or why it has none."""

    row: GpuPeaks | None
    problem: str | None = None


def lookup(device_name: str, sms: int | None) -> Lookup:
    """The table's row for a GPU by its name (``torch.cuda.get_device_name()``) and SM count
    (``multi_processor_count``; ``None``: not known, the name alone decides)."""
    name = " ".join(device_name.lower().split())
    for row in GPUS:
        if not re.search(row.pattern, name):
            continue
        if sms is not None and sms != row.sms:
            return Lookup(
                None,
                f"{device_name} has {sms} SMs where the table's {row.name} has {row.sms} "
                "(a MIG slice or a variant the table does not know)",
            )
        return Lookup(row)
    return Lookup(None, f"{device_name} is not in pytest-cnnperf's table of peaks")


# ---- cnnperf_peak_tflops: a project states its device's peak ----


@dataclass(frozen=True)
class PeakSetting:
    """``cnnperf_peak_tflops``: one figure for every precision, or figures per precision."""

    #: for every precision not named in ``per_precision``
    every: float | None
    per_precision: tuple[tuple[str, float], ...] = ()

    def tflops(self, precision: str | None) -> float | None:
        for name, value in self.per_precision:
            if name == precision:
                return value
        return self.every

    def __str__(self) -> str:
        parts = [f"{name}={value:g}" for name, value in self.per_precision]
        if self.every is not None:
            parts.insert(0, f"{self.every:g}")
        return ",".join(parts)


PEAK_FORMS = (
    "use TFLOP/s as a number for every precision (e.g. 312) or per precision, "
    f"naming {', '.join(PRECISIONS)} (e.g. bf16=989,tf32=494)"
)


def _tflops(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < 1e6 else None


def parse_peak_tflops(value: object) -> PeakSetting:
    """``312`` or ``bf16=989,tf32=494``."""
    text = str(value).strip()
    every: float | None = None
    named: dict[str, float] = {}
    for part in text.split(","):
        key, eq, number = (p.strip() for p in part.partition("="))
        figure = _tflops(number if eq else key)
        precision = key.lower() if eq else None
        if figure is None or (precision is not None and precision not in PRECISIONS):
            raise ValueError(f"{value!r} is not a peak in TFLOP/s; {PEAK_FORMS}")
        if precision is None:
            every = figure
        else:
            named[precision] = figure
    return PeakSetting(every, tuple(named.items()))
