"""pytest glue: the hooks, fixtures and hook specifications of pytest-cnnperf.

Loading this module costs every pytest run, benchmarks or not, so it imports only the settings
tables; the hooks import the rest, and only with ``--cnnperf``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import settings, zoo

if TYPE_CHECKING:
    from .measuring.cudnn import CudnnMode
    from .models import ModelFactory, ModelRegistry
    from .revision.against import AgainstRun
    from .revision.base import BaseSampler
    from .revision.counting import CountingPool, CountingRun
    from .runner import CnnPerf, Sides
    from .sampling.manager import Sampler, Sampling
    from .sampling.messages import Job
    from .sampling.stopping import Stopping
    from .session import Session

#: fixtures that make a test a benchmark (skipped without --cnnperf)
BENCHMARK_FIXTURES = frozenset({"cnnperf", "cnnperf_device", "cudnn_mode", "model_factory"})
SKIP_REASON = "benchmark: run pytest with --cnnperf to measure it"
#: every setting: the plugin's, then the zoo's
TABLE = (*settings.SETTINGS, *zoo.SETTINGS)

# the keys under which a session keeps its state in config.stash
#: the session's results, baselines to save and settings (only in a ``--cnnperf`` run)
SESSION: pytest.StashKey[Session] = pytest.StashKey()
#: where the session's samples come from
SAMPLING: pytest.StashKey[Sampling] = pytest.StashKey()
#: how the session stops on SIGINT and SIGTERM
STOPPING: pytest.StashKey[Stopping] = pytest.StashKey()
#: the processes that count instructions (``--cnnperf-metric=instructions``): this checkout's,
#: and the revision's where a run is gated against one
COUNTING: pytest.StashKey[list[CountingPool]] = pytest.StashKey()
#: the revision every benchmark is gated against in this run (``--cnnperf-against``): its
#: worktree, and where samples are taken its process
AGAINST: pytest.StashKey[AgainstRun | None] = pytest.StashKey()


class HookSpecs:
    """Hooks that a project's ``conftest.py`` can implement."""

    @pytest.hookspec
    def pytest_cnnperf_register_models(self, registry: ModelRegistry) -> None:
        """Register the project's own models for ``model_factory``; called once per
        ``--cnnperf`` run. Example::

            def pytest_cnnperf_register_models(registry):
                registry.add("tinynet", TinyNet, image_size=32)

        ``TinyNet(num_classes=...)`` must build the model with random weights on no device.
        """


# ---- configuration ----


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(HookSpecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add_options(parser, TABLE)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", settings.MARKER_HELP)
    if not config.option.cnnperf_enabled:  # nothing else to do, and no ini setting to check
        return
    try:
        configuration = settings.Configuration.read(
            config.option, config.getini, config.invocation_params.dir, config.rootpath, TABLE
        )
    except settings.IniError as exc:
        raise pytest.UsageError(str(exc)) from None
    from .measuring import device
    from .models import ModelRegistry
    from .sampling import xdist
    from .sampling.manager import Sampling
    from .session import Session

    requested = configuration.resolve("cpu")
    if requested[settings.CREEP] is not None and requested[settings.HISTORY] is None:
        raise pytest.UsageError(
            "the creep gate (--cnnperf-creep, cnnperf_creep) compares with a history: give one "
            "with --cnnperf-history=TARGET or the ini setting cnnperf_history"
        )
    slot = xdist.worker_slot(config)
    if slot and requested[settings.DEVICE].kind != "cpu":
        xdist.pin_worker_gpu(slot[0], device.cuda_device_count)  # before anything counts
    registry = ModelRegistry()
    config.hook.pytest_cnnperf_register_models(registry=registry)
    try:
        run_device = device.resolve(requested[settings.DEVICE], requested[settings.CUDNN])
    except device.DeviceProblem as exc:
        raise pytest.UsageError(str(exc)) from None
    session = Session(configuration, run_device, registry)
    from .store.baseline import folder_problem

    problem = folder_problem(session.settings[settings.BASELINES])
    if problem:
        raise pytest.UsageError(
            f"the baselines folder (--cnnperf-baselines, or the cnnperf_baselines ini setting): "
            f"{problem}; name a folder, or leave the setting out for baselines/ under the rootdir"
        )
    trace = session.settings[settings.TRACE]
    if trace is not None:
        from .store.locations import display_path

        if trace.exists() and not trace.is_dir():
            raise pytest.UsageError(
                f"the trace folder (--cnnperf-trace): {display_path(trace)} is a file, not a "
                "folder; name a folder for the traces"
            )
        if session.settings[settings.ATTRIBUTION] == "off":
            raise pytest.UsageError(
                f"--cnnperf-trace={display_path(trace)} writes the profiled steps, but "
                "--cnnperf-attribution=off (or cnnperf_attribution = off) takes no profile; "
                "leave one of them out"
            )
    if session.settings[settings.METRIC] == "instructions" and session.device_type != "cpu":
        raise pytest.UsageError(
            f"--cnnperf-metric=instructions counts instructions on the CPU (under Valgrind, "
            f"which runs no GPU work), and this run measures on {session.device}; add "
            "--cnnperf-device=cpu, or gate by time: --cnnperf-metric=time"
        )
    if session.history_target is not None:
        from .history.record import HistoryLink

        session.history = HistoryLink(session.history_target)
    config.stash[SESSION] = session
    if session.device_type == "cpu":  # before the zygote forks: sample processes inherit it
        from .measuring import heap

        heap.keep()
    config.stash[SAMPLING] = Sampling(
        run_device, session.settings[settings.INPROCESS], session.settings[settings.SAMPLE_TIMEOUT]
    )
    if slot and session.device_type == "cpu":
        session.warn(xdist.share_threads(slot[1]))
    _revisions(config, session)
    started = xdist.controller_workers(config)
    if started:
        request = session.settings[settings.DEVICE]
        xdist.check_gpus(started, device.cuda_device_count(), session.device_type, request.index)
        config.pluginmanager.register(xdist.XdistHooks(session, _worktree), "cnnperf-xdist")


def _worktree(config: pytest.Config) -> str | None:
    """The worktree of the revision gated against, which the controller makes for its workers."""
    against = config.stash.get(AGAINST, None)
    return str(against.worktree.path) if against is not None else None


def _revisions(config: pytest.Config, session: Session) -> None:
    """This process as one side of a comparison with another revision: the revision's own
    process (started by the head's), or the head gated against it (``--cnnperf-against``)."""
    from .revision import protocol

    order = protocol.current_order()
    if order is not None:
        from .revision.serve import Serving, prepare

        prepare(order)
        config.stash[SAMPLING].one_thread = order.threads == 1
        serving = Serving(order, config.stash[SAMPLING], _is_benchmark)
        config.pluginmanager.register(serving, "cnnperf-serving")
        return
    name = session.settings[settings.AGAINST]
    if name is None:
        return
    from .revision import against
    from .sampling.xdist import WORKTREE_KEY

    workerinput = getattr(config, "workerinput", {})
    try:
        config.stash[AGAINST] = against.prepare(
            config,
            name,
            save=session.settings[settings.SAVE],
            inprocess=session.settings[settings.INPROCESS],
            worktree=workerinput.get(WORKTREE_KEY),
        )
    except against.AgainstProblem as exc:
        raise pytest.UsageError(str(exc)) from None


def _session(config: pytest.Config) -> Session | None:
    return config.stash.get(SESSION, None)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    session = _session(config)
    if session is None:
        return None
    from .store.locations import display_path

    values = session.settings
    how = "inside the pytest process" if values[settings.INPROCESS] else "in fresh sample processes"
    mode = "recording baselines" if values[settings.SAVE] else "gating against baselines"
    where = display_path(values[settings.BASELINES])
    lines = [f"cnnperf: {session.device}, measured {how}; {mode} in {where}"]
    if values[settings.METRIC] == "instructions" and session.device_type == "cpu":
        from .revision.counting import header

        lines.append(f"cnnperf: {header(bool(getattr(config.option, 'numprocesses', None)))}")
    from .measuring import heap

    if heap.KEPT:
        lines.append(f"cnnperf: {heap.KEPT}")
    from .doctor import session_warning

    unfit = session_warning(session.device_type)
    if unfit:
        lines.append(f"cnnperf: warning: {unfit}")
    return lines


# ---- the session: sample processes ----


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session: pytest.Session) -> Iterator[None]:
    """Fork the zygote of sample processes once the session has started, before any test
    runs torch code; from then on, SIGINT and SIGTERM end them (``stopping``)."""
    yield
    state = _session(session.config)
    if state is None:
        return
    from .sampling import xdist
    from .sampling.stopping import Stopping

    sampling = session.config.stash[SAMPLING]
    stopping = Stopping(lambda: _stop(session.config))
    session.config.stash[STOPPING] = stopping
    session.config.pluginmanager.register(stopping, "cnnperf-stopping")
    stopping.start()
    if xdist.controller_workers(session.config):
        return
    warning = sampling.start(lambda job: _sample_process(session, job))
    if warning:
        state.warn(warning)
    passed = _passed_on(session.config)
    against = session.config.stash.get(AGAINST, None)
    if against is not None:  # it collects while this process does
        from .revision.against import threads_set

        modes = state.settings[settings.CUDNN]
        cudnn = ",".join(m.value for m in modes) if modes else None
        against.start(session.config, state.device, cudnn, passed, threads_set())
    if state.device_type == "cpu":
        session.config.stash[COUNTING] = _counting(session, state, passed, against)


def _counting(
    session: pytest.Session, state: Session, passed: tuple[str, ...], against: AgainstRun | None
) -> list[CountingPool]:
    """The counting processes (--cnnperf-metric=instructions), started at the first count."""
    from .revision.counting import pools

    config = session.config

    def upcoming() -> list[tuple[str, str]]:
        return [(item.nodeid, str(item.path)) for item in session.items if _is_benchmark(item)]

    def start(run: CountingRun) -> BaseSampler:
        return run.sampler(config, passed, state.sample_timeout)

    return pools(start, upcoming, hasattr(config, "workerinput"), against)


def _passed_on(config: pytest.Config) -> tuple[str, ...]:
    """The options the run's other pytest processes (the revision's, the counting ones) are
    started with, so that they collect and measure as this one does: every ini setting as
    this process reads it, no revision to gate against, and the zoo's command-line options."""
    ini = {s.ini_name: str(config.getini(s.ini_name)) for s in TABLE if s.ini}
    ini[settings.AGAINST.ini_name] = ""
    words = [word for name, value in ini.items() for word in ("-o", f"{name}={value}")]
    return (*words, *settings.as_given(config.invocation_params.args, zoo.SETTINGS))


def _sides(config: pytest.Config) -> Sides:
    """The other processes this process's benchmarks take samples from."""
    from .runner import Sides

    against = config.stash.get(AGAINST, None)
    pools = config.stash.get(COUNTING, [])

    def counter(index: int) -> Callable[[], Sampler] | None:
        return (lambda: pools[index]) if index < len(pools) else None

    def held() -> AbstractContextManager[None]:
        from .revision.counting import held

        return held(pools)

    return Sides(against, counter(0), counter(1), held)


def _sample_process(session: pytest.Session, job: Job) -> None:
    """In a fresh sample process: run ``job``'s test, which gates nothing, against no
    revision, with the leak check of a revision's process before it reports."""
    from .revision.imports import leak_check
    from .sampling import child

    session.config.stash[AGAINST] = None
    child.run_job(session, session.config.stash[SAMPLING], job, leak_check)


def _stop(config: pytest.Config) -> None:
    """End every process the plugin started and remove the revision's worktree (again: nothing)."""
    config.stash[SAMPLING].close()
    against = config.stash.get(AGAINST, None)
    if against is not None:
        against.close()
    for counting in config.stash.get(COUNTING, ()):
        counting.close()


# ---- collection ----


def _is_benchmark(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool(names & BENCHMARK_FIXTURES) or item.get_closest_marker("cnnperf") is not None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    session = _session(metafunc.config)
    if session is None or "cudnn_mode" not in metafunc.fixturenames:
        return
    modes = session.settings[settings.CUDNN]
    if modes:
        metafunc.parametrize("cudnn_mode", modes, indirect=True, ids=[m.value for m in modes])


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Note the benchmark tests of each module as the module lists them, before a node id,
    ``-k``, ``-m`` or ``--lf`` leaves some out (this innermost wrapper sees the list before
    ``--lf``'s shortens it): only an entry whose test no longer exists is stale."""
    report: pytest.CollectReport = yield
    session = _session(collector.config)
    if session is None or collector.getparent(pytest.Module) is None:
        return report
    from .store.locations import Location

    session.collected_node(Location.of(collector))
    if report.failed:
        session.expect(Location.of(collector))
    for node in report.result:
        if isinstance(node, pytest.Item):
            if _is_benchmark(node):
                session.collect(Location.of(node))
        else:  # a class, collected next unless a node id leaves it out
            session.expect(Location.of(node))
    return report


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --cnnperf, skip the benchmarks (with it, the collect reports noted them)."""
    if _session(config) is not None:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if _is_benchmark(item):
            item.add_marker(skip)


# ---- running ----


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Seed torch, numpy and random before a benchmark test's fixtures and body build its
    model: the same initial weights in every process, so its first steps' numbers compare."""
    if _session(item.config) is not None and _is_benchmark(item):
        from .measuring.numbers import seed_everything

        seed_everything()


# ---- fixtures ----


def _require_session(config: pytest.Config) -> Session:
    session = _session(config)
    if session is None:  # only reachable when a benchmark fixture is used outside a test item
        pytest.skip(SKIP_REASON)
    return session


@pytest.fixture(scope="session")
def cnnperf_device(pytestconfig: pytest.Config) -> Any:
    """The ``torch.device`` this run benchmarks on (``--cnnperf-device``)."""
    import torch

    return torch.device(_require_session(pytestconfig).device)


@pytest.fixture
def cudnn_mode(request: pytest.FixtureRequest) -> Iterator[CudnnMode | None]:
    """The cuDNN mode in force for this test: one of the ``--cudnn`` modes (set for the test
    and restored after it), or the flags as they are; ``None`` on the CPU."""
    from .measuring.cudnn import cudnn_mode_applied, current_mode

    session = _require_session(request.config)
    mode = getattr(request, "param", None)
    if mode is None:
        yield current_mode() if session.device_type == "cuda" else None
        return
    with cudnn_mode_applied(mode):
        yield mode


@pytest.fixture(scope="session")
def model_factory(pytestconfig: pytest.Config) -> ModelFactory:
    """Build models by name: torchvision's classification models and the project's own
    (``pytest_cnnperf_register_models``). Random weights; nothing is downloaded."""
    from .models import ModelFactory

    return ModelFactory(_require_session(pytestconfig).registry)


@pytest.fixture
def cnnperf(request: pytest.FixtureRequest, cudnn_mode: CudnnMode | None) -> CnnPerf:
    """The benchmark runner: ``cnnperf.train_step(model, batch_size=...)``, ``train_loop``,
    ``inference`` and ``measure`` measure, gate against the baseline and return the result."""
    from .runner import CnnPerf
    from .store.locations import Location

    session = _require_session(request.config)
    marker = request.node.get_closest_marker("cnnperf")
    values, problem = None, None
    try:
        values = settings.read_marker(marker.args, marker.kwargs) if marker else None
    except settings.MarkerError as exc:
        problem = str(exc)
    if problem:
        pytest.fail(f"cnnperf: {problem}", pytrace=False)
    sampler, warning = request.config.stash[SAMPLING].sampler()
    if warning:
        session.warn(warning)
    return CnnPerf(
        session,
        sampler,
        Location.of(request.node),
        session.plan_for(values),
        cudnn_mode.value if cudnn_mode else None,
        _sides(request.config),
    )


# ---- reporting and the end of the session ----


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Add the figures of the benchmarks this test measured to its ``user_properties``
    (``--junitxml`` writes them as properties), before its report is made."""
    session = _session(item.config)
    if session is None:
        return (yield)
    before = len(session.results)
    try:
        return (yield)
    finally:
        from .reports import junit

        for result in session.results[before:]:
            item.user_properties.extend(junit.properties(result))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``-v``, each benchmark's verdict and headline figures under its test's line."""
    session = _session(item.config)
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    if session is None or reporter is None or item.config.get_verbosity() < 1:
        return (yield)
    before = len(session.results)
    outcome = yield
    from .reports import terminal

    terminal.headlines(reporter, session.results[before:])
    return outcome


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    session = _session(terminalreporter.config)
    if session is None:
        return
    from .reports import terminal

    terminal.summary(terminalreporter, session)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = _session(session.config)
    if state is None:
        return
    from .reports import outputs
    from .sampling import xdist

    _stop(session.config)
    # the session's compiler caches: compiled C++ and kernels, tens of MB a model
    shutil.rmtree(state.compile_cache, ignore_errors=True)
    if xdist.worker_slot(session.config):  # the controller merges, saves and reports
        xdist.send(session.config, state)
        return
    stopping = session.config.stash[STOPPING]
    if exitstatus == pytest.ExitCode.INTERRUPTED or stopping.interrupted:
        state.interrupted()
    else:
        with stopping.deferred() as late:  # a file is written whole, and the session says so
            state.save_baselines()
        if late:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            state.warn("interrupted while saving baselines: the saving was finished first")
    if state.finish.unsaved and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    outputs.write_session_reports(state, outputs.benchmark_info(session.config))
    if state.history_target is not None:  # last: a history out of reach costs nothing else
        _record_history(session, state, stopping, state.history_target)


def _record_history(
    session: pytest.Session, state: Session, stopping: Stopping, target: Path | str
) -> None:
    """Append the run to its history, unless it was interrupted: a run cut short would be read
    as a real one (and, with --cnnperf-creep-accept, as the creep gate's new start)."""
    from .history import record

    if session.exitstatus == pytest.ExitCode.INTERRUPTED or stopping.interrupted:
        state.warn("the run was interrupted: it is not recorded in the history")
        return
    accepted = state.settings[settings.CREEP_ACCEPT]
    with stopping.deferred() as late:  # a run is appended whole
        line, problem = record.append(
            target, session.config.rootpath, state.machine, accepted, state.results
        )
    state.reported([line] if line else [], [problem] if problem else [])
    if late:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
        state.warn("interrupted while recording the run in the history: it was recorded first")


def pytest_unconfigure(config: pytest.Config) -> None:
    """End the sample processes (if the session did not) and put back the signal handlers."""
    if _session(config) is None:
        return
    _stop(config)
    stopping = config.stash.get(STOPPING, None)
    if stopping is not None:
        stopping.restore()
