"""``cnnperf show`` of a baseline file: each entry's figures (compiled ones with their compile
times and graph breaks) and the environment."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Result, units
from . import table, text


def lines(results: Sequence[Result]) -> list[str]:
    compiled = any(r.config.compile for r in results)
    body = []
    for r in results:
        m = r.measured
        spread = m.step
        throughput = units.rate(m.items_per_second, r.unit)
        if spread.n > 1:
            throughput += f" ±{spread.relative_iqr / 2:.0%}"
        body.append(
            [
                r.test,
                table.short_key(r.config),
                throughput,
                units.seconds(m.step_time_s),
                units.nbytes(m.peak_allocated_bytes),
                str(len(m.samples)),
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
        for r in results
        if r.environment
    )
    return [*out, "", *envs]


def _compiled(r: Result) -> list[str]:
    if not r.config.compile:
        return ["-", "-"]
    m = r.measured
    times = f"{units.seconds(m.compile_time('cold'))} / {units.seconds(m.compile_time('warm'))}"
    return [times, str(len(m.graph_breaks))]
