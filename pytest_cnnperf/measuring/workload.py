"""The work a benchmark times: a training step or a forward pass on synthetic data.

``build_train`` / ``build_inference`` turn a model and its spec (``pytest_cnnperf.benchmark``)
into the phases the timing loop runs, on the run's device, with AMP and channels_last as asked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..benchmark import OPTIMIZERS, InferenceSpec, TrainSpec
from . import flops
from .flops import Counts
from .timing import Phase


@dataclass
class Workload:
    """Phases to time plus what the memory pass needs to know."""

    phases: list[Phase]
    items_per_step: int
    #: bytes of the tensors that live through every step without being allocated by it:
    #: weights, buffers, optimizer state, the batch (gradients are the step's own)
    static_bytes: Callable[[], int] = field(default=lambda: 0)
    #: bring the workload to a step boundary where the step's own tensors are gone (gradients
    #: set to None), so that a memory pass can see everything a step allocates
    settle: Callable[[], None] = field(default=lambda: None)
    model: Any = None
    #: the precision the step computes in (``fp32``, ``bf16``, ``fp16``); ``None``: unknown
    precision: str | None = None
    #: the step's FLOPs counted on meta tensors (``measuring.flops``); ``None``: count a real
    #: step instead
    count_on_meta: Callable[[], Counts] | None = None


def make_optimizer(spec: str | Callable[..., Any], params: Any, lr: float) -> Any:
    import torch

    if callable(spec):
        return spec(params)
    name = spec.lower()
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr * 0.1)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr * 0.1)
    raise ValueError(
        f"unknown optimizer {spec!r}; use one of {', '.join(OPTIMIZERS)} or a callable that "
        "takes the model's parameters and returns an optimizer"
    )


def amp_dtype(amp: str | None) -> Any:
    import torch

    return {None: None, "fp16": torch.float16, "bf16": torch.bfloat16}[amp]


def classification_loss(output: Any, target: Any) -> Any:
    """Cross-entropy, with torchvision's auxiliary heads weighted as its reference scripts do
    (Inception-V3: 0.4, GoogLeNet: 0.3 each)."""
    import torch.nn.functional as F

    if hasattr(output, "aux_logits2"):  # GoogLeNetOutputs(logits, aux_logits2, aux_logits1)
        return (
            F.cross_entropy(output.logits, target)
            + 0.3 * F.cross_entropy(output.aux_logits2, target)
            + 0.3 * F.cross_entropy(output.aux_logits1, target)
        )
    if hasattr(output, "aux_logits"):  # InceptionOutputs(logits, aux_logits)
        loss = F.cross_entropy(output.logits, target)
        if output.aux_logits is not None:
            loss = loss + 0.4 * F.cross_entropy(output.aux_logits, target)
        return loss
    return F.cross_entropy(output, target)


def _main_logits(output: Any) -> Any:
    return output.logits if hasattr(output, "logits") else output


def synthetic_batch(
    batch_size: int, image_size: tuple[int, int], device: Any, channels_last: bool
) -> Any:
    import torch

    images = torch.randn(batch_size, 3, *image_size, device=device)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    return images


def _storage_bytes(tensors: Iterator[Any]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if t is not None and hasattr(t, "untyped_storage"):
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _place(model: Any, device: Any, channels_last: bool) -> Any:
    import torch

    if channels_last:
        return model.to(device=device, memory_format=torch.channels_last)
    return model.to(device)


def build_train(model: Any, spec: TrainSpec, device: Any) -> Workload:
    """Move ``model`` to ``device`` and return the forward+loss / backward / optimizer phases."""
    import torch

    model = _place(model, device, spec.channels_last)
    model.train()
    images = synthetic_batch(spec.batch_size, spec.image_size, device, spec.channels_last)
    num_classes = spec.num_classes
    if num_classes is None:
        with torch.no_grad():
            model.eval()
            num_classes = int(_main_logits(model(images[:1])).shape[-1])
            model.train()
    targets = torch.randint(0, num_classes, (spec.batch_size,), device=device)
    module = model
    if spec.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(
            model, device_ids=[device] if device.type == "cuda" else None
        )
    optimizer = make_optimizer(spec.optimizer, model.parameters(), spec.lr)
    loss_fn = spec.loss or classification_loss
    dtype = amp_dtype(spec.amp)
    scaler = torch.amp.GradScaler(device.type) if spec.amp == "fp16" else None
    state: dict[str, Any] = {}

    def autocast() -> contextlib.AbstractContextManager[Any]:
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=dtype)

    def forward() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            state["loss"] = loss_fn(model(images), targets)

    def backward() -> None:
        loss = state.pop("loss")
        (scaler.scale(loss) if scaler else loss).backward()

    def step() -> None:
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()

    def static_bytes() -> int:
        tensors = [*module.parameters(), *module.buffers(), images, targets]
        for value in optimizer.state.values():
            tensors += [v for v in value.values() if isinstance(v, torch.Tensor)]
        return _storage_bytes(iter(tensors))

    def settle() -> None:
        optimizer.zero_grad(set_to_none=True)

    def count_on_meta() -> Counts:
        return flops.count_train_on_meta(module, images, targets, loss_fn)

    return Workload(
        phases=[("forward", forward), ("backward", backward), ("optimizer", step)],
        items_per_step=spec.batch_size,
        static_bytes=static_bytes,
        settle=settle,
        model=model,
        precision=spec.amp or "fp32",
        # an optimizer of the user's own may multiply matrices: count a real step
        count_on_meta=None if callable(spec.optimizer) else count_on_meta,
    )


def build_inference(model: Any, spec: InferenceSpec, device: Any) -> Workload:
    """Move ``model`` to ``device`` in eval mode; one phase: a forward pass without autograd."""
    import torch

    model = _place(model, device, spec.channels_last)
    model.eval()
    images = synthetic_batch(spec.batch_size, spec.image_size, device, spec.channels_last)
    dtype = amp_dtype(spec.amp)

    def forward() -> None:
        with torch.inference_mode():
            if dtype is None:
                model(images)
            else:
                with torch.autocast(device_type=device.type, dtype=dtype):
                    model(images)

    def static_bytes() -> int:
        return _storage_bytes(iter([*model.parameters(), *model.buffers(), images]))

    return Workload(
        phases=[("forward", forward)],
        items_per_step=spec.batch_size,
        static_bytes=static_bytes,
        model=model,
        precision=spec.amp or "fp32",
        count_on_meta=lambda: flops.count_inference_on_meta(model, images),
    )


def build_custom(step_fn: Callable[[], Any], items_per_step: int) -> Workload:
    """A step of the user's own: one phase."""

    def step() -> None:
        step_fn()

    return Workload(phases=[("step", step)], items_per_step=items_per_step)
