"""Numbers as people read them: times, rates, bytes and signed changes."""

from __future__ import annotations

import math

# the setting's help text shows a percentage at pytest's start, which must not load the model
from ..parsers import percent as percent

#: binary units of bytes, largest first
_BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))


def seconds(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} us"


def rate(value: float | None, unit: str = "images") -> str:
    if value is None or math.isnan(value):
        return "-"
    if value >= 100:
        return f"{value:,.0f} {unit}/s"
    if value >= 10:
        return f"{value:.1f} {unit}/s"
    return f"{value:.2f} {unit}/s"


def byte_unit(value: float, least: str = "B") -> tuple[int, str]:
    """The largest unit ``value`` reaches, ``least`` at the smallest: ``(1 << 20, "MiB")``."""
    for unit, size in _BYTE_UNITS:
        if value >= size or unit == least:
            return size, unit
    return 1, "B"


def nbytes(value: float | None) -> str:
    if value is None:
        return "-"
    size, unit = byte_unit(abs(value))
    return f"{value:.0f} B" if size == 1 else f"{value / size:.1f} {unit}"


def change(value: float | None) -> str:
    """A signed percentage: ``+12.3%``."""
    if value is None or math.isnan(value):
        return "-"
    if math.isinf(value):
        return "+inf%" if value > 0 else "-inf%"
    return f"{round(value * 100, 1) + 0.0:+.1f}%"  # + 0.0 turns a rounded -0.0 into 0.0


def count(value: float | None) -> str:
    """A count with an SI prefix: ``11.7 M``, ``850 k``, ``12``."""
    if value is None:
        return "-"
    for prefix, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{_three(value / size)} {prefix}"
    return f"{value:.0f}"


def flops(value: float | None) -> str:
    """FLOP/s with an SI prefix: ``312 TFLOP/s``, ``5.21 GFLOP/s``."""
    if value is None or math.isnan(value):
        return "-"
    for prefix, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= size:
            return f"{_three(value / size)} {prefix}FLOP/s"
    return f"{_three(value)} FLOP/s"


def joules(value: float | None) -> str:
    """Energy: ``0.521 J``, ``12.4 kJ``, ``3.1 kWh``."""
    if value is None or math.isnan(value):
        return "-"
    if value >= 3.6e6:
        return f"{_three(value / 3.6e6)} kWh"
    if value >= 1e3:
        return f"{_three(value / 1e3)} kJ"
    if value >= 1:
        return f"{_three(value)} J"
    return f"{_three(value * 1e3)} mJ"


def _three(value: float) -> str:
    """Three significant figures, without an exponent."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
