"""Per-session state, kept in ``config.stash``."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from .baseline import BaselineEntry, BaselineStore
from .config import CnnPerfConfig
from .models import ModelRegistry
from .results import BenchmarkResult
from .sampling import Job, Sampler, Zygote

if TYPE_CHECKING:
    from .finish import FinishReport

#: test name -> configuration key -> entry
Entries = dict[str, dict[str, BaselineEntry]]


@dataclass
class SessionState:
    config: CnnPerfConfig
    #: the run's device, e.g. ``"cpu"`` or ``"cuda:0"``
    device: str
    registry: ModelRegistry
    store: BaselineStore
    zygote: Zygote | None = None
    sampler: Sampler | None = None
    #: set in a sample process: the one benchmark call it measures
    job: Job | None = None
    results: list[BenchmarkResult] = field(default_factory=list)
    #: baselines to write at the end: (machine, module) -> entries
    pending: dict[tuple[str, str], Entries] = field(default_factory=lambda: defaultdict(dict))
    #: benchmark tests collected, by baseline module: for finding stale entries
    collected: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    #: the machine name seen in this session's measurements
    machine: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: what the end of the session saved and found stale
    finish: FinishReport | None = None

    @property
    def device_type(self) -> str:
        return self.device.split(":")[0]


STATE = pytest.StashKey[SessionState]()
