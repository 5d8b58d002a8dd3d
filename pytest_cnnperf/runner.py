"""The ``cnnperf`` fixture's object: measure a benchmark, gate it, record it, return it.

``train_step``, ``inference`` and ``measure`` describe the work and hand it to ``_run``, which
takes samples (in fresh processes by default), compares them with the baseline, re-measures
before declaring a regression, and fails the calling test with the evidence when it regressed.
In a sample process the same call measures one sample and ends the process instead.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest

from . import config as options
from . import explain, gate
from .baseline import BaselineEntry, BaselineFileError
from .config import Overrides
from .policy import DevicePolicy, Effort, TimingPolicy, for_device, with_effort, with_tuning
from .results import BenchConfig, BenchmarkResult, Decision, Measurement, Verdict
from .sampling import (
    BenchmarkError,
    ChildReport,
    Measured,
    MeasureSample,
    Sampler,
    Target,
    write_report,
)
from .state import SessionState
from .workload import (
    InferenceSpec,
    TrainSpec,
    Workload,
    build_custom,
    build_inference,
    build_train,
    loss_name,
    optimizer_name,
)


@dataclass(frozen=True)
class BenchmarkId:
    """Where a benchmark lives: its test, and the baseline file module it belongs to."""

    nodeid: str
    path: str
    module: str
    test: str


def _usage(message: str) -> NoReturn:
    __tracebackhide__ = True
    pytest.fail(f"cnnperf: {message}", pytrace=False)


def _image_size(value: int | tuple[int, int] | None, default: tuple[int, int]) -> tuple[int, int]:
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return (value, value)
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        return (value[0], value[1])
    _usage(
        f"image_size={value!r} is not an image size; use a positive int (224) or (height, width)"
    )


def _batch_size(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    _usage(f"batch_size={value!r} is not a batch size; use a positive int such as 32")


def _amp(value: object) -> str | None:
    if value is None or value is False:
        return None
    try:
        return options.parse_amp(str(value))
    except ValueError as exc:
        _usage(f"amp={value!r}: {exc}")


class CnnPerf:
    """Measures CNN training steps and gates them against their baselines.

    Use it through the ``cnnperf`` fixture::

        def test_resnet50(cnnperf, model_factory):
            cnnperf.train_step(model_factory("resnet50"), batch_size=64)
    """

    def __init__(
        self, state: SessionState, ident: BenchmarkId, marker: Overrides, cudnn_mode: str | None
    ) -> None:
        self._state = state
        self._id = ident
        self._marker = marker
        self._cudnn_mode = cudnn_mode
        self._results: list[BenchmarkResult] = []
        self._keys: set[str] = set()

    @property
    def device(self) -> Any:
        import torch

        return torch.device(self._state.device)

    @property
    def results(self) -> tuple[BenchmarkResult, ...]:
        """The results of this test's benchmarks so far."""
        return tuple(self._results)

    # ---- the public measuring calls ----

    def train_step(
        self,
        model: Any,
        *,
        batch_size: int,
        image_size: int | tuple[int, int] | None = None,
        amp: str | None = None,
        channels_last: bool = False,
        optimizer: str | Callable[..., Any] = "sgd",
        loss: Callable[..., Any] | None = None,
        num_classes: int | None = None,
        world_size: int = 1,
        name: str | None = None,
    ) -> BenchmarkResult:
        """Time forward + loss, backward and the optimizer step of ``model`` on synthetic
        images on the run's device, gate the throughput and peak memory against the baseline,
        and return the result.

        ``image_size``: int or (height, width); default: the model's usual size when it came
        from ``model_factory``, else 224. ``amp``: ``"fp16"`` (autocast + gradient scaler),
        ``"bf16"`` or ``None``. ``optimizer``: ``"sgd"`` (momentum 0.9), ``"adam"``,
        ``"adamw"`` or ``callable(params) -> optimizer``. ``loss``: ``callable(output,
        target) -> loss``; default cross-entropy (with torchvision's auxiliary heads).
        ``world_size``: data-parallel ranks (DistributedDataParallel). ``name``: a label that
        tells apart several benchmarks of the same model in one test.
        """
        __tracebackhide__ = True
        if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
            _usage(f"world_size={world_size!r} is not a number of ranks; use a positive int")
        if world_size > 1 and self._state.device_type == "cuda":
            from .device import cuda_device_count

            gpus = cuda_device_count()
            if world_size > gpus:
                _usage(
                    f"world_size={world_size} needs {world_size} GPUs, one a rank, but {gpus} "
                    f"{'is' if gpus == 1 else 'are'} visible to this process (under pytest-xdist "
                    "each worker sees one); use world_size <= the GPUs this process sees"
                )
        spec = TrainSpec(
            batch_size=_batch_size(batch_size),
            image_size=_image_size(image_size, self._default_size(model)),
            amp=_amp(amp),
            channels_last=bool(channels_last),
            optimizer=self._check_optimizer(optimizer),
            loss=loss,
            num_classes=num_classes,
        )
        config = BenchConfig(
            kind="train_step",
            model=self._model_name(model),
            batch_size=spec.batch_size * world_size,
            image_size=spec.image_size,
            amp=spec.amp,
            channels_last=spec.channels_last,
            optimizer=optimizer_name(spec.optimizer),
            loss=loss_name(loss),
            cudnn_mode=self._cudnn_mode,
            world_size=world_size,
            label=name,
        )

        def build(device: Any, ranks: int) -> Workload:
            return build_train(model, dataclasses.replace(spec, world_size=ranks), device)

        return self._run(config, build, world_size)

    def inference(
        self,
        model: Any,
        *,
        batch_size: int,
        image_size: int | tuple[int, int] | None = None,
        amp: str | None = None,
        channels_last: bool = False,
        name: str | None = None,
    ) -> BenchmarkResult:
        """Time a forward pass of ``model`` in eval mode without autograd; gated like
        ``train_step``."""
        __tracebackhide__ = True
        spec = InferenceSpec(
            batch_size=_batch_size(batch_size),
            image_size=_image_size(image_size, self._default_size(model)),
            amp=_amp(amp),
            channels_last=bool(channels_last),
        )
        config = BenchConfig(
            kind="inference",
            model=self._model_name(model),
            batch_size=spec.batch_size,
            image_size=spec.image_size,
            amp=spec.amp,
            channels_last=spec.channels_last,
            cudnn_mode=self._cudnn_mode,
            label=name,
        )
        return self._run(config, lambda device, ranks: build_inference(model, spec, device))

    def measure(
        self,
        step_fn: Callable[[], Any],
        *,
        items_per_step: int,
        name: str,
        unit: str = "images",
    ) -> BenchmarkResult:
        """Time ``step_fn()``, one step of a training loop of your own (detection,
        segmentation, ...), working on tensors already on ``cnnperf.device``. Throughput is
        ``items_per_step`` (in ``unit``) per step; ``name`` identifies it in the baseline."""
        __tracebackhide__ = True
        if not callable(step_fn):
            _usage(f"measure() needs a callable step function, got {step_fn!r}")
        if not isinstance(name, str) or not name.strip():
            _usage(f"measure() needs a name for the baseline, got {name!r}")
        config = BenchConfig(
            kind="measure",
            model=name,
            batch_size=_batch_size(items_per_step),
            image_size=None,
            cudnn_mode=self._cudnn_mode,
            unit=unit,
        )
        return self._run(config, lambda device, ranks: build_custom(step_fn, config.batch_size))

    # ---- helpers ----

    def _default_size(self, model: Any) -> tuple[int, int]:
        spec = self._state.registry.spec_of(model)
        return spec.image_size if spec else (224, 224)

    def _model_name(self, model: Any) -> str:
        spec = self._state.registry.spec_of(model)
        return spec.name if spec else type(model).__name__

    @staticmethod
    def _check_optimizer(optimizer: str | Callable[..., Any]) -> str | Callable[..., Any]:
        from .workload import OPTIMIZERS

        if callable(optimizer) or (isinstance(optimizer, str) and optimizer.lower() in OPTIMIZERS):
            return optimizer
        _usage(
            f"optimizer={optimizer!r} is not an optimizer; use one of {', '.join(OPTIMIZERS)} or "
            "a callable that takes the model's parameters and returns an optimizer"
        )

    def _policy(self) -> tuple[DevicePolicy, gate.GateSettings]:
        cfg = self._state.config
        merged = cfg.cli.over(self._marker).over(cfg.ini)
        policy = with_effort(for_device(self._state.device_type), merged.effort or Effort.STANDARD)
        policy = with_tuning(policy, cfg.samples, cfg.min_time_s)
        settings = gate.GateSettings(
            policy=policy.gate,
            throughput_threshold=merged.threshold or policy.gate.throughput_threshold,
            memory_threshold=merged.memory_threshold or policy.gate.memory_threshold,
            strict=bool(merged.strict),
        )
        return policy, settings

    def _measure_fn(self) -> MeasureSample:
        state = self._state

        def measure(
            workload: Workload, *, in_process: bool, timing: TimingPolicy, memory: bool
        ) -> Measured:
            from . import environment, nvml
            from .sample import measure_sample

            device = self.device
            job = state.job
            ignore = frozenset({job.parent_pid}) if job else frozenset()
            sample = measure_sample(
                workload,
                device,
                timing,
                in_process=in_process,
                ignore_pids=ignore,
                calibrate=state.config.calibration,
                with_memory=memory,
            )
            driver = None
            if device.type == "cuda":
                monitor = nvml.GpuMonitor.open(device.index or 0)
                driver = monitor.driver_version() if monitor else None
            env = environment.capture(device, state.config.machine, driver)
            return Measured(sample=sample, environment=env)

        return measure

    # ---- the measuring workflow ----

    def _run(
        self, config: BenchConfig, build: Callable[[Any, int], Workload], world_size: int = 1
    ) -> BenchmarkResult:
        __tracebackhide__ = True
        index = len(self._results)
        key = config.key()
        policy, settings = self._policy()
        target = Target(
            nodeid=self._id.nodeid,
            path=self._id.path,
            index=index,
            key=key,
            replay=tuple(self._results),
            build=build,
            measure=self._measure_fn(),
            timing=policy.timing,
            world_size=world_size,
            memory_samples=policy.sampling.memory_samples,
        )
        if self._state.job is not None:
            return self._serve_job(target)
        if key in self._keys:
            _usage(
                f"this test already measured {key!r}; give each benchmark of a test its own "
                "configuration or a distinct name="
            )
        self._keys.add(key)
        started = time.perf_counter()
        state = self._state
        try:
            if state.config.save:
                result = self._record(config, target, policy, started)
            else:
                result = self._gate(config, target, policy, settings, started)
        except BenchmarkError as exc:
            self._fail_error(config, f"measuring {key} on {state.device} failed: {exc}", started)
        except BaselineFileError as exc:
            self._fail_error(config, str(exc), started)
        state.results.append(result)
        self._results.append(result)
        if result.decision.failed:
            pytest.fail(explain.failure(result, settings.policy.alpha), pytrace=False)
        return result

    def _sampler(self) -> Sampler:
        sampler = self._state.sampler
        assert sampler is not None, "the cnnperf fixture chooses the sampler"
        return sampler

    def _record(
        self, config: BenchConfig, target: Target, policy: DevicePolicy, started: float
    ) -> BenchmarkResult:
        """``--cnnperf-save``: measure, and keep the entry for the end of the session."""
        measured = self._sampler().take(target, policy.sampling.save_samples)
        self._queue_save(config, measured)
        busy = gate.disturbance(_measurement(config, measured))
        saved = Decision(
            verdict=Verdict.SAVED,
            notes=(f"{busy}; record it again on a quiet machine",) if busy else (),
        )
        return self._result(config, measured, saved, started)

    def _gate(
        self,
        config: BenchConfig,
        target: Target,
        policy: DevicePolicy,
        settings: gate.GateSettings,
        started: float,
    ) -> BenchmarkResult:
        """Measure, decide, and measure again before any verdict but "ok"."""
        sampler = self._sampler()
        measured = sampler.take(target, policy.sampling.samples)
        decision = self._decide(measured, config, settings)
        more = policy.sampling.max_samples - len(measured)
        if gate.wants_more_samples(decision) and more > 0:
            # memory barely varies: the first samples measured it
            measured += sampler.take(dataclasses.replace(target, memory_samples=0), more)
            decision = self._decide(measured, config, settings)
        return self._result(config, measured, decision, started)

    def _decide(
        self, measured: list[Measured], config: BenchConfig, settings: gate.GateSettings
    ) -> Decision:
        env = measured[0].environment
        measurement = _measurement(config, measured)
        path = self._state.store.path(env.machine, self._id.module)
        entry = self._state.store.entry(env.machine, self._id.module, self._id.test, config.key())
        return gate.decide(measurement, env, entry, settings, explain.display_path(path))

    def _result(
        self, config: BenchConfig, measured: list[Measured], decision: Decision, started: float
    ) -> BenchmarkResult:
        env = measured[0].environment
        self._state.machine = env.machine
        return BenchmarkResult(
            test_id=self._id.nodeid,
            key=config.key(),
            config=config,
            decision=decision,
            environment=env,
            measurement=_measurement(config, measured),
            duration_s=time.perf_counter() - started,
        )

    def _fail_error(self, config: BenchConfig, message: str, started: float) -> NoReturn:
        __tracebackhide__ = True
        result = BenchmarkResult(
            test_id=self._id.nodeid,
            key=config.key(),
            config=config,
            decision=Decision(verdict=Verdict.ERROR, failed=True),
            duration_s=time.perf_counter() - started,
            error=message,
        )
        self._state.results.append(result)
        pytest.fail(f"cnnperf: {message}", pytrace=False)

    def _queue_save(self, config: BenchConfig, measured: list[Measured]) -> None:
        """Keep the entry for writing at the end of the session; check now that its file can
        be written back (a corrupt one fails this benchmark, and is left alone)."""
        env = measured[0].environment
        m = _measurement(config, measured)
        phases = {name: spread.median for name in m.phase_names if (spread := m.phase(name))}
        entry = BaselineEntry(
            recorded=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            config=config,
            environment=env,
            items_per_step=m.items_per_step,
            step_time_s=m.step_times,
            calibration_s=m.calibrations,
            peak_allocated_bytes=tuple(s.memory.allocated_bytes for s in m.samples if s.memory),
            peak_reserved_bytes=m.peak_reserved_bytes,
            memory_source=m.memory_source,
            phases_s=phases,
            cold_step_s=m.cold_step_s,
            in_process=m.in_process,
        )
        self._state.store.load(self._state.store.path(env.machine, self._id.module), env.machine)
        pending = self._state.pending[(env.machine, self._id.module)]
        pending.setdefault(self._id.test, {})[config.key()] = entry

    # ---- inside a sample process ----

    def _serve_job(self, target: Target) -> BenchmarkResult:
        job = self._state.job
        assert job is not None
        if target.index < job.index:
            result = job.replay[target.index]
            self._results.append(result)
            return result
        if target.key != job.key:
            report = ChildReport(
                error=f"the test asked for {target.key!r} where the pytest process measured "
                f"{job.key!r}; a benchmark test must make the same calls in every run"
            )
        else:
            from . import distributed

            try:
                if job.world_size > 1:
                    report = distributed.run_rank(job, target, self.device)
                else:
                    workload = target.build(self.device, 1)
                    measured = target.measure(
                        workload, in_process=False, timing=target.timing, memory=job.memory
                    )
                    report = ChildReport(measured=measured)
            except Exception as exc:
                report = ChildReport(error=explain.describe_error(exc), failed_at=time.time())
        write_report(job, report)
        os._exit(0 if report.error is None else 1)


def _measurement(config: BenchConfig, measured: list[Measured]) -> Measurement:
    return Measurement(config.batch_size, tuple(m.sample for m in measured), config.unit)
