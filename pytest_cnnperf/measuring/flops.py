"""FLOPs of a step, counted once per benchmark with PyTorch's own counter.

``FlopCounterMode`` counts matrix products and convolutions, two FLOPs per multiply-add, and
nothing else, as torchvision's published counts (multiply-adds) and MFU figures do. A step is
counted on *meta* copies of the model's tensors (``torch.func.functional_call``: nothing computed,
the model left as it was); a model that reads tensor values, a step of the user's own and an
optimizer of the user's own are counted on one real step after the timed ones.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..model import StepFlops

#: per phase, per operator
Counts = tuple[dict[str, int], dict[str, int]]


def conv_backward_flops(
    grad_out_shape: Sequence[int],
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    groups: int,
    output_mask: Sequence[bool],
    out_shape: Sequence[Any],
    **kwargs: Any,
) -> int:
    """The FLOPs of ``aten.convolution_backward`` (the input's gradient and the weight's) as
    PyTorch's own formula counts them, except that a grouped convolution's weight gradient is
    divided by its groups, which that formula leaves out (docs/validation.md)."""
    from torch.utils.flop_counter import conv_flop_count

    def t(shape: Sequence[int]) -> list[int]:
        return [shape[1], shape[0], *shape[2:]]

    count = 0
    if output_mask[0]:
        count += int(
            conv_flop_count(list(grad_out_shape), list(w_shape), list(out_shape[0]), not transposed)
        )
    if output_mask[1]:
        weight = list(out_shape[1])
        if transposed:
            whole = conv_flop_count(t(grad_out_shape), t(x_shape), t(weight), transposed=False)
        else:
            whole = conv_flop_count(t(x_shape), t(grad_out_shape), t(weight), transposed=False)
        count += int(whole) // groups
    return count


@contextlib.contextmanager
def _counter() -> Iterator[Any]:
    """PyTorch's counter, its convolution backward corrected and its warnings held back."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    corrected = {torch.ops.aten.convolution_backward: conv_backward_flops}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with FlopCounterMode(display=False, custom_mapping=corrected) as mode:
            yield mode


def _operators(mode: Any) -> dict[str, int]:
    counts: dict[str, int] = mode.get_flop_counts().get("Global", {})
    return {str(op): int(value) for op, value in counts.items()}


def unwrap(model: Any) -> Any:
    """The module that does the work: inside ``torch.compile`` and ``DistributedDataParallel``."""
    from torch.nn.parallel import DistributedDataParallel

    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, DistributedDataParallel):
            model = model.module
        else:
            return model


def _on_meta(model: Any, images: Any) -> tuple[Any, dict[str, Any], Any]:
    """The module that does the work, meta copies of its parameters and buffers, and
    ``images`` on meta."""
    import torch

    module = unwrap(model)
    tensors = itertools.chain(module.named_parameters(), module.named_buffers())
    state = {
        name: torch.empty_like(t, device="meta").requires_grad_(t.requires_grad)
        for name, t in tensors
    }
    return module, state, torch.empty_like(images, device="meta")


def count_train_on_meta(
    model: Any, images: Any, targets: Any, loss_fn: Callable[..., Any]
) -> Counts:
    """Forward with the loss, and backward, of ``model`` on meta copies of everything; the
    optimizer's step counts 0 (no matrix products)."""
    import torch

    module, state, x = _on_meta(model, images)
    y = torch.empty_like(targets, device="meta")
    with _counter() as forward:
        loss = loss_fn(torch.func.functional_call(module, state, (x,)), y)
    with _counter() as backward:
        loss.backward()
    operators = Counter(_operators(forward))
    operators.update(_operators(backward))
    phases = {
        "forward": int(forward.get_total_flops()),
        "backward": int(backward.get_total_flops()),
        "optimizer": 0,
    }
    return phases, dict(operators)


def count_inference_on_meta(model: Any, images: Any) -> Counts:
    """A forward pass of ``model`` without autograd, on meta copies of everything."""
    import torch

    module, state, x = _on_meta(model, images)
    with torch.no_grad(), _counter() as forward:
        torch.func.functional_call(module, state, (x,))
    return {"forward": int(forward.get_total_flops())}, _operators(forward)


def count_phases(phases: Sequence[tuple[str, Callable[[], None]]]) -> Counts:
    """Run one real step, phase by phase, each under the counter."""
    per_phase: dict[str, int] = {}
    operators: Counter[str] = Counter()
    for name, run in phases:
        with _counter() as mode:
            run()
        per_phase[name] = int(mode.get_total_flops())
        operators.update(_operators(mode))
    return per_phase, dict(operators)


def count(
    phases: Sequence[tuple[str, Callable[[], None]]],
    items: int,
    on_meta: Callable[[], Counts] | None,
) -> StepFlops | None:
    """The FLOPs of a step of ``items`` items: on meta tensors where ``on_meta`` is given and
    the model runs on them, else on one real step of ``phases``. ``None`` when neither counts
    anything (a step without matrix products or convolutions, or one that replays a CUDA graph,
    which the counter cannot see into)."""
    if on_meta is not None:
        try:
            per_phase, operators = on_meta()
        except Exception:  # the model reads tensor values: count a real step
            pass
        else:
            return (
                StepFlops(per_phase, operators, items, "meta") if any(per_phase.values()) else None
            )
    try:
        per_phase, operators = count_phases(phases)
    except Exception:  # the step fails under the counter; the timed steps ran without it
        return None
    if not sum(per_phase.values()):
        return None
    return StepFlops(per_phase, operators, items, "step")
