"""``cnnperf show`` of a baseline file: each entry's figures (compiled ones with their compile
times and graph breaks) and the environment."""

from __future__ import annotations

from collections.abc import Sequence

from .. import units
from ..results import Spread
from . import table, text
from .records import Record


def lines(records: Sequence[Record]) -> list[str]:
    compiled = any(r.graph_breaks is not None for r in records)
    body = []
    for r in records:
        spread = Spread.of(r.step_times_s)
        throughput = units.rate(r.items_per_second, r.unit)
        if spread.n > 1:
            throughput += f" ±{spread.relative_iqr / 2:.0%}"
        body.append(
            [
                r.test,
                table.short_key(r.config),
                throughput,
                units.seconds(r.step_time_s),
                units.nbytes(r.peak_allocated_bytes),
                str(len(r.step_times_s)),
            ]
        )
        if compiled:
            body[-1][-1:-1] = _compiled(r)
    headers = ["test", "benchmark", "throughput", "step", "peak mem", "samples"]
    if compiled:
        headers[-1:-1] = ["compile cold / warm", "breaks"]
    out = text.columns(headers, body, right=range(2, len(headers)))
    envs = dict.fromkeys(
        f"environment: {r.environment.describe()} ({r.environment.machine})"
        for r in records
        if r.environment
    )
    return [*out, "", *envs]


def _compiled(r: Record) -> list[str]:
    if r.graph_breaks is None:
        return ["-", "-"]
    times = f"{units.seconds(r.compile_cold_s)} / {units.seconds(r.compile_warm_s)}"
    return [times, str(r.graph_breaks)]
