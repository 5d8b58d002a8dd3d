"""Exact counts of what a step calls, taken on a few steady steps after the timed ones.

Every operator that reaches PyTorch's dispatcher below autograd is counted by a
``TorchDispatchMode`` (the level ``FlopCounterMode`` counts at: ``aten::convolution``, not the
``aten::conv2d`` that decomposes into it), and the kinds that cost a GPU most are named with the
module whose forward called them (else the phase: ``backward``, ``optimizer``):

- host-device synchronisations: the operators that must read a result on the host
  (``.item()``, ``nonzero``, boolean-mask indexing) and, on CUDA, copies to the host;
- dtype casts (``aten::_to_copy`` to another dtype) and memory-format conversions.

On CUDA the profiler's host events add the runtime's own synchronisations
(``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ...) and the kernel launches.
Compiled steps and CUDA-graph replays are not counted: their kernels bypass the dispatcher.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..model.structure import OperatorCount, Structure
from .timing import Clock
from .workload import Workload

#: steps counted; a count that differs between them is reported as varying
STEPS = 2

#: operators that wait for the device to read a value or a size on the host, with what calls
#: them in a user's code
SYNC_OPERATORS = {
    "aten::_local_scalar_dense": ".item(), float(), int() or bool() of a tensor",
    "aten::nonzero": "nonzero()",
    "aten::masked_select": "masked_select()",
    "aten::_unique2": "unique()",
    "aten::unique_dim": "unique(dim=)",
    "aten::unique_consecutive": "unique_consecutive()",
    "aten::repeat_interleave": "repeat_interleave() with a tensor of repeats",
    "aten::equal": "torch.equal()",
}
#: operators with an index that, given a boolean mask, find its nonzero entries first
MASK_INDEXING = frozenset({"aten::index", "aten::index_put_", "aten::index_put"})
#: the CUDA runtime's calls that block the host until the device is done
CUDA_SYNCS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
    }
)
CUDA_LAUNCHES = (
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cudaLaunchCooperativeKernel",
    "cudaGraphLaunch",
)
#: our own namespaces and the profiler's, which the step did not call
_NOT_COUNTED = ("profiler::", "cnnperf::")
_STEP = "cnnperf::counted-step"


class CountingFailed(Exception):
    """The step could not be counted; the message says why."""


def count_steps(workload: Workload, device: Any, clock: Clock) -> Structure | None:
    """Count :data:`STEPS` steps of ``workload``; ``None`` for a step the dispatcher does not see
    (compiled, or a CUDA graph replayed). ``CountingFailed`` for one that fails counted."""
    if not workload.countable:
        return None
    cuda = device.type == "cuda"
    counter = Counting(device.type)
    clock.sync()
    started = time.perf_counter()
    try:
        with module_names(workload.model, counter), _runtime(cuda) as events:
            for _ in range(STEPS):
                counter.steps.append(Counter())
                with _step_range(cuda), counter:
                    for name, run in workload.phases:
                        counter.phase = name
                        run()
                clock.sync()
        per_step = counter.steps
        if cuda:
            for i, runtime in enumerate(runtime_counts(events(), STEPS)):
                per_step[i].update(runtime)
    except Exception as exc:  # a step that reads values the mode cannot pass through
        raise CountingFailed(f"{type(exc).__name__}: {exc}".splitlines()[0]) from exc
    found = summarise(per_step, "dispatch+cuda" if cuda else "dispatch")
    return dataclasses.replace(found, seconds=time.perf_counter() - started)


Key = tuple[str, str, "str | None"]


def summarise(per_step: list[Counter[Key]], source: str) -> Structure:
    """One structure of several steps' counts: the first step's, with the names whose count
    differed between steps as varying."""
    first = per_step[0]
    keys = dict.fromkeys(k for step in per_step for k in step)
    varying = sorted({k[1] for k in keys if len({step.get(k, 0) for step in per_step}) > 1})
    counts = tuple(
        OperatorCount(name=name, per_step=first.get((kind, name, where), 0), kind=kind, where=where)
        for kind, name, where in sorted(keys, key=lambda k: (k[0], k[1], k[2] or ""))
    )
    return Structure(counts=counts, steps=len(per_step), varying=tuple(varying), source=source)


def _dispatch_mode() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


class Counting:
    """Counts each operator call of a step (see :func:`classify`); a ``TorchDispatchMode``
    while entered. ``where``: the innermost module running, else ``phase``."""

    def __init__(self, device_type: str) -> None:
        self.device_type = device_type
        self.steps: list[Counter[Key]] = []
        self.modules: list[str] = []
        self.phase = "step"
        self._mode: Any = None

    @property
    def where(self) -> str:
        return self.modules[-1] if self.modules else self.phase

    def record(self, func: Any, args: Any, kwargs: dict[str, Any]) -> None:
        name = func._schema.name
        if name.startswith(_NOT_COUNTED):
            return
        step = self.steps[-1]
        step[("op", name, None)] += 1
        found = classify(name, args, kwargs, self.device_type)
        if found is not None:
            kind, label = found
            step[(kind, label, self.where)] += 1

    def __enter__(self) -> Counting:
        counting = self

        class Mode(_dispatch_mode()):  # type: ignore[misc]
            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                counting.record(func, args, kwargs)
                return func(*args, **kwargs)

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


def classify(
    name: str, args: Any, kwargs: dict[str, Any], device_type: str
) -> tuple[str, str] | None:
    """The kind of an operator call worth naming with its caller (``sync``, ``cast``,
    ``layout``) and its label, or ``None`` for an ordinary call."""
    if name in SYNC_OPERATORS:
        return "sync", f"{name} ({SYNC_OPERATORS[name]})"
    if name in MASK_INDEXING and _has_mask(args):
        return "sync", f"{name} (boolean mask)"
    source: Any = args[0] if args else None
    if name == "aten::_to_copy" and _is_tensor(source):
        device = kwargs.get("device")
        if device is not None and source.device.type != "cpu" and device.type == "cpu":
            return "sync", "aten::_to_copy (device to host)"
        dtype = kwargs.get("dtype")
        if dtype is not None and dtype != source.dtype:
            return "cast", f"aten::_to_copy {_short(source.dtype)}->{_short(dtype)}"
    if name == "aten::copy_" and len(args) > 1 and _to_host(args[1], source):
        return "sync", "aten::copy_ (device to host)"
    if name in ("aten::_to_copy", "aten::clone"):
        fmt = kwargs.get("memory_format")
        if fmt is not None and str(fmt) != "torch.preserve_format":
            return "layout", f"{name} to {str(fmt).removeprefix('torch.')}"
    return None


def _to_host(source: Any, target: Any) -> bool:
    """Whether a copy goes from a device to the host."""
    return (
        _is_tensor(source)
        and _is_tensor(target)
        and source.device.type != "cpu"
        and target.device.type == "cpu"
    )


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "dtype") and hasattr(value, "device")


def _has_mask(args: Any) -> bool:
    import torch

    indices = args[1] if len(args) > 1 else ()
    return any(
        _is_tensor(i) and i.dtype in (torch.bool, torch.uint8)
        for i in (indices if isinstance(indices, list | tuple) else ())
    )


def _short(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


@contextlib.contextmanager
def module_names(model: Any, counting: Counting) -> Iterator[None]:
    """While counting, the names of the modules whose forward is running, innermost last (the
    model itself by its class's name)."""
    if model is None:
        yield
        return
    from .profile import forward_hooks

    def leave(module: Any) -> None:
        if counting.modules:
            counting.modules.pop()

    with forward_hooks(model, lambda name, _: counting.modules.append(name), leave, root=True):
        yield


@contextlib.contextmanager
def _step_range(cuda: bool) -> Iterator[None]:
    """A counted step's range among the profiler's host events (on CUDA only)."""
    if not cuda:
        yield
        return
    from torch.profiler import record_function

    with record_function(_STEP):
        yield


@contextlib.contextmanager
def _runtime(cuda: bool) -> Iterator[Any]:
    """On CUDA, the profiler's host events of the CUDA runtime over the counted steps."""
    if not cuda:
        yield lambda: []
        return
    from torch.profiler import ProfilerActivity, profile

    from .profile import quiet_native_stderr, raw_events

    with (
        quiet_native_stderr(),
        profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof,
    ):
        yield lambda: raw_events(prof)


def runtime_counts(events: Any, steps: int) -> list[Counter[Key]]:
    """Per counted step, the CUDA runtime's synchronising calls and kernel launches among the
    profiler's host events (``profile.raw_events``), by the step ranges they fall in (the host's:
    on CUDA each range has a copy on the device's timeline too)."""
    from torch.autograd import DeviceType  # type: ignore[attr-defined]

    ranges = sorted(
        (e.start_ns(), e.end_ns())
        for e in events
        if e.name() == _STEP and e.device_type() == DeviceType.CPU
    )[:steps]
    found: list[Counter[Key]] = [Counter() for _ in ranges]
    for event in events:
        name = event.name()
        if name in CUDA_SYNCS:
            key: Key = ("sync", name, None)
        elif name.startswith(CUDA_LAUNCHES):
            key = ("launch", "kernel launches", None)
        else:
            continue
        start = event.start_ns()
        for i, (low, high) in enumerate(ranges):
            if low <= start <= high:
                found[i][key] += 1
    return found
