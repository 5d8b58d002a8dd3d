"""``cnnperf show`` of a baseline file: each entry's figures and the environment."""

from __future__ import annotations

from collections.abc import Sequence

from .. import units
from ..results import Spread
from . import table, text
from .records import Record


def lines(records: Sequence[Record]) -> list[str]:
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
    headers = ["test", "benchmark", "throughput", "step", "peak mem", "samples"]
    out = text.columns(headers, body, right=(2, 3, 4, 5))
    envs = dict.fromkeys(
        f"environment: {r.environment.describe()} ({r.environment.machine})"
        for r in records
        if r.environment
    )
    return [*out, "", *envs]
