"""``--cnnperf-benchmark-json``: results in pytest-benchmark's JSON format, for its dashboards.

Built on pytest-benchmark itself (an optional extra: ``pip install 'pytest-cnnperf[benchmark]'``):
its ``Stats`` computes the statistics and its machine-info and commit-info hooks describe the
run, so ``pytest-benchmark compare`` and the tools that read its files chart cnnperf results.
Each benchmark's rounds are its samples (one fresh process each) and their figure is the step
time; ``extra_info`` carries the throughput, peak memory, verdict and configuration.
"""

from __future__ import annotations

import datetime
import importlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..model import Result
from .loader import InputFigures

INSTALL = "pip install 'pytest-cnnperf[benchmark]'"

#: gives pytest-benchmark's ``machine_info`` and ``commit_info``
Info = Callable[[], tuple[dict[str, Any], dict[str, Any]]]


class MissingBenchmark(Exception):
    """pytest-benchmark is not installed."""


def _module(name: str) -> Any:
    """A module of pytest-benchmark (untyped, hence ``Any``)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingBenchmark(
            "writing pytest-benchmark's format needs pytest-benchmark, which is not installed; "
            f"install it with {INSTALL}"
        ) from None


def _param(test: str) -> str | None:
    return test[test.index("[") + 1 : -1] if test.endswith("]") and "[" in test else None


def benchmark(result: Result, several: bool) -> dict[str, Any] | None:
    """One entry of the ``benchmarks`` list, ``None`` for a benchmark without a measurement."""
    m, d = result.measurement, result.decision
    if m is None:
        return None
    stats = _module("pytest_benchmark.stats").Stats()
    for step_time in m.step_times:
        stats.update(step_time)
    figures = stats.as_dict()
    figures["data"] = list(m.step_times)
    figures["iterations"] = 1
    suffix = f" [{result.key}]" if several else ""
    extra: dict[str, Any] = {
        "cnnperf_key": result.key,
        "verdict": str(result.verdict),
        "unit": m.unit,
        "items_per_step": m.items_per_step,
        f"{m.unit}_per_second": m.items_per_second,
        "peak_allocated_bytes": m.peak_allocated_bytes,
    }
    if d is not None and d.throughput is not None:
        extra["throughput_change"] = -d.throughput.change
    if d is not None and d.memory is not None:
        extra["memory_change"] = d.memory.change
    if m.achieved_flops_per_s is not None:
        extra["achieved_flops_per_s"] = m.achieved_flops_per_s
    if m.utilisation is not None:
        extra["mfu"] = m.utilisation
    if m.joules_per_item is not None:
        extra[f"joules_per_{m.unit.removesuffix('s')}"] = m.joules_per_item
    loop = InputFigures.of(m)
    if loop is not None:  # train_loop: the loader's figures
        extra["input_wait_share"] = loop.wait_share
        extra["input_copy_share"] = loop.copy_share
        extra["first_batch_s"] = loop.first_batch_s
        extra[f"synthetic_{m.unit}_per_second"] = m.items_per_step / loop.synthetic_step_s
        extra["input_bound"] = loop.bound
    if result.environment is not None:
        extra["environment"] = result.environment.describe()
    return {
        "group": None,
        "name": result.test + suffix,
        "fullname": result.test_id + suffix,
        "params": None,
        "param": _param(result.test),
        "extra_info": extra,
        "options": {
            "disable_gc": False,
            "timer": "perf_counter",
            "min_rounds": len(m.samples),
            "max_time": None,
            "min_time": None,
            "warmup": True,
        },
        "stats": figures,
    }


def document(
    results: Sequence[Result],
    machine_info: dict[str, Any],
    commit_info: dict[str, Any],
) -> dict[str, Any]:
    """The file's contents, as pytest-benchmark's ``--benchmark-json`` writes them."""
    module = _module("pytest_benchmark")
    per_test = Counter(r.test_id for r in results)
    entries = [benchmark(r, per_test[r.test_id] > 1) for r in results]
    return {
        "machine_info": machine_info,
        "commit_info": commit_info,
        "benchmarks": [e for e in entries if e is not None],
        "datetime": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "version": module.__version__,
    }


def default_info() -> tuple[dict[str, Any], dict[str, Any]]:
    """pytest-benchmark's own machine and commit information (outside a pytest session)."""
    plugin, utils = _module("pytest_benchmark.plugin"), _module("pytest_benchmark.utils")
    return plugin.pytest_benchmark_generate_machine_info(), utils.get_commit_info()


def write(path: Path, results: Sequence[Result], info: Info = default_info) -> None:
    """Write the file; ``info`` gives the machine and commit information (in a session,
    through pytest-benchmark's hooks, so that a project's overrides of them apply)."""
    _module("pytest_benchmark")
    machine_info, commit_info = info()
    data = document(results, machine_info, commit_info)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")
