"""A benchmark session's state, kept in ``config.stash``, and the code that changes it: the
results so far, the baselines to write at the end, the tests collected (to find stale entries),
and what the end of the session saved and found.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .baseline import BaselineFileError, BaselineStore, SaveOutcome
from .location import Location
from .models import ModelRegistry
from .results import BaselineEntry, BenchmarkResult
from .settings import Configuration, Settings

#: test name -> configuration key -> entry
Entries = dict[str, dict[str, BaselineEntry]]


@dataclass
class Finish:
    """What the end of the session did: baselines saved, stale entries found, reports written."""

    saved: list[SaveOutcome] = field(default_factory=list)
    #: (file, test name) of entries whose test no longer exists
    stale: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: the report files written (``--cnnperf-json`` and the others), one line each
    reports: list[str] = field(default_factory=list)


class Session:
    """Everything a benchmark session knows and keeps until its end."""

    def __init__(
        self,
        configuration: Configuration,
        device: str,
        registry: ModelRegistry,
    ) -> None:
        self.configuration = configuration
        #: the run's device, e.g. ``"cpu"`` or ``"cuda:0"``
        self.device = device
        self.settings: Settings = configuration.resolve(self.device_type)
        self.registry = registry
        from .settings import BASELINES

        self.store = BaselineStore(self.settings[BASELINES])
        from .history.record import HistoryLink
        from .settings import HISTORY

        target = self.settings[HISTORY]
        #: the run history (``--cnnperf-history``), read by the creep gate
        self.history = HistoryLink(target) if target is not None else None
        self.results: list[BenchmarkResult] = []
        #: baselines to write at the end: (machine, module) -> entries
        self.pending: dict[tuple[str, str], Entries] = defaultdict(dict)
        #: benchmark tests collected, by baseline module: for finding stale entries
        self.collected: dict[str, set[str]] = defaultdict(set)
        #: the machine name seen in this session's measurements
        self.machine: str | None = None
        self.warnings: list[str] = []
        self.finish = Finish()

    @property
    def device_type(self) -> str:
        return self.device.split(":")[0]

    def settings_for(self, marker: dict[Any, Any] | None) -> Settings:
        """The settings of one test, with its ``@pytest.mark.cnnperf(...)`` arguments."""
        return self.configuration.resolve(self.device_type, marker) if marker else self.settings

    def warn(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)

    def collect(self, location: Location) -> None:
        self.collected[location.module].add(location.test)

    def record(self, result: BenchmarkResult) -> None:
        self.results.append(result)
        if result.environment is not None:
            self.machine = result.environment.machine

    def queue_baseline(self, location: Location, entry: BaselineEntry) -> None:
        """Keep ``entry`` for writing at the end of the session; check now that its file can be
        written back (a corrupt one fails this benchmark, and is left alone)."""
        machine = entry.environment.machine
        self.store.load(self.store.path(machine, location.module), machine)
        pending = self.pending[(machine, location.module)]
        pending.setdefault(location.test, {})[entry.config.key()] = entry

    def merge(
        self,
        results: Iterable[BenchmarkResult],
        pending: Mapping[tuple[str, str], Entries],
        collected: Mapping[str, Iterable[str]],
        machine: str | None,
        warnings: Iterable[str],
    ) -> None:
        """Take in an xdist worker's share, losing and duplicating nothing."""
        self.results.extend(results)
        self.results.sort(key=lambda result: result.test_id)
        for where, entries in pending.items():
            merged = self.pending[where]
            for test, keys in entries.items():
                merged.setdefault(test, {}).update(keys)
        for module, tests in collected.items():
            self.collected[module].update(tests)
        self.machine = self.machine or machine
        for warning in warnings:
            self.warn(warning)

    def reported(self, written: Iterable[str], errors: Iterable[str]) -> None:
        """Keep what writing the reports did, for the terminal summary."""
        self.finish.reports.extend(written)
        self.finish.errors.extend(errors)

    def stale_tests(self, machine: str, module: str) -> list[str]:
        """Tests with entries in the module's baseline file that this session did not collect."""
        try:
            document = self.store.load(self.store.path(machine, module), machine)
        except BaselineFileError:
            return []
        if document is None:
            return []
        return sorted(set(document.entries) - self.collected.get(module, set()))

    def save_baselines(self) -> None:
        """Merge the recorded entries into their files (pruning stale tests on request), then
        list the stale entries that remain."""
        from .settings import PRUNE

        report = self.finish
        for (machine, module), entries in sorted(self.pending.items()):
            prune = self.stale_tests(machine, module) if self.settings[PRUNE] else []
            try:
                report.saved.append(self.store.save(machine, module, entries, prune))
            except (BaselineFileError, OSError) as exc:
                report.errors.append(f"could not save baselines for {module}: {exc}")
        if self.machine:
            for module in sorted(self.collected):
                path = self.store.path(self.machine, module)
                stale = self.stale_tests(self.machine, module)
                report.stale += [(str(path), test) for test in stale]
