"""Exact counts of what a step calls, taken on a few steady steps after the timed ones.

A ``TorchDispatchMode`` counts every operator below autograd (``aten::convolution``, as
``FlopCounterMode`` does), and names the costly kinds with the module whose forward called them
(else the phase): host-device synchronisations (``.item()``, ``nonzero``, boolean-mask indexing,
blocking copies; ``tolist()`` and printing through a ``TorchFunctionMode``), dtype casts and
memory-format conversions. On CUDA a tensor's device says what syncs, and the runtime's
synchronising calls count only where no counted call made them. On the CPU :class:`Placement`
predicts the CUDA run. Compiled steps and CUDA-graph replays bypass the dispatcher: not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
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
TO_HOST = "aten::_to_copy (device to host)"
TO_DEVICE = "aten::_to_copy (host to device)"
FROM_DATA = "torch.tensor(data, device=) (host to device)"
#: what reads a tensor on the host through Python: on the CPU it dispatches nothing, and
#: printing turns dispatch modes off; counted once, whatever it calls inside
HOST_READS = {
    "tolist": "tolist()",
    "__repr__": "print(), str() or repr() of a tensor",
    "__format__": "print(), str() or repr() of a tensor",
}
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
#: a counted sync's range among the profiler's host events: the runtime's syncs inside it are
#: that sync's own
_SYNCED = "cnnperf::counted-sync"


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
                with _range(_STEP, cuda), counter:
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


@functools.cache
def _torch() -> Any:
    import torch

    return torch


def _is_tensor(value: Any) -> bool:
    return isinstance(value, _torch().Tensor)


def _tensors(*values: Any) -> Iterator[Any]:
    """The tensors among an operator's arguments (lists of them too)."""
    for value in values:
        if _is_tensor(value):
            yield value
        elif isinstance(value, list | tuple):
            yield from _tensors(*value)


class Placement:
    """Where a step's tensors live in the run that matters: on CUDA, their own device; on the
    CPU, where a CUDA run keeps them: on the device unless made on the host (Python numbers, no
    device, ``"cpu"``), computed from such alone, or an optimizer's step counter (on the host
    unless ``capturable`` or ``fused``). Tensors made before the counted steps are on the device."""

    def __init__(self, device_type: str) -> None:
        self.predicting = device_type == "cpu"
        self._host: dict[int, Any] = {}

    def on_device(self, tensor: Any) -> bool:
        if tensor.device.type != "cpu":
            return True
        if not self.predicting:
            return False
        kept = self._host.get(id(tensor))
        return kept is None or kept() is not tensor

    def mark(self, tensors: Iterator[Any], *, host: bool) -> None:
        for tensor in tensors:
            if host:
                self._host[id(tensor)] = weakref.ref(tensor)
            else:
                self._host.pop(id(tensor), None)

    def pinned(self, tensor: Any) -> bool:
        """Whether host memory is pinned; on the CPU, where nothing can be pinned, a
        ``non_blocking`` copy is taken to go to memory a CUDA run pins."""
        return self.predicting or bool(tensor.is_pinned())

    def same(self, a: Any, b: Any) -> bool:
        if not self.predicting:
            return bool(a.device == b.device)
        return self.on_device(a) == self.on_device(b)

    def propagate(self, name: str, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        """An operator's outputs live where its inputs do: on the host when made from Python
        data or by a factory (the function mode marks one given a device), or when every
        tensor input is; else on the device. ``copy_`` keeps its target where it was."""
        if not self.predicting or name == "aten::copy_":
            return
        inputs = list(_tensors(args, tuple(kwargs.values())))
        made = name.startswith("aten::lift_fresh") or not inputs
        host = made or not any(self.on_device(t) for t in inputs)
        self.mark(_tensors(out), host=host)

    def lowers_to_masked_fill(self, args: Any, kwargs: dict[str, Any]) -> bool:
        """Whether ATen runs ``index_put_`` as ``masked_fill_``, which reads no mask on the host
        (``canDispatchToMaskedFill``): one boolean mask on the target's device, a one-element
        value on the host (a Python number arrives as one), and no accumulation."""
        target, indices, value = [*args, None, None, None][:3]
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if accumulate or not _is_tensor(value) or value.numel() != 1 or self.on_device(value):
            return False
        masks = [i for i in indices or () if i is not None]
        bool_types = (_torch().bool, _torch().uint8)
        return len(masks) == 1 and masks[0].dtype in bool_types and self.same(masks[0], target)


def classify(
    name: str, args: Any, kwargs: dict[str, Any], placement: Placement
) -> tuple[str, str] | None:
    """The kind of an operator call worth naming with its caller (``sync``, ``cast``,
    ``layout``) and its label, or ``None`` for an ordinary call."""
    inputs = list(_tensors(args))
    if name in SYNC_OPERATORS:
        if name == "aten::repeat_interleave" and kwargs.get("output_size") is not None:
            return None
        if any(placement.on_device(t) for t in inputs):
            return "sync", f"{name} ({SYNC_OPERATORS[name]})"
        return None
    if name in MASK_INDEXING and _has_mask(args):
        lowered = name != "aten::index" and placement.lowers_to_masked_fill(args, kwargs)
        if not lowered and any(placement.on_device(t) for t in inputs):
            return "sync", f"{name} (boolean mask)"
        return None
    source: Any = args[0] if args else None
    if name == "aten::_to_copy" and _is_tensor(source):
        device = kwargs.get("device")
        if device is not None and device.type != source.device.type:
            # non_blocking: the host's side is pinned (``_to_copy`` pins its output)
            if kwargs.get("non_blocking"):
                return None
            return "sync", TO_HOST if device.type == "cpu" else TO_DEVICE
        dtype = kwargs.get("dtype")
        if dtype is not None and dtype != source.dtype:
            return "cast", f"aten::_to_copy {_short(source.dtype)}->{_short(dtype)}"
    if name == "aten::copy_" and len(inputs) > 1:
        return _copy(args, kwargs, placement)
    if name in ("aten::_to_copy", "aten::clone"):
        fmt = kwargs.get("memory_format")
        if fmt is not None and str(fmt) != "torch.preserve_format":
            return "layout", f"{name} to {str(fmt).removeprefix('torch.')}"
    return None


def _copy(args: Any, kwargs: dict[str, Any], placement: Placement) -> tuple[str, str] | None:
    """``target.copy_(source)`` between host and device: a sync unless ``non_blocking`` (to the
    host, into pinned memory: into pageable memory the driver waits for the copy)."""
    target, source = args[0], args[1]
    non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
    if placement.on_device(source) and not placement.on_device(target):
        if non_blocking and placement.pinned(target):
            return None
        return "sync", "aten::copy_ (device to host)"
    if placement.on_device(target) and not placement.on_device(source) and not non_blocking:
        return "sync", "aten::copy_ (host to device)"
    return None


def _has_mask(args: Any) -> bool:
    torch = _torch()
    indices = args[1] if len(args) > 1 else ()
    return any(
        _is_tensor(i) and i.dtype in (torch.bool, torch.uint8)
        for i in (indices if isinstance(indices, list | tuple) else ())
    )


def _short(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


class Counting:
    """Counts each operator call of a step (see :func:`classify`) and the host reads that
    dispatch nothing; a ``TorchFunctionMode`` and a ``TorchDispatchMode`` while entered.
    ``where``: the innermost module running, else ``phase``."""

    def __init__(self, device_type: str) -> None:
        self.placement = Placement(device_type)
        self.steps: list[Counter[Key]] = []
        self.modules: list[str] = []
        self.phase = "step"
        self._ranges = device_type == "cuda"
        #: inside a counted host read: what it calls is part of that one sync
        self._inside = 0
        #: the counter's own calls: not counted
        self._quiet = False
        self._modes: list[Any] = []
        self._hook: Any = None

    @property
    def where(self) -> str:
        return self.modules[-1] if self.modules else self.phase

    def add(self, kind: str, label: str) -> None:
        self.steps[-1][(kind, label, self.where)] += 1

    def dispatched(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """One operator call: counted, classified, run, its outputs placed."""
        name = func._schema.name
        if self._quiet or name.startswith(_NOT_COUNTED):
            return func(*args, **kwargs)
        self.steps[-1][("op", name, None)] += 1
        found = classify(name, args, kwargs, self.placement)
        synced = found is not None and found[0] == "sync"
        if found is not None and not (synced and self._inside):
            self.add(*found)
        with _range(_SYNCED, synced and not self._inside and self._ranges):
            out = func(*args, **kwargs)
        self.placement.propagate(name, args, kwargs, out)
        return out

    def called(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """One call of torch's Python API: a host read counted as one sync, a tensor made from
        Python data on the device, and (on the CPU) where a copy or a factory puts its output."""
        if self._quiet or self._inside:
            return func(*args, **kwargs)
        if not args or not _is_tensor(args[0]):
            return self._made(func, args, kwargs)
        name = getattr(func, "__name__", "")
        read = HOST_READS.get(name)
        if read is not None and getattr(_torch().Tensor, name) is func:
            if name == "__format__" and args[0].dim() == 0:
                read = None  # a number's format reads it with .item(), counted as such
            if read is not None and self.placement.on_device(args[0]):
                self.add("sync", read)
                return self._counted(func, args, kwargs)
        if self.placement.predicting and func in (_torch().Tensor.cpu, _torch().Tensor.to):
            return self._moved(func, args, kwargs)
        return func(*args, **kwargs)

    def _counted(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        self._inside += 1
        try:
            with _range(_SYNCED, self._ranges):
                return func(*args, **kwargs)
        finally:
            self._inside -= 1

    def _made(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """A call without a tensor first: a factory given a device other than ``"cpu"`` makes
        its tensor on the device (from Python data: through a blocking copy). On the CPU a
        ``torch.device`` is taken to be the run's device."""
        torch = _torch()
        device = kwargs.get("device")
        if device is None:
            there = False
        elif self.placement.predicting:
            there = not (isinstance(device, str) and device.startswith("cpu"))
        else:
            there = torch.device(device).type != "cpu"
        if there and func in (torch.tensor, torch.as_tensor) and not any(_tensors(args)):
            self.add("sync", FROM_DATA)
            out = self._counted(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        if there:
            self.placement.mark(_tensors(out), host=False)
        return out

    def _moved(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """``.cpu()`` or ``.to(...)`` on the CPU: a copy between host and device in a CUDA run
        when the tensor would be on the other side; it dispatches nothing here."""
        source = args[0]
        target, non_blocking = _destination(func, args, kwargs, self.placement)
        if target is None or target == self.placement.on_device(source):
            return func(*args, **kwargs)
        if not non_blocking:
            self.add("sync", TO_DEVICE if target else TO_HOST)
        out = func(*args, **kwargs)
        if out is source:  # a CUDA run's copy is a tensor of its own
            self._quiet = True
            try:
                out = out.view(out.shape)
            finally:
                self._quiet = False
        self.placement.mark(_tensors(out), host=not target)
        return out

    def __enter__(self) -> Counting:
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        counting = self

        class Functions(TorchFunctionMode):
            def __torch_function__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                return counting.called(func, args, kwargs or {})

        class Operators(TorchDispatchMode):
            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                return counting.dispatched(func, args, kwargs or {})

        if self.placement.predicting:
            self._hook = _step_counters(self.placement)
        self._modes = [Functions(), Operators()]  # type: ignore[no-untyped-call]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        if self._hook is not None:
            self._hook.remove()
            self._hook = None


def _destination(
    func: Any, args: Any, kwargs: dict[str, Any], placement: Placement
) -> tuple[bool | None, bool]:
    """Where ``.cpu()`` or ``.to(...)`` sends a tensor in a CUDA run (``True``: the device,
    ``False``: the host, ``None``: nowhere new) and whether without waiting; a ``torch.device``
    (here the CPU) is taken to be the run's device."""
    torch = _torch()
    if func is torch.Tensor.cpu:
        return False, False
    positional = list(args[1:])
    non_blocking = bool(
        kwargs.get("non_blocking", next((a for a in positional if isinstance(a, bool)), False))
    )
    device = kwargs.get("device")
    if device is None:
        device = next((a for a in positional if not isinstance(a, bool | torch.dtype)), None)
    if device is None:
        return None, non_blocking
    if _is_tensor(device):
        return placement.on_device(device), non_blocking
    if isinstance(device, str):
        return not device.startswith("cpu"), non_blocking
    return True, non_blocking


def _step_counters(placement: Placement) -> Any:
    """While counting on the CPU, before each optimizer step: its step counters, which a CUDA
    run keeps on the host unless the group is ``capturable`` or ``fused``, placed there."""
    torch = _torch()
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        for group in optimizer.param_groups:
            if group.get("capturable") or group.get("fused"):
                continue
            for param in group["params"]:
                step = optimizer.state.get(param, {}).get("step")
                if isinstance(step, torch.Tensor):
                    placement.mark(iter([step]), host=True)

    return register_optimizer_step_pre_hook(hook)


@contextlib.contextmanager
def module_names(model: Any, counting: Counting) -> Iterator[None]:
    """While counting, the names of the modules whose forward is running, innermost last (the
    model itself by its class's name)."""
    from .profile import forward_hooks

    def leave(module: Any) -> None:
        if counting.modules:
            counting.modules.pop()

    with forward_hooks(model, lambda name, _: counting.modules.append(name), leave, root=True):
        yield


@contextlib.contextmanager
def _range(name: str, on: bool) -> Iterator[None]:
    """A named range among the profiler's host events, where ``on`` (CUDA only): a counted step,
    or a counted sync whose runtime syncs are not counted again."""
    if not on:
        yield
        return
    from torch.profiler import record_function

    with record_function(name):
        yield


@contextlib.contextmanager
def _runtime(cuda: bool) -> Iterator[Callable[[], list[Any]]]:
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


def _host_ranges(events: Any, name: str) -> list[tuple[int, int]]:
    """The host's ranges of a ``record_function`` name (on CUDA each has a copy on the device's
    timeline too)."""
    from torch.autograd import DeviceType  # type: ignore[attr-defined]

    return sorted(
        (e.start_ns(), e.end_ns())
        for e in events
        if e.name() == name and e.device_type() == DeviceType.CPU
    )


def runtime_counts(events: Any, steps: int) -> list[Counter[Key]]:
    """Per counted step, the CUDA runtime's synchronising calls and kernel launches among the
    profiler's host events (``profile.raw_events``), by the step ranges they fall in; a sync
    inside a counted sync's range is that one's, counted with its operator."""
    ranges = _host_ranges(events, _STEP)[:steps]
    counted = _host_ranges(events, _SYNCED)
    found: list[Counter[Key]] = [Counter() for _ in ranges]
    for event in events:
        name = event.name()
        start = event.start_ns()
        if name in CUDA_SYNCS:
            if any(low <= start <= high for low, high in counted):
                continue
            key: Key = ("sync", name, None)
        elif name.startswith(CUDA_LAUNCHES):
            key = ("launch", "kernel launches", None)
        else:
            continue
        for i, (low, high) in enumerate(ranges):
            if low <= start <= high:
                found[i][key] += 1
    return found
