"""``--cnnperf-json``: every result with its environment, samples and verdict.

The document is a :class:`~pytest_cnnperf.results.ResultsFile`, written through
``formats.RESULTS`` (``schema`` ``pytest-cnnperf/results``, ``schema_version`` 1); the README
documents its fields.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from pathlib import Path

from .. import formats
from ..results import BenchmarkResult, ResultsFile


def document(results: Sequence[BenchmarkResult], machine: str | None) -> ResultsFile:
    return ResultsFile(
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        machine=machine,
        results=tuple(results),
    )


def write(path: Path, results: Sequence[BenchmarkResult], machine: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(formats.RESULTS.dump(document(results, machine)), indent=1, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")
