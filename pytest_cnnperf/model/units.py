"""Numbers as people read them: times, rates, bytes and signed changes."""

from __future__ import annotations

import math


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


def nbytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


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


def percent(value: float) -> str:
    return f"{value * 100:.1f}%".replace(".0%", "%")


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
