"""The ``cnnperf`` fixture's object: describe a benchmark, measure it, gate it, record it.

The public calls check their arguments into a benchmark description (``benchmark``); ``_run``
has it followed through the gate (``follow``, ``gate.sequential``) as the test's
:class:`~gate.policy.Plan` says, records it, and fails the test with the evidence if it regressed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import pytest

from . import benchmark
from .benchmark import ArgumentProblem
from .follow import Sources, follow
from .gate import sequential
from .gate.counts import counted_reference
from .gate.decide import kernels_differ
from .gate.noise import benchmark_name
from .gate.policy import Plan, uncountable
from .gate.sequential import Gating, Reference, Saving
from .measuring.batches import as_unpacker, unpack_problem
from .measuring.loader import LoopSpec, first_look
from .measuring.workload import InferenceSpec, TrainSpec, Workload
from .model import (
    BenchConfig,
    Decision,
    NoBaseline,
    Result,
    Verdict,
)
from .reports import explain
from .revision.against import AgainstRun
from .revision.base import BaseProblem
from .sampling.manager import Sampler, Target
from .sampling.messages import BenchmarkError, Site
from .session import Session
from .store import noise
from .store.baseline import BaselineFileError, BaselineSaveError
from .store.locations import Location, display_path, readable_name

T = TypeVar("T")


def _profiled(attribution: str, config: BenchConfig, world_size: int) -> bool:
    """Whether a benchmark's operators are profiled: not with attribution off, nor for a
    data-parallel step (its ranks' profiles are not merged) or a CUDA graph's replay (it runs
    no operators to see)."""
    return attribution != "off" and world_size == 1 and not config.cuda_graphs


def _usage(message: str) -> NoReturn:
    __tracebackhide__ = True
    pytest.fail(f"cnnperf: {message}", pytrace=False)


def _usage_if(problem: str | None) -> None:
    __tracebackhide__ = True
    if problem is not None:
        _usage(problem)


def _checked(describe: Callable[[], T]) -> T:
    """``describe()``, or the test fails with the argument problem it found (outside the
    ``except`` block, so that no chained traceback follows the message)."""
    __tracebackhide__ = True
    try:
        return describe()
    except ArgumentProblem as exc:
        problem = str(exc)
    _usage(problem)


@dataclass(frozen=True)
class Sides:
    """The other processes a benchmark's samples may come from: the revision's gated against
    (``--cnnperf-against``), and the instruction counters of this checkout and of that revision."""

    against: AgainstRun | None
    counting: Callable[[], Sampler] | None
    counting_base: Callable[[], Sampler] | None
    #: keeps the counting processes still while a test's samples are timed
    held: Callable[[], AbstractContextManager[None]]


class CnnPerf:
    """Measures CNN training steps and gates them against their baselines.

    Use it through the ``cnnperf`` fixture::

        def test_resnet50(cnnperf, model_factory):
            cnnperf.train_step(model_factory("resnet50"), batch_size=64)
    """

    def __init__(
        self,
        session: Session,
        sampler: Sampler,
        location: Location,
        plan: Plan,
        cudnn_mode: str | None,
        sides: Sides,
    ) -> None:
        self._session = session
        self._sampler = sampler
        self._sides = sides
        self._location = location
        self._plan = plan
        self._cudnn_mode = cudnn_mode
        self._results: list[Result] = []
        self._keys: set[str] = set()

    @property
    def device(self) -> Any:
        import torch

        return torch.device(self._session.device)

    @property
    def results(self) -> tuple[Result, ...]:
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
        compile: bool | str | dict[str, Any] | None = None,
        cuda_graphs: bool = False,
    ) -> Result:
        """Time forward + loss, backward and the optimizer step of ``model`` on synthetic
        images, gate the throughput and peak memory against the baseline, return the result.

        ``image_size``: int or (height, width); default: the model's usual size when it came
        from ``model_factory``, else 224. ``amp``: ``"fp16"`` (autocast + gradient scaler),
        ``"bf16"`` or ``None``. ``optimizer``: ``"sgd"`` (momentum 0.9), ``"adam"``,
        ``"adamw"`` or ``callable(params) -> optimizer``. ``loss``: ``callable(output,
        target) -> loss``; default cross-entropy (with torchvision's auxiliary heads).
        ``world_size``: data-parallel ranks (DistributedDataParallel). ``name``: a label that
        tells apart several benchmarks of the same model in one test. ``compile``: ``True``,
        a mode name or a dict of ``torch.compile`` arguments: the model with its loss and the
        optimizer step are compiled; compile time, graph breaks and recompiles are measured
        and gated too. ``cuda_graphs``: capture the whole step as a CUDA graph (CUDA only).
        """
        __tracebackhide__ = True
        return self._images(
            model,
            lambda: TrainSpec(
                batch_size=benchmark.batch_size(batch_size),
                image_size=benchmark.image_size(image_size, self._default_size(model)),
                amp=benchmark.amp(amp),
                channels_last=benchmark.flag("channels_last", channels_last),
                optimizer=benchmark.optimizer(optimizer),
                loss=loss,
                num_classes=num_classes,
                world_size=benchmark.world_size(world_size),
            ),
            compile,
            cuda_graphs,
            name,
        )

    def train_loop(
        self,
        model: Any,
        loader: Any,
        *,
        steps: int | None = None,
        batch_size: int | None = None,
        amp: str | None = None,
        channels_last: bool = False,
        optimizer: str | Callable[..., Any] = "sgd",
        loss: Callable[..., Any] | None = None,
        name: str | None = None,
        unpack: tuple[Any, Any] | Callable[[Any], Any] | None = None,
    ) -> Result:
        """Train ``model`` on the batches of ``loader`` (a ``DataLoader`` or any iterable of
        ``(images, targets)``) and time the whole loop (waiting for a batch, copying it, the
        step); gated like ``train_step``, with the share of time spent waiting for input.

        ``steps``: timed steps per sample (default: as the run's timing asks). ``batch_size``:
        for an iterable that does not say. ``name``: names the benchmark instead of its model
        and loader, so that a change of the loader is gated against the same baseline.
        ``unpack``: how a batch that is not an ``(images, targets)`` pair is read: the keys of
        a mapping batch (``("image", "label")``) or ``callable(batch) -> (images, targets)``;
        timed with the wait, not named in the key. The rest as in ``train_step``.
        """
        __tracebackhide__ = True
        setting = _checked(lambda: benchmark.loader_setting(loader))
        _usage_if(unpack_problem(unpack))
        reader = as_unpacker(unpack)
        # an empty loader, or a list whose batches are no pairs, is named before its batch size
        _usage_if(first_look(loader, reader))
        spec = _checked(
            lambda: LoopSpec(
                batch_size=benchmark.loop_batch_size(loader, batch_size, reader),
                amp=benchmark.amp(amp),
                channels_last=benchmark.flag("channels_last", channels_last),
                optimizer=benchmark.optimizer(optimizer),
                loss=loss,
                steps=benchmark.steps(steps),
                unpack=reader,
            )
        )
        config = benchmark.loop_config(
            spec, setting, self._model_name(model), self._cudnn_mode, name
        )

        def build(device: Any, ranks: int) -> Workload:
            from .measuring.loader import build_loop

            return build_loop(model, loader, spec, device)

        return self._run(config, build)

    def inference(
        self,
        model: Any,
        *,
        batch_size: int,
        image_size: int | tuple[int, int] | None = None,
        amp: str | None = None,
        channels_last: bool = False,
        name: str | None = None,
        compile: bool | str | dict[str, Any] | None = None,
        cuda_graphs: bool = False,
    ) -> Result:
        """Time a forward pass of ``model`` in eval mode without autograd; gated like
        ``train_step`` (``compile`` compiles the model)."""
        __tracebackhide__ = True
        return self._images(
            model,
            lambda: InferenceSpec(
                batch_size=benchmark.batch_size(batch_size),
                image_size=benchmark.image_size(image_size, self._default_size(model)),
                amp=benchmark.amp(amp),
                channels_last=benchmark.flag("channels_last", channels_last),
            ),
            compile,
            cuda_graphs,
            name,
        )

    def measure(
        self,
        step_fn: Callable[[], Any],
        *,
        items_per_step: int,
        name: str,
        unit: str = "images",
    ) -> Result:
        """Time ``step_fn()``, one step of a training loop of your own on tensors already on
        ``cnnperf.device``, at ``items_per_step`` (in ``unit``); ``name`` keys its baseline."""
        __tracebackhide__ = True
        config = _checked(
            lambda: benchmark.custom_config(step_fn, items_per_step, name, unit, self._cudnn_mode)
        )

        def build(device: Any, ranks: int) -> Workload:
            from .measuring.workload import build_custom

            return build_custom(step_fn, config.batch_size)

        return self._run(config, build)

    # ---- helpers ----

    def _images(
        self,
        model: Any,
        describe: Callable[[], InferenceSpec],
        compile: object,
        cuda_graphs: object,
        name: str | None,
    ) -> Result:
        """Measure a ``train_step`` or ``inference``: the spec ``describe()`` checks, with its
        ``compile=`` and ``cuda_graphs=``."""
        __tracebackhide__ = True
        spec = _checked(lambda: self._compiling(describe(), compile, cuda_graphs))
        world_size = getattr(spec, "world_size", 1)
        self._check_ranks(world_size)
        config = benchmark.image_config(spec, self._model_name(model), self._cudnn_mode, name)
        ready = self._with_cache(spec, config)

        def build(device: Any, ranks: int) -> Workload:
            from .measuring.workload import build_inference, build_train

            if isinstance(ready, TrainSpec):
                return build_train(model, dataclasses.replace(ready, world_size=ranks), device)
            return build_inference(model, ready, device)

        return self._run(config, build, world_size)

    def _compiling(
        self, spec: InferenceSpec, compile: object, cuda_graphs: object
    ) -> InferenceSpec:
        """``spec`` with its ``compile=`` and ``cuda_graphs=`` checked."""
        request = benchmark.compile_request(compile)
        world = getattr(spec, "world_size", 1)
        if world != 1 and (request is not None or cuda_graphs):
            what = "compile=" if request is not None else "cuda_graphs=True"
            raise ArgumentProblem(
                f"{what} with world_size={world}: compiled and graphed data-parallel steps "
                "are not measured yet; measure them with world_size=1"
            )
        graphs = benchmark.cuda_graphs(cuda_graphs, self._session.device_type, request, spec.amp)
        return dataclasses.replace(spec, compile=request, cuda_graphs=graphs)

    def _with_cache(self, spec: InferenceSpec, config: BenchConfig) -> InferenceSpec:
        """A compiled spec with its compiler cache folder, shared by its sample processes."""
        request = spec.compile
        if request is None:
            return spec
        digest = hashlib.sha1(f"{self._location.nodeid}\0{config.key}".encode()).hexdigest()
        folder = os.path.join(self._session.compile_cache, digest[:16])
        return dataclasses.replace(spec, compile=dataclasses.replace(request, cache=folder))

    def _default_size(self, model: Any) -> tuple[int, int]:
        spec = self._session.registry.spec_of(model)
        return spec.image_size if spec else (224, 224)

    def _model_name(self, model: Any) -> str:
        spec = self._session.registry.spec_of(model)
        return spec.name if spec else type(model).__name__

    def _check_ranks(self, world_size: int) -> None:
        __tracebackhide__ = True
        if world_size == 1 or self._session.device_type != "cuda":
            return
        from .measuring.device import cuda_device_count

        gpus = cuda_device_count()
        if world_size > gpus:
            _usage(
                f"world_size={world_size} needs {world_size} GPUs, one a rank, but {gpus} "
                f"{'is' if gpus == 1 else 'are'} visible to this process (under pytest-xdist "
                "each worker sees one); use world_size <= the GPUs this process sees"
            )

    # ---- the measuring workflow ----

    def _run(
        self, config: BenchConfig, build: Callable[[Any, int], Workload], world_size: int = 1
    ) -> Result:
        __tracebackhide__ = True
        key = config.key
        site = Site(self._location.nodeid, self._location.path, len(self._results), key)
        known = self._sampler.replayed(site)
        if known is not None:
            self._results.append(known)
            return known
        if key in self._keys:
            _usage(
                f"this test already measured {key!r}; give each benchmark of a test its own "
                "configuration or a distinct name="
            )
        self._keys.add(key)
        plan = self._plan
        if plan.gate.metric == "instructions":
            _usage_if(uncountable(config, world_size, self._session.device))
        profiled = _profiled(plan.gate.attribution, config, world_size)
        target = Target(
            site=site,
            replay=tuple(self._results),
            build=build,
            plan=plan.sample,
            world_size=world_size,
            trace=self._trace_path(key) if profiled else None,
        )
        started = time.perf_counter()
        problem: str | None = None
        try:
            course, base = self._course(site, world_size, profiled)
            sides = self._sides
            sources = Sources(self._sampler, base, sides.counting, sides.counting_base, sides.held)
            result = follow(config, self._location.nodeid, target, course, sources)
            if plan.save and result.verdict is Verdict.SAVED:
                self._session.queue_baseline(self._location, result)
        except BenchmarkError as exc:
            if exc.problem == "leak":  # the comparison itself is void: stop the run
                pytest.exit(f"cnnperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
            problem = f"measuring {key} on {self._session.device} failed: {exc}"
        except (BaselineFileError, BaselineSaveError) as exc:
            problem = str(exc)
        except BaseProblem as exc:
            pytest.exit(f"cnnperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        duration = time.perf_counter() - started
        if problem is not None:  # failed outside the except block: no chained traceback
            self._fail_error(config, problem, duration)
        result = dataclasses.replace(result, duration_s=duration)
        self._session.record(result)
        self._results.append(result)
        if result.decision is not None and result.decision.failed:
            pytest.fail(explain.failure(result), pytrace=False)
        return result

    def _course(
        self, site: Site, world_size: int, profiled: bool
    ) -> tuple[Gating | Saving, Sampler | None]:
        """The benchmark's course through the gate, and the sampler of the revision it is
        gated against in this run (``None``: a stored baseline, or nothing)."""
        plan, against = self._plan, self._sides.against
        if against is None or plan.save:
            find = functools.partial(self._reference, key=site.key)
            return sequential.course(plan, find, profiled=profiled), None
        if world_size != 1:
            raise BenchmarkError(
                f"world_size={world_size} with {against.option}: data-parallel steps are gated "
                "against stored baselines only (each side's ranks would need the GPUs at once); "
                "gate it without --cnnperf-against, or measure it with world_size=1"
            )
        side = against.side()
        absent = side.absent(site.nodeid, site.path)
        course = sequential.pairing(plan, against.against, profiled=profiled, absent=absent)
        timeout = self._session.sample_timeout
        return course, None if absent else side.sampler(timeout)

    def _trace_path(self, key: str) -> str | None:
        """Where ``--cnnperf-trace`` writes the profiled steps of the benchmark ``key``."""
        folder = self._plan.trace
        if folder is None:
            return None
        location = self._location
        parts = (location.module.replace("/", "."), location.test, key)
        name = "--".join(readable_name(part) for part in parts)
        return str(folder / f"{name}.pt.trace.json")

    def _reference(self, result: Result, key: str) -> Reference:
        """The baseline of ``key`` on the kind of machine ``result`` ran on (counted instructions:
        any kind's counted alike), its path, the kinds that have one where this has none, and
        with the creep gate the history's recent runs."""
        environment = result.environment
        assert environment is not None
        machine, location = environment.machine, self._location
        store, module, test = self._session.store, location.module, location.test
        entry = store.entry(machine, module, test, key)
        counted = self._plan.gate.metric == "instructions"
        others: list[tuple[str, Result]] = []
        if entry is None or counted:
            others = [(m, e) for m, e in store.machines_with(module, test, key) if m != machine]
        found_on = machine
        if counted:
            counts = result.measured.instructions
            entry = counted_reference(environment, counts, entry, [e for _, e in others])
            if entry is not None and entry.environment is not None:
                found_on = entry.environment.machine
        absent = None
        if entry is None:
            absent = NoBaseline(
                machine,
                tuple(m for m, _ in others),
                tuple(kernels_differ(environment, e) for _, e in others),
            )
        reference = Reference(
            entry,
            display_path(store.path(found_on, module)),
            absent=absent,
            noise=noise.read(store.root, machine, benchmark_name(module, test, key)),
        )
        creep, history = self._plan.creep, self._session.history
        if creep is None or history is None:
            return reference
        recent = history.recent(location.nodeid, key, machine, creep.runs)
        if recent is None:
            self._session.warn(
                f"{history.problem}; the creep gate (--cnnperf-creep) was not applied"
            )
            return reference
        return dataclasses.replace(reference, recent=tuple(recent), creep_threshold=creep.threshold)

    def _fail_error(self, config: BenchConfig, message: str, duration: float) -> NoReturn:
        __tracebackhide__ = True
        result = Result(
            config=config,
            test_id=self._location.nodeid,
            decision=Decision(verdict=Verdict.ERROR, failed=True),
            duration_s=duration,
            error=message,
        )
        self._session.record(result)
        pytest.fail(f"cnnperf: {message}", pytrace=False)
