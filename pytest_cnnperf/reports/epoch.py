"""Epoch-time projection: how long one pass over a dataset takes at the measured throughput: a
``train_loop``'s end to end, with its workers' start-up where each pass starts them again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Result, units
from . import table, text
from .loader import InputFigures

#: images in ImageNet-1k's (ILSVRC-2012) training set
IMAGENET_1K = 1_281_167


@dataclass(frozen=True)
class Projection:
    result: Result
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


def project(results: Sequence[Result], images: int) -> tuple[list[Projection], list[Result]]:
    """Epoch times of the benchmarks measured in images; the others are returned apart."""
    projections = [
        Projection(r, images / r.measured.items_per_second + startup(r))
        for r in results
        if r.unit == "images"
    ]
    others = [r for r in results if r.unit != "images"]
    return projections, others


def startup(result: Result) -> float:
    """What a pass adds to a loop's steps: its workers' start-up, where each pass starts
    them again (workers that are not persistent); 0 for other benchmarks."""
    figures = InputFigures.of(result.measurement)
    loader = result.config.loader
    if figures is None or loader is None or not loader.workers or loader.persistent_workers:
        return 0.0
    return figures.first_batch_s


def _loading(results: Sequence[Result]) -> str:
    """What the header says of data loading."""
    loops = sum(InputFigures.of(r.measurement) is not None for r in results)
    if not loops:
        return "data loading not included"
    if loops == len(results):
        return "data loading included: the loops' end-to-end throughput"
    return "data loading included for train_loop benchmarks only"


def lines(results: Sequence[Result], images: int, dataset: str | None) -> list[str]:
    projections, others = project(results, images)
    what = f"{images:,} images" + (f" ({dataset})" if dataset else "")
    out = [
        f"Time per epoch of {what} at the measured throughput ({_loading(results)})",
        "",
    ]
    # energy per epoch where a benchmark's energy was measured over a long enough window
    energy = any(p.result.measured.joules_per_item is not None for p in projections)
    body = []
    for p in projections:
        row = [
            p.result.test,
            table.short_key(p.result.config),
            units.rate(p.result.measured.items_per_second, p.result.unit),
            duration(p.seconds),
        ]
        if energy:
            per_item = p.result.measured.joules_per_item
            row.append(units.joules(per_item * images) if per_item is not None else "-")
        body.append(row)
    headers = ["test", "benchmark", "throughput", "epoch", *(["energy"] if energy else [])]
    out += text.columns(headers, body, right=range(2, len(headers)))
    if energy:
        out += [
            "",
            "energy: per image over the timed steps, from the device's energy counter, times the "
            "images of an epoch (the device only: not the host, the cooling or data loading)",
        ]
    if others:
        out += [
            "",
            "not projected (measured in other units than images): "
            + ", ".join(f"{r.test} [{r.key}]" for r in others),
        ]
    return out
