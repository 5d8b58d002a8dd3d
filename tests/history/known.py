"""Histories with known answers, built from real runs.

``tests/data/history-runs.json`` holds 40 runs of a ResNet-18 train step measured on this
project's machine by ``scripts/history-data`` (each run a fresh pytest process, its samples fresh
processes). The series here are those runs, in order, with their step times multiplied by a
known change: a step of +8% from run 25 on, a creep of 1% a run, or nothing. So the noise is the
machine's own and the answer is known. ``scripts/history-demo`` builds the manual's figures and
dashboard from the same series.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path

from pytest_cnnperf.history.runs import CiRun, GitState, RunInfo
from pytest_cnnperf.model import (
    BenchConfig,
    Decision,
    Environment,
    Measurement,
    MemoryPeak,
    Result,
    Sample,
    Verdict,
)
from pytest_cnnperf.store import codec

DATA = Path(__file__).resolve().parent.parent / "data" / "history-runs.json"
RUNS = 40
#: the first run (1-based) of the +8% step
STEP_RUN = 25
STEP = 1.08
CREEP = 1.01
KINDS = ("step", "creep", "flat")
#: the recorded runs in a fixed random order: the machine's own drift while they were recorded
#: (other tenants of its host moved step times by up to a fifth halfway through a recording)
#: becomes run-to-run noise, so that the only change in a series is the known one
ORDER = random.Random(2026).sample(range(RUNS), RUNS)


def factor(kind: str, run: int) -> float:
    """How much slower than measured run ``run`` (0-based) of a series is."""
    if kind == "step":
        return STEP if run + 1 >= STEP_RUN else 1.0
    if kind == "creep":
        return CREEP**run
    return 1.0


@functools.cache
def load() -> dict[str, object]:
    data: dict[str, object] = json.loads(DATA.read_text())
    return data


@functools.cache
def environment() -> Environment:
    return codec.load(Environment, load()["environment"], "environment")


def commit(run: int) -> str:
    """A made-up commit id for run ``run`` (0-based)."""
    return hashlib.sha1(f"commit {run}".encode()).hexdigest()


def run_info(run: int, **changes: object) -> RunInfo:
    info = RunInfo(
        uid=f"known-{run}",
        recorded=f"2026-11-{1 + run // 8:02d}T{(run % 8) * 3:02d}:00:00Z",
        machine=environment().machine,
        host="ci-runner-1",
        git=GitState(commit(run), "main", False, None),
        ci=CiRun("github", run_id=str(1000 + run)),
        cnnperf="0.1.0",
    )
    return dataclasses.replace(info, **changes)  # type: ignore[arg-type]


def result(kind: str, run: int, env: Environment | None = None) -> Result:
    """Run ``run`` (0-based) of the series ``kind``, as a session records it."""
    runs = load()["runs"]
    assert isinstance(runs, list)
    measured = runs[ORDER[run]]
    scale = factor(kind, run)
    memory = measured["peak_allocated_bytes"]
    samples = tuple(
        Sample(
            step_time_s=t * scale,
            step_times_s=(t * scale,),
            cold_step_s=t * 3,
            warmup_steps=4,
            warmup_steady=True,
            memory=MemoryPeak(memory[i], None, "cpu-profiler") if i < len(memory) else None,
        )
        for i, t in enumerate(measured["step_time_s"])
    )
    config = BenchConfig("train_step", "resnet18", 8, (64, 64), optimizer="sgd")
    return Result(
        config=config,
        test_id=f"test_history.py::test_{kind}",
        recorded=run_info(run).recorded,
        environment=env or environment(),
        measurement=Measurement(8, samples),
        decision=Decision(Verdict.NEW),
    )


def history(kinds: tuple[str, ...] = KINDS) -> Iterator[tuple[RunInfo, list[Result]]]:
    """The 40 runs, each with one result per series."""
    for run in range(RUNS):
        yield run_info(run), [result(kind, run) for kind in kinds]
