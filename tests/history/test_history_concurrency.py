"""Runs writing to one history at once lose nothing: two pytest processes and an xdist run, on
SQLite and on a real PostgreSQL server. Only the process that ends a session writes (the xdist
controller; never its workers, never a sample process)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_cnnperf.history.store import open_store

INI = """
[pytest]
cnnperf_inprocess = true
cnnperf_samples = 2
cnnperf_min_time = 0.02
cnnperf_calibration = false
cnnperf_threshold = 30%
"""

BENCH = "\n".join(
    f"""
def test_{i}(cnnperf):
    cnnperf.train_step(tiny(), batch_size=2, image_size=8)
"""
    for i in range(4)
)
MODELS = """
from torch import nn


def tiny():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 4))
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> str:
    if request.param == "sqlite":
        return str(pytester.path / "history.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.mark.slow
def test_two_processes_and_an_xdist_run_at_once(pytester: pytest.Pytester, target: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(models=MODELS)
    pytester.makepyfile(test_bench="from models import tiny\n" + BENCH)
    base = [sys.executable, "-m", "pytest", "--cnnperf", "-p", "no:cacheprovider", "-q"]
    runs = {
        "plain": [*base, f"--cnnperf-history={target}"],
        # fresh sample processes: they run the tests again, and must not write
        "sampled": [*base, "-o", "cnnperf_inprocess=false", f"--cnnperf-history={target}"],
        "xdist": [*base, "-n", "2", f"--cnnperf-history={target}"],
    }
    processes = {
        name: pytester.popen(command, stdin=None, stdout=(pytester.path / f"{name}.out").open("wb"))
        for name, command in runs.items()
    }
    for name, process in processes.items():
        assert process.wait(timeout=300) == 0, (pytester.path / f"{name}.out").read_text()
    for name in runs:
        out = (pytester.path / f"{name}.out").read_text()
        assert "(4 benchmarks) in the history" in out, out
    with open_store(Path(target) if target.endswith(".db") else target) as history:
        entries = history.entries()
    by_run: dict[int, list[str]] = {}
    for entry in entries:
        by_run.setdefault(entry.run_id, []).append(entry.result.test_id)
    assert len(by_run) == 3
    for tests in by_run.values():
        assert sorted(tests) == [f"test_bench.py::test_{i}" for i in range(4)]
