"""Epoch-time projection: how long one pass over a dataset takes at the measured throughput."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import units
from . import table, text
from .records import Record

#: images in ImageNet-1k's (ILSVRC-2012) training set
IMAGENET_1K = 1_281_167


@dataclass(frozen=True)
class Projection:
    record: Record
    seconds: float


def duration(seconds: float) -> str:
    """``45 s``, ``12 min 05 s``, ``3 h 10 min``, ``2 d 04 h``."""
    total = round(seconds)
    if total < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours:02d} h"


def project(records: Sequence[Record], images: int) -> tuple[list[Projection], list[Record]]:
    """Epoch times of the benchmarks measured in images; the others are returned apart."""
    projections = [
        Projection(r, images / r.items_per_second) for r in records if r.unit == "images"
    ]
    others = [r for r in records if r.unit != "images"]
    return projections, others


def lines(records: Sequence[Record], images: int, dataset: str | None) -> list[str]:
    projections, others = project(records, images)
    what = f"{images:,} images" + (f" ({dataset})" if dataset else "")
    out = [
        f"Time per epoch of {what} at the measured throughput (data loading not included)",
        "",
    ]
    body = [
        [
            p.record.test,
            table.short_key(p.record.config),
            units.rate(p.record.items_per_second, p.record.unit),
            duration(p.seconds),
        ]
        for p in projections
    ]
    out += text.columns(["test", "benchmark", "throughput", "epoch"], body, right=(2, 3))
    if others:
        out += [
            "",
            "not projected (measured in other units than images): "
            + ", ".join(f"{r.test} [{r.key}]" for r in others),
        ]
    return out
