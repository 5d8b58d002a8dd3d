"""``--cnnperf-json``: every result with its environment, samples and verdict.

The document is a :class:`~pytest_cnnperf.results.ResultsFile` (``schema``
``pytest-cnnperf/results``, ``schema_version`` 1); the README documents its fields.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from pathlib import Path

from .. import serde
from ..results import RESULTS_SCHEMA, RESULTS_SCHEMA_VERSION, BenchmarkResult, ResultsFile


def document(results: Sequence[BenchmarkResult], machine: str | None) -> ResultsFile:
    return ResultsFile(
        schema=RESULTS_SCHEMA,
        schema_version=RESULTS_SCHEMA_VERSION,
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        machine=machine,
        results=tuple(results),
    )


def write(path: Path, results: Sequence[BenchmarkResult], machine: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(serde.to_data(document(results, machine)), indent=1, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")
