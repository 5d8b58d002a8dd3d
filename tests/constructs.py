"""The constructs of the manual's table of host-device synchronisations (docs/structure.md,
"What counts as a sync"), each a step of its own on a device, with what it counts as there:
``tests/test_structure.py`` runs them on the CPU, ``tests/test_cuda.py`` on a GPU."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pytest_cnnperf.measuring import counting

ITEM = f"aten::_local_scalar_dense ({counting.SYNC_OPERATORS['aten::_local_scalar_dense']})"
NONZERO = "aten::nonzero (nonzero())"
PRINT = counting.HOST_READS["__repr__"]

Step = Callable[[], object]


@dataclass(frozen=True)
class Construct:
    """A row of the table: ``make(device)`` prepares the step (an optimizer's state included)
    and returns it; ``cpu`` and ``cuda``: the syncs per step it counts as on each, by label;
    ``debug_mode``: whether ``torch.cuda.set_sync_debug_mode`` sees its syncs (it watches
    the runtime's synchronising calls, not a copy into pageable memory, which blocks inside
    ``cudaMemcpyAsync``)."""

    id: str
    make: Callable[[torch.device], Step]
    cpu: dict[str, int] = field(default_factory=dict)
    cuda: dict[str, int] | None = None
    debug_mode: bool = True

    def expected(self, device_type: str) -> dict[str, int]:
        if device_type == "cuda" and self.cuda is not None:
            return self.cuda
        return self.cpu


def _data(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(8, 8, device=device)
    return x, x > 0


def _loss_item(device: torch.device) -> Step:
    model = nn.Linear(8, 2).to(device)
    x, _ = _data(device)
    return lambda: F.mse_loss(model(x), x[:, :2]).item()


def _mask_read(device: torch.device) -> Step:
    x, mask = _data(device)
    return lambda: x[mask]


def _mask_fill_by_index(device: torch.device) -> Step:
    x, mask = _data(device)

    def step() -> None:
        x[mask] = 0.0

    return step


def _mask_set_device_tensor(device: torch.device) -> Step:
    x, mask = _data(device)
    value = torch.zeros((), device=device)

    def step() -> None:
        x[mask] = value

    return step


def _nonzero(device: torch.device) -> Step:
    x, _ = _data(device)
    return lambda: x.nonzero()


def _masked_fill(device: torch.device) -> Step:
    x, mask = _data(device)
    return lambda: x.masked_fill_(mask, 0.0)


def _where_one(device: torch.device) -> Step:
    _, mask = _data(device)
    return lambda: torch.where(mask)


def _to_host_pinned(device: torch.device) -> Step:
    """Into pinned memory, without waiting: ``.to("cpu", non_blocking=True)`` pins its copy;
    a buffer is pinned only where a GPU is (pinning needs one)."""
    x, _ = _data(device)
    buffer = torch.empty(8, 8, pin_memory=device.type == "cuda")

    def step() -> None:
        x.to("cpu", non_blocking=True)
        buffer.copy_(x, non_blocking=True)

    return step


def _to_host_pageable(device: torch.device) -> Step:
    x, _ = _data(device)
    buffer = torch.empty(8, 8)
    return lambda: buffer.copy_(x, non_blocking=True)


def _cpu(device: torch.device) -> Step:
    x, _ = _data(device)
    return lambda: x.cpu()


def _tolist(device: torch.device) -> Step:
    x, _ = _data(device)
    return lambda: x.tolist()


def _print(device: torch.device) -> Step:
    x, _ = _data(device)
    return lambda: print(x, file=io.StringIO())


def _host_scalar(device: torch.device) -> Step:
    """A number kept in a tensor made on the host, as a CUDA run makes it too."""
    return lambda: (torch.tensor(0.5) * 2).item()


def _from_data(device: torch.device) -> Step:
    return lambda: torch.tensor([1.0, 2.0], device=device)


def _moved_to_device(device: torch.device) -> Step:
    return lambda: torch.arange(8).to(device)


def _trained(
    device: torch.device, optimizer: Callable[[Any], Any], *, scaler: bool = False, **clip: Any
) -> Step:
    """A train step of a small net with a learnable scalar, the optimizer's state made by a
    first step; with a gradient scaler, or with ``clip_grad_norm_(**clip)``."""
    model = nn.Linear(4, 2).to(device)
    temperature = nn.Parameter(torch.ones(1, device=device))
    params = [*model.parameters(), temperature]
    opt = optimizer(params)
    scaling = torch.amp.GradScaler(device.type) if scaler else None
    x = torch.randn(8, 4, device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = (model(x) / temperature).square().mean()
        if scaling is not None:
            scaling.scale(loss).backward()
            scaling.step(opt)
            scaling.update()
            return
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, 1.0, **clip)
        opt.step()

    step()
    return step


def _optimizer(name: str, **options: Any) -> Callable[[torch.device], Step]:
    kind = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[name]
    return lambda device: _trained(device, lambda p: kind(p, lr=0.01, **options))


def _scaler(device: torch.device) -> Step:
    return _trained(device, lambda p: torch.optim.SGD(p, lr=0.01), scaler=True)


def _clip(error: bool) -> Callable[[torch.device], Step]:
    sgd = lambda p: torch.optim.SGD(p, lr=0.01)  # noqa: E731
    return lambda device: _trained(device, sgd, error_if_nonfinite=error)


CONSTRUCTS = (
    Construct("item-of-the-loss", _loss_item, {ITEM: 1}),
    Construct("boolean-index-read", _mask_read, {"aten::index (boolean mask)": 1}),
    Construct("boolean-index-set-number", _mask_fill_by_index),
    Construct(
        "boolean-index-set-device-tensor",
        _mask_set_device_tensor,
        {"aten::index_put_ (boolean mask)": 1},
    ),
    Construct("nonzero", _nonzero, {NONZERO: 1}),
    Construct("masked_fill_", _masked_fill),
    Construct("where-one-argument", _where_one, {NONZERO: 1}),
    Construct("non_blocking-to-pinned", _to_host_pinned),
    Construct(
        "non_blocking-to-pageable",
        _to_host_pageable,
        {},
        {"aten::copy_ (device to host)": 1},
        debug_mode=False,
    ),
    Construct("cpu-copy", _cpu, {counting.TO_HOST: 1}),
    Construct("tolist", _tolist, {counting.HOST_READS["tolist"]: 1}),
    Construct("print", _print, {PRINT: 1}),
    Construct("item-of-a-host-scalar", _host_scalar),
    Construct("tensor-from-data-on-the-device", _from_data, {counting.FROM_DATA: 1}),
    Construct("to-the-device", _moved_to_device, {counting.TO_DEVICE: 1}),
    Construct("adam-for-loop", _optimizer("adam", foreach=False)),
    Construct("adam-foreach", _optimizer("adam", foreach=True)),
    Construct("adamw-for-loop", _optimizer("adamw", foreach=False)),
    Construct("adamw-foreach", _optimizer("adamw", foreach=True)),
    Construct("gradscaler", _scaler, {ITEM: 1}),
    Construct("clip_grad_norm_", _clip(False)),
    Construct("clip_grad_norm_-error_if_nonfinite", _clip(True), {ITEM: 1}),
)


class Runs(nn.Module):
    """A construct's step as a module, so that a count of several names each by its id."""

    def __init__(self, step: Step) -> None:
        super().__init__()
        self.step = step

    def forward(self) -> None:
        self.step()


def all_in_one(device: torch.device) -> nn.ModuleDict:
    """Every construct as a module named by its id (one count names each one's syncs)."""
    return nn.ModuleDict({c.id: Runs(c.make(device)) for c in CONSTRUCTS})


def syncs(structure: Any, where: str | None = None) -> dict[str, int]:
    """A structure's syncs per step by label (those of one caller, where given)."""
    return {
        c.name: c.per_step
        for c in structure.counts
        if c.kind == "sync" and (where is None or c.where == where)
    }
