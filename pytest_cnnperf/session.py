"""A benchmark session's state, kept in ``config.stash``, and the code that changes it: the
results so far, the baselines to write at the end, the tests that exist (to find stale
entries), and what the end of the session saved and found.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .gate.policy import Plan, plan
from .measuring.compiled import compile_cache_root
from .model import NotSaved, Result, Verdict
from .models import ModelRegistry
from .settings import BASELINES, HISTORY, PRUNE, SAMPLE_TIMEOUT, Configuration, Settings
from .store.baseline import BaselineFileError, BaselineSaveError, BaselineStore, SaveOutcome
from .store.locations import Location, safe_name

if TYPE_CHECKING:
    from .gate.creep import History

#: test name -> configuration key -> baseline entry
Entries = dict[str, dict[str, Result]]


@dataclass
class Finish:
    """What the end of the session did: baselines saved, stale entries found, reports written."""

    saved: list[SaveOutcome] = field(default_factory=list)
    #: (file, test name) of entries whose test no longer exists
    stale: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: baseline files that were to be saved and were not (a failed save fails the run)
    unsaved: int = 0
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
        #: how the tests without a marker of their own are measured and judged
        self.plan: Plan = plan(self.settings, configuration, self.device_type)
        self.registry = registry
        self.store = BaselineStore(self.settings[BASELINES])
        #: the run history (``--cnnperf-history``), read by the creep gate (set by the plugin)
        self.history: History | None = None
        self.results: list[Result] = []
        #: baselines to write at the end: (machine, module) -> entries
        self.pending: dict[tuple[str, str], Entries] = defaultdict(dict)
        #: benchmark tests that exist, by baseline module, as their modules list them (before
        #: a node id, -k, -m or --lf deselect any): for finding stale entries
        self.collected: dict[str, set[str]] = defaultdict(set)
        #: parts of modules (classes) this run did not collect, by module: such a module's
        #: entries cannot be told stale
        self.uncollected: dict[str, set[str]] = defaultdict(set)
        #: the machine name seen in this session's measurements
        self.machine: str | None = None
        self.warnings: list[str] = []
        self.finish = Finish()
        #: the folder under which compiled benchmarks keep their compiler caches, one a
        #: benchmark shared by its sample processes (which inherit this name); made when needed
        self.compile_cache = compile_cache_root()

    @property
    def device_type(self) -> str:
        return self.device.split(":")[0]

    @property
    def sample_timeout(self) -> float:
        timeout: float = self.settings[SAMPLE_TIMEOUT]
        return timeout

    def plan_for(self, marker: dict[Any, Any] | None) -> Plan:
        """The plan of one test, with its ``@pytest.mark.cnnperf(...)`` arguments."""
        if not marker:
            return self.plan
        values = self.configuration.resolve(self.device_type, marker)
        return plan(values, self.configuration, self.device_type)

    def warn(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)

    def collect(self, location: Location) -> None:
        """A benchmark test exists."""
        self.collected[location.module].add(location.test)

    def expect(self, location: Location) -> None:
        """A part of a module (a class) is listed, and is yet to be collected."""
        self.uncollected[location.module].add(location.nodeid)

    def collected_node(self, location: Location) -> None:
        """A part of a module was collected (or collecting it failed: ``expect`` it again)."""
        self.uncollected[location.module].discard(location.nodeid)

    @property
    def history_target(self) -> Path | str | None:
        target: Path | str | None = self.settings[HISTORY]
        return target

    def record(self, result: Result) -> None:
        self.results.append(result)
        if result.environment is not None:
            self.machine = result.environment.machine

    def queue_baseline(self, location: Location, result: Result) -> None:
        """Keep ``result`` for writing as a baseline at the end of the session; check now that
        its file can be written back (a corrupt one fails this benchmark, and is left alone; so
        does one whose folder or lock cannot be used)."""
        assert result.environment is not None
        machine = result.environment.machine
        path = self.store.path(machine, location.module)
        self.store.load(path, machine)
        self.store.check_writable(path)
        pending = self.pending[(machine, location.module)]
        pending.setdefault(location.test, {})[result.key] = result.as_baseline()

    def merge(
        self,
        results: Iterable[Result],
        pending: Mapping[tuple[str, str], Entries],
        collected: Mapping[str, Iterable[str]],
        uncollected: Mapping[str, Iterable[str]],
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
        for module, nodes in uncollected.items():
            self.uncollected[module].update(nodes)
        self.machine = self.machine or machine
        for warning in warnings:
            self.warn(warning)

    def reported(self, written: Iterable[str], errors: Iterable[str]) -> None:
        """Keep what writing the reports did, for the terminal summary."""
        self.finish.reports.extend(written)
        self.finish.errors.extend(errors)

    def stale_tests(self, machine: str, module: str) -> list[str]:
        """Tests with entries in the module's baseline file that no longer exist: none unless
        this session collected the whole module (a test that a node id, -k, -m or --lf left
        out still exists)."""
        if module not in self.collected or self.uncollected.get(module):
            return []
        try:
            document = self.store.load(self.store.path(machine, module), machine)
        except BaselineFileError:
            return []
        if document is None:
            return []
        return sorted(set(document.entries) - self.collected[module])

    def save_baselines(self) -> None:
        """Merge the recorded entries into their files (pruning stale tests on request), then
        list the stale entries that remain. A file that cannot be saved is an error, and its
        benchmarks' results say they were not saved."""
        report = self.finish
        for (machine, module), entries in sorted(self.pending.items()):
            prune = self.stale_tests(machine, module) if self.settings[PRUNE] else []
            try:
                report.saved.append(self.store.save(machine, module, entries, prune))
            except (BaselineFileError, BaselineSaveError) as exc:
                report.errors.append(str(exc))
                report.unsaved += 1
                self._not_saved(str(exc), (machine, module))
        if self.machine:
            for module in sorted(self.collected):
                path = self.store.path(self.machine, module)
                stale = self.stale_tests(self.machine, module)
                report.stale += [(str(path), test) for test in stale]

    def interrupted(self) -> None:
        """The run was interrupted: nothing is saved, and the results say so."""
        count = sum(len(keys) for tests in self.pending.values() for keys in tests.values())
        if count:
            self.warn(
                f"the run was interrupted, so none of the {count} baseline(s) it measured was "
                "saved; run it again to record them"
            )
            self._not_saved("the run was interrupted")

    def _not_saved(self, why: str, file: tuple[str, str] | None = None) -> None:
        """Results that say "saved" whose entries were not written (to ``file``: (machine,
        module); else to any) become errors, with a note that says why."""
        for i, result in enumerate(self.results):
            decision = result.decision
            if decision is None or decision.verdict is not Verdict.SAVED:
                continue
            if file is None or self._bound_for(result, *file):
                decision = dataclasses.replace(
                    decision, verdict=Verdict.ERROR, reasons=(NotSaved(why), *decision.reasons)
                )
                self.results[i] = dataclasses.replace(result, decision=decision)

    def _bound_for(self, result: Result, machine: str, module: str) -> bool:
        """Whether ``result``'s entry is one of those to be saved to the module's file."""
        path, _, test = result.test_id.partition("::")
        return (
            result.environment is not None
            and result.environment.machine == machine
            and result.key in self.pending[(machine, module)].get(test, {})
            and safe_name(Path(path).stem) == module.rsplit("/", 1)[-1]
        )
