"""``cnnperf show`` of a baseline file: each entry's figures (compiled ones with their compile
times and graph breaks) and the environment."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Result
from . import table, text


def lines(results: Sequence[Result]) -> list[str]:
    compiled = any(r.config.compile for r in results)
    body = []
    for r in results:
        row = table.row(r)
        body.append([row.test, row.benchmark, row.throughput, row.step, row.memory])
        if compiled:
            body[-1] += [row.compile, row.graph_breaks]
        body[-1].append(str(len(r.measured.samples)))
    headers = ["test", "benchmark", "throughput", "step", "peak mem", "samples"]
    if compiled:
        headers[-1:-1] = ["compile cold / warm", "breaks"]
    out = text.columns(headers, body, right=range(2, len(headers)))
    return [*out, "", *table.environment_lines(results)]
