"""One benchmark after it ran: what it is, where it ran, what it measured and what the gate
decided. A baseline entry is a result without its decision; the history keeps results whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import ClassVar

from .comparison import Verdict
from .config import BenchConfig, Environment
from .decision import Decision
from .sample import Measurement
from .values import NonNegative


@dataclass(frozen=True)
class Headline:
    """A result's main figures, written beside its samples for a reader of the file (``jq``);
    computed from them, never read back."""

    items_per_second: float
    step_time_s: float
    peak_allocated_bytes: int | None
    #: against the baseline, positive is worse: throughput lost, memory grown
    throughput_change: float | None
    memory_change: float | None


@dataclass(frozen=True)
class Result:
    """Everything known about one benchmark after it ran."""

    config: BenchConfig
    #: the test's node id: ``tests/perf/test_models.py::test_resnet[64]`` (a baseline file's
    #: keys name the test instead)
    test_id: str = ""
    #: when it was measured, UTC, ISO 8601
    recorded: str = ""
    environment: Environment | None = None
    #: ``None`` when measuring failed (``error`` says why)
    measurement: Measurement | None = None
    #: ``None`` in a baseline entry
    decision: Decision | None = None
    duration_s: NonNegative = 0.0
    error: str | None = None

    #: figures a file shows beside the fields, for its readers (never read back)
    DERIVED: ClassVar[tuple[str, ...]] = ("key", "headline")

    @property
    def key(self) -> str:
        return self.config.key

    @property
    def name(self) -> str:
        """The test id, with the configuration key when a test measures more than one thing."""
        return f"{self.test_id} [{self.key}]"

    @property
    def test(self) -> str:
        """The test's name within its module: ``test_resnet[64]``."""
        return self.test_id.split("::", 1)[-1]

    @property
    def module(self) -> str:
        """The test module's file name without its folder and suffix: ``test_models``."""
        return PurePosixPath(self.test_id.split("::", 1)[0]).stem

    @property
    def measured(self) -> Measurement:
        """The measurement of a result known to have one; ``ValueError`` for one that failed."""
        if self.measurement is None:
            raise ValueError(f"{self.name} has no measurement: {self.error}")
        return self.measurement

    @property
    def verdict(self) -> Verdict | None:
        return self.decision.verdict if self.decision else None

    @property
    def unit(self) -> str:
        return self.config.unit

    @property
    def headline(self) -> Headline | None:
        m, d = self.measurement, self.decision
        if m is None:
            return None
        return Headline(
            items_per_second=m.items_per_second,
            step_time_s=m.step_time_s,
            peak_allocated_bytes=m.peak_allocated_bytes,
            throughput_change=d.throughput.change if d and d.throughput else None,
            memory_change=d.memory.change if d and d.memory else None,
        )

    def as_baseline(self) -> Result:
        """The baseline entry that records this result: no decision, each sample without its
        steps (its file's keys name its test)."""
        return Result(
            config=self.config,
            recorded=self.recorded,
            environment=self.environment,
            measurement=self.measurement.without_steps() if self.measurement else None,
        )


@dataclass(frozen=True)
class ResultsFile:
    """The ``--cnnperf-json`` document: every result of a session."""

    created: str
    machine: str | None
    results: tuple[Result, ...] = field(default_factory=tuple)
