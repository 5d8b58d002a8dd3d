"""A scripted sampler: samples whose figures come from a script, not a clock.

Workflow, fault, report and option tests run pytest through ``pytester`` in-process with a
:class:`Scripted` plugin. Benchmarks then go through the plugin, the session, the baseline files
and the gate as they always do, but every sample is made up at once: a step time per test (with
a small, fixed spread, so that the gate's rank test has distinct values to order), a calibration,
and a peak memory. A test changes the script between runs (``slow_down``, ``grow``) the way a
change to the code would change the figures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_cnnperf.model import Environment, MemoryPeak, Sample
from pytest_cnnperf.plugin import SAMPLING
from pytest_cnnperf.sampling.manager import Target
from pytest_cnnperf.sampling.messages import BenchmarkError, Site, TakenSample

#: the spread of a scripted benchmark's samples around its step time: +-2%, in five steps, in an
#: order whose every odd prefix (the samples of a look) has the step time as its median
SPREAD = (0.0, -0.01, 0.01, -0.02, 0.02)


@dataclass
class Script:
    """What each benchmark measures: a step time and a peak memory, by test name (the part of
    the node id after ``::``), with defaults for the rest."""

    step_s: float = 0.010
    peak_bytes: int = 64 << 20
    calibration_s: float = 0.002
    #: test name -> factor on its step time
    slower: dict[str, float] = field(default_factory=dict)
    #: test name -> extra bytes at its peak
    grown: dict[str, int] = field(default_factory=dict)
    #: test name -> the error its samples fail with
    failing: dict[str, str] = field(default_factory=dict)
    #: how many samples every benchmark took, in order (``(test name, count)``)
    taken: list[tuple[str, int]] = field(default_factory=list)
    #: and how many of them a real run would have profiled the operators of
    profiled: list[tuple[str, int]] = field(default_factory=list)
    #: changes each sample as it is taken: ``decorate(target, i, sample)``, ``i`` its index in
    #: this look (the first ``target.counted_samples`` of them count FLOPs in a real run); adds
    #: what the script does not make up (FLOPs, a peak, energy, an optimizer phase)
    decorate: Callable[[Target, int, Sample], Sample] | None = None


class ScriptedSampler:
    """A ``Sampler`` whose samples follow a :class:`Script`."""

    in_process = False

    def __init__(self, script: Script, environment: Callable[[str | None], Environment]) -> None:
        self.script = script
        self.environment = environment

    def replayed(self, site: Site) -> Any:
        return None

    def take(self, target: Target, count: int) -> list[TakenSample]:
        script = self.script
        test = target.site.nodeid.split("::", 1)[-1]
        script.taken.append((test, count))
        script.profiled.append((test, min(count, target.profile_samples)))
        if test in script.failing:
            raise BenchmarkError(script.failing[test])
        step = script.step_s * script.slower.get(test, 1.0)
        environment = self.environment(target.plan.machine)
        done = sum(n for t, n in script.taken[:-1] if t == test)  # samples of earlier looks
        samples = []
        for i in range(count):
            wobble = 1 + SPREAD[(done + i) % len(SPREAD)]
            memory = None
            if i < target.memory_samples:
                peak = script.peak_bytes + script.grown.get(test, 0)
                memory = MemoryPeak(peak, peak, "scripted")
            samples.append(
                Sample(
                    step_time_s=step * wobble,
                    step_times_s=(step * wobble,) * 4,
                    phases={"forward": (step * wobble / 2,), "backward": (step * wobble / 2,)},
                    cold_step_s=step * 3,
                    warmup_steps=3,
                    warmup_steady=True,
                    calibration_s=script.calibration_s * wobble if target.plan.calibrate else None,
                    calibration_unit="scripted-v1" if target.plan.calibrate else None,
                    memory=memory,
                )
            )
        if script.decorate is not None:
            samples = [script.decorate(target, i, s) for i, s in enumerate(samples)]
        return [TakenSample(s, environment) for s in samples]


class Scripted:
    """A pytest plugin that makes every benchmark of a run take scripted samples: pass it with
    ``pytester.runpytest(..., plugins=[scripted])``."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self._environment: Environment | None = None

    def environment(self, machine: str | None) -> Environment:
        if self._environment is None:
            import torch

            from pytest_cnnperf.measuring.environment import capture

            self._environment = capture(torch.device("cpu"), None, None)
        env = self._environment
        return dataclasses.replace(env, machine=machine) if machine else env

    def slow_down(self, test: str, factor: float) -> None:
        self.script.slower[test] = factor

    def grow(self, test: str, extra_bytes: int) -> None:
        self.script.grown[test] = extra_bytes

    def fail(self, test: str, error: str) -> None:
        self.script.failing[test] = error

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.option.cnnperf_inprocess = True  # no sample processes to fork

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        sampling = session.config.stash.get(SAMPLING, None)
        if sampling is not None:
            sampling.use(ScriptedSampler(self.script, self.environment))
