"""Shared fixtures for pytest-cnnperf's own tests.

torch, torchvision, scipy and the whole package are imported here, by the outer session:
in-process ``pytester`` runs drop the modules first imported inside them (importing them again in
every run, and C extensions cannot be imported twice), while a package that stays loaded keeps
its submodules as attributes, so a module dropped and imported again would meet an old copy of
its neighbours.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import scipy.stats  # noqa: F401  (imported once, for in-process pytester runs)
import torch  # imported once, for in-process pytester runs
import torchvision  # noqa: F401  (imported once, for in-process pytester runs)
from factories import record_quiet_noise
from scripted import Scripted

import pytest_cnnperf

for _module in pkgutil.walk_packages(pytest_cnnperf.__path__, "pytest_cnnperf."):
    if not _module.name.startswith("pytest_cnnperf.zoo.test_"):
        importlib.import_module(_module.name)

pytest_plugins = ["pytester"]

#: a tiny model whose step time is dominated by a sleep, so that a run's speed is repeatable on a
#: busy machine; SLOWDOWN_FILE and GROWTH_FILE inject a large, deterministic slowdown or growth
SLEEPY_MODEL = '''
    import os
    import time

    import torch
    from torch import nn

    SLEEP_S = 0.010


    class Sleepy(nn.Module):
        """A tiny conv net whose forward sleeps. Files next to the test inject changes:
        SLOWDOWN-<name> triples the sleep, GROWTH-<name> keeps 16 MiB more alive."""

        def __init__(self, num_classes=10, name="a"):
            super().__init__()
            self.name = name
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.head = nn.Linear(4, num_classes)

        def _injected(self, what):
            return os.path.exists(os.path.join(os.path.dirname(__file__), f"{what}-{self.name}"))

        def forward(self, x):
            time.sleep(SLEEP_S * (3 if self._injected("SLOWDOWN") else 1))
            y = self.conv(x)
            if self._injected("GROWTH"):
                # 16 MiB kept alive from forward to backward (a view saved for the gradient
                # keeps its whole storage), at almost no cost in time
                y = y + (torch.empty(4 << 20)[:1] * self.head.bias[0]).sum()
            return self.head(y.mean(dim=(2, 3)))
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project with the sleepy model in ``models.py``, in-process sampling (fresh
    sample processes need a fresh pytest process; see test_sampling), no calibration (the
    sleepy model's speed does not follow the machine's, so allowing for it would distort) and a
    30% threshold: the injected changes are far larger, a busy test machine's noise is not."""
    pytester.makepyfile(models=textwrap.dedent(SLEEPY_MODEL))
    pytester.makeini(
        """
        [pytest]
        cnnperf_inprocess = true
        cnnperf_samples = 4
        cnnperf_min_time = 0.1
        cnnperf_attribution = off
        cnnperf_calibration = false
        cnnperf_threshold = 30%
        """
    )
    record_quiet_noise(pytester.path / "baselines")
    return pytester


@pytest.fixture
def inject(pytester: pytest.Pytester) -> Callable[[str], Path]:
    """Create a marker file (``SLOWDOWN-a``, ``GROWTH-b``) that the sleepy model reacts to."""

    def create(name: str) -> Path:
        path = pytester.path / name
        path.write_text("1")
        return path

    return create


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch on one thread during the test, for the in-process runs that time the sleepy model
    for real: on a busy shared machine each parallel op of a 2-thread step waits for a thread
    that is not running, and the step takes tens of times its sleep, which then no longer
    decides its speed."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def scripted() -> Scripted:
    """The script of a test's scripted runs: change it between runs (``slow_down``, ``grow``,
    ``fail``) as a change to the code would change the figures."""
    return Scripted()


@pytest.fixture
def scripted_project(
    project: pytest.Pytester, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    """``project`` whose every ``runpytest`` takes its samples from ``scripted`` at once (through
    the real plugin, session, baseline files and gate): no benchmark is timed, and the sleepy
    model is built but never run."""
    run = project.runpytest

    def runpytest(*args: str | os.PathLike[str], **kwargs: Any) -> pytest.RunResult:
        kwargs["plugins"] = [scripted, *kwargs.get("plugins", ())]
        return run(*args, **kwargs)

    monkeypatch.setattr(project, "runpytest", runpytest)
    return project


@pytest.fixture(scope="session")
def saved_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[pytest.Pytester, str, Callable[[], None]], None]:
    """Baselines saved once a session for each ``key``: the first test that asks runs ``save``
    in its pytester and keeps a copy of the ``baselines`` folder it wrote; later tests get that
    copy instead of saving the same net again (what they check is the gated run)."""
    kept: dict[str, Path] = {}

    def once(pytester: pytest.Pytester, key: str, save: Callable[[], None]) -> None:
        if key in kept:
            shutil.copytree(kept[key], pytester.path / "baselines")
            return
        save()
        kept[key] = tmp_path_factory.mktemp(f"saved-{key}") / "baselines"
        shutil.copytree(pytester.path / "baselines", kept[key])

    return once
