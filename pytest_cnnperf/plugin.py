"""pytest glue: options, fixtures, collection and session hooks. No torch at import time.

Everything here wires pytest to the modules that do the work; see the README for the user's
view. Hooks are grouped by the phase of a session they belong to.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import config as options
from .state import STATE, SessionState

if TYPE_CHECKING:
    from .cudnn import CudnnMode
    from .models import ModelRegistry
    from .runner import CnnPerf

#: fixtures that make a test a benchmark (skipped without --cnnperf)
BENCHMARK_FIXTURES = frozenset({"cnnperf", "cnnperf_device", "cudnn_mode", "model_factory"})
SKIP_REASON = "benchmark: run pytest with --cnnperf to measure it"


# ---- configuration ----


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", options.MARKER_HELP)
    if not config.option.cnnperf:  # nothing else to do, and no ini setting to complain about
        return
    cfg = options.CnnPerfConfig.from_pytest_config(config)
    from . import device, workers
    from .baseline import BaselineStore
    from .models import ModelRegistry

    slot = workers.worker_slot(config)
    if slot and cfg.device.kind != "cpu" and device.cuda_device_count() > 0:
        workers.pin_gpu(slot[0])  # before anything initialises CUDA
    registry = ModelRegistry()
    config.hook.pytest_cnnperf_register_models(registry=registry)
    state = SessionState(
        config=cfg,
        device=device.resolve(cfg.device, cfg.cudnn_modes),
        registry=registry,
        store=BaselineStore(cfg.baseline_dir),
    )
    config.stash[STATE] = state
    if slot and state.device_type == "cpu":
        state.warnings.append(workers.share_threads(slot[1]))
    started = workers.controller_workers(config)
    if started:
        workers.check_gpus(started, device.cuda_device_count(), state.device_type, cfg.device.index)
        config.pluginmanager.register(workers.XdistHooks(state), "cnnperf-xdist")


def _state(config: pytest.Config) -> SessionState | None:
    return config.stash.get(STATE, None)


def pytest_report_header(config: pytest.Config) -> str | None:
    state = _state(config)
    if state is None:
        return None
    how = "inside the pytest process" if state.config.in_process else "in fresh sample processes"
    mode = "recording baselines" if state.config.save else "gating against baselines"
    from .explain import display_path

    where = display_path(state.config.baseline_dir)
    return f"cnnperf: {state.device}, measured {how}; {mode} in {where}"


# ---- the session: sample processes ----


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session: pytest.Session) -> Iterator[None]:
    """Fork the zygote of sample processes once the session has started, before any test
    runs torch code."""
    yield
    from . import workers

    state = _state(session.config)
    if state is None or state.config.in_process or workers.controller_workers(session.config):
        return
    if not hasattr(os, "fork"):
        state.warnings.append("this platform cannot fork, so samples are taken in-process")
        return
    from . import sampling
    from .sample_process import run_job

    device = state.device

    def serve(requests: int, replies: int) -> None:
        sampling.serve(requests, replies, lambda: _probe(device), lambda job: run_job(session, job))

    state.zygote = sampling.Zygote.fork(serve)


def _probe(device: str) -> None:
    """Work that hangs in a forked child when the parent already started torch's threads."""
    import torch

    x = torch.ones(1 << 20)
    (x * 2).sum()
    torch.nn.functional.conv2d(torch.ones(8, 16, 32, 32), torch.ones(16, 16, 3, 3))
    if device.startswith("cuda"):
        torch.ones(1, device=device).add_(1)
        torch.cuda.synchronize(device)


def _sampler(state: SessionState) -> None:
    """Choose where samples come from, once, when the first benchmark runs."""
    if state.sampler is not None:
        return
    from . import sampling

    zygote = state.zygote
    if zygote is not None and zygote.wait_ready():
        state.sampler = sampling.ProcessSampler(zygote, timeout=state.config.sample_timeout_s)
        return
    reason = (
        None
        if state.config.in_process
        else (zygote.unusable if zygote else "no sample processes could be started")
    )
    if reason:
        state.warnings.append(
            f"samples were taken inside the pytest process because {reason}; they then share one "
            "process's noise, so verdicts are less certain"
        )
    import torch

    from .explain import describe_error

    state.sampler = sampling.InProcessSampler(torch.device(state.device), describe_error, reason)


# ---- collection ----


def _is_benchmark(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool(names & BENCHMARK_FIXTURES) or item.get_closest_marker("cnnperf") is not None


def benchmark_id(item: pytest.Item) -> tuple[str, str]:
    """The baseline module key and the test name of ``item``."""
    from .baseline import module_key

    path = Path(str(item.path))
    try:
        relative = path.relative_to(item.config.rootpath)
        parts = [*relative.parent.parts, relative.stem]
    except ValueError:  # outside the rootdir, e.g. an installed package run with --pyargs
        module = getattr(getattr(item, "module", None), "__name__", path.stem)
        parts = module.split(".")
    test = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.name
    return module_key(parts), test


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state = _state(metafunc.config)
    if state is None or "cudnn_mode" not in metafunc.fixturenames:
        return
    modes = state.config.cudnn_modes
    if modes:
        metafunc.parametrize("cudnn_mode", modes, indirect=True, ids=[m.value for m in modes])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    benchmarks = [item for item in items if _is_benchmark(item)]
    if state is None:
        skip = pytest.mark.skip(reason=SKIP_REASON)
        for item in benchmarks:
            item.add_marker(skip)
        return
    for item in benchmarks:
        module, test = benchmark_id(item)
        state.collected[module].add(test)


# ---- fixtures ----


@pytest.fixture(scope="session")
def cnnperf_device(pytestconfig: pytest.Config) -> Any:
    """The ``torch.device`` this run benchmarks on (``--cnnperf-device``)."""
    import torch

    return torch.device(_require_state(pytestconfig).device)


@pytest.fixture
def cudnn_mode(request: pytest.FixtureRequest) -> Iterator[CudnnMode | None]:
    """The cuDNN mode in force for this test: one of the ``--cudnn`` modes (set for the test
    and restored after it), or the flags as they are; ``None`` on the CPU."""
    from .cudnn import cudnn_mode_applied, current_mode

    state = _require_state(request.config)
    mode = getattr(request, "param", None)
    if mode is None:
        yield current_mode() if state.device_type == "cuda" else None
        return
    with cudnn_mode_applied(mode):
        yield mode


class ModelFactory:
    """``model_factory("resnet50", num_classes=10)``: a model with random weights, on no device."""

    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry

    def __call__(self, name: str, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        from .models import UnknownModelError

        try:
            return self.registry.build(name, **kwargs)
        except UnknownModelError as exc:
            problem = str(exc)
        pytest.fail(f"cnnperf: {problem}", pytrace=False)

    def image_size(self, name: str) -> tuple[int, int]:
        """The model's usual input size, e.g. ``(299, 299)`` for ``inception_v3``."""
        return self.registry.spec(name).image_size

    def names(self) -> list[str]:
        return self.registry.names()


@pytest.fixture(scope="session")
def model_factory(pytestconfig: pytest.Config) -> ModelFactory:
    """Build models by name: torchvision's classification models and the project's own
    (``pytest_cnnperf_register_models``). Random weights; nothing is downloaded."""
    return ModelFactory(_require_state(pytestconfig).registry)


@pytest.fixture
def cnnperf(request: pytest.FixtureRequest, cudnn_mode: CudnnMode | None) -> CnnPerf:
    """The benchmark runner: ``cnnperf.train_step(model, batch_size=...)``,
    ``cnnperf.inference(...)`` and ``cnnperf.measure(step_fn, ...)`` measure, gate against the
    baseline and return the result."""
    from .config import Overrides, overrides_from_marker
    from .runner import BenchmarkId, CnnPerf

    state = _require_state(request.config)
    marker = request.node.get_closest_marker("cnnperf")
    overrides, problem = Overrides(), None
    try:
        overrides = overrides_from_marker(marker.args, marker.kwargs) if marker else Overrides()
    except ValueError as exc:
        problem = str(exc)
    if problem:
        pytest.fail(f"cnnperf: {problem}", pytrace=False)
    _sampler(state)
    module, test = benchmark_id(request.node)
    ident = BenchmarkId(
        nodeid=request.node.nodeid, path=str(request.node.path), module=module, test=test
    )
    return CnnPerf(state, ident, overrides, cudnn_mode.value if cudnn_mode else None)


def _require_state(config: pytest.Config) -> SessionState:
    state = _state(config)
    if state is None:  # only reachable when a benchmark fixture is used outside a test item
        pytest.skip(SKIP_REASON)
    return state


# ---- reporting and the end of the session ----


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Add the figures of the benchmarks this test measured to its ``user_properties``
    (``--junitxml`` writes them as properties), before its report is made."""
    state = _state(item.config)
    if state is None or state.job is not None:
        return (yield)
    before = len(state.results)
    try:
        return (yield)
    finally:
        from .reports import junit

        item.user_properties.extend(junit.all_properties(state.results[before:]))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``-v``, each benchmark's verdict and headline figures under its test's line."""
    state = _state(item.config)
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    if state is None or state.job is not None or reporter is None:
        return (yield)
    if item.config.get_verbosity() < 1:
        return (yield)
    before = len(state.results)
    outcome = yield
    from .reports import terminal

    terminal.headlines(reporter, state.results[before:])
    return outcome


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    state = _state(terminalreporter.config)
    if state is None:
        return
    from .reports import terminal

    terminal.summary(terminalreporter, state)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = _state(session.config)
    if state is None:
        return
    if state.zygote is not None:
        state.zygote.close()
        state.zygote = None
    from . import finish, workers

    if workers.worker_slot(session.config):  # the controller merges, saves and reports
        workers.send(session.config, state)
        return
    finish.save_baselines(state)
    finish.write_reports(state, _benchmark_info(session.config))


def _benchmark_info(config: pytest.Config) -> Callable[[], tuple[Any, Any]] | None:
    """pytest-benchmark's machine and commit information through its hooks (so a project's
    overrides apply), when its plugin is active."""
    if not config.pluginmanager.hasplugin("benchmark"):
        return None

    def info() -> tuple[Any, Any]:
        hook = config.hook
        return (
            hook.pytest_benchmark_generate_machine_info(config=config),
            hook.pytest_benchmark_generate_commit_info(config=config),
        )

    return info
