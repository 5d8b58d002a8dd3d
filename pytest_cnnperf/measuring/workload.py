"""The work a benchmark times: a training step or a forward pass on synthetic data, as the
phases the timing loop runs on the run's device, with AMP and channels_last as asked (a train
step reads its :class:`Batch`, which ``train_loop`` refills from the user's loader)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..model.parts import Loading
from ..model.structure import StepNumbers
from . import flops, numbers
from .batches import described
from .compiled import Compiled, CompileRequest
from .flops import Counts
from .timing import Clock, Phase, TimedSteps, TimingPolicy, Window

OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclass(frozen=True)
class InferenceSpec:
    """A forward pass on synthetic images; a train step (:class:`TrainSpec`) is one too."""

    batch_size: int
    image_size: tuple[int, int]
    amp: str | None = None
    channels_last: bool = False
    compile: CompileRequest | None = None
    cuda_graphs: bool = False


@dataclass(frozen=True)
class TrainSpec(InferenceSpec):
    optimizer: str | Callable[..., Any] = "sgd"
    loss: Callable[..., Any] | None = None
    num_classes: int | None = None
    lr: float = 0.01
    #: data-parallel ranks; above 1 the model is wrapped in DistributedDataParallel, which needs
    #: the process group to be initialised already
    world_size: int = 1


@dataclass
class Batch:
    """The images and targets a train step reads, on the device: the synthetic batch, or
    (``train_loop``) the loader's latest, put here by the step's ``copy`` phase."""

    images: Any = None
    targets: Any = None


class Loop(Window, Protocol):
    """``train_loop``'s side of a sample (``measuring.loader``): where its timed blocks may run
    (:class:`~.timing.Window`), and what it measured of the loader beside the timed steps."""

    def figures(self, timed: TimedSteps, clock: Clock, policy: TimingPolicy) -> Loading:
        """The loader's figures of the sample whose loop steps ``timed`` holds; times the same
        step on a batch already on the device first."""

    def close(self) -> None:
        """The samples are over: the loader's workers end now."""


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
    #: bytes of the weights, of their gradients and of the optimizer's state (``None``: a step
    #: of the user's own, whose tensors are not known)
    state_bytes: Callable[[], tuple[int, int, int]] | None = None
    model: Any = None
    #: compiled benchmarks: the compiled functions and the watch over their steps
    compiled: Compiled | None = None
    #: the precision the step computes in (``fp32``, ``bf16``, ``fp16``); ``None``: unknown
    precision: str | None = None
    #: the step's FLOPs counted on meta tensors (``measuring.flops``); ``None``: count a real
    #: step instead
    count_on_meta: Callable[[], Counts] | None = None
    #: whether the dispatcher sees the step's operators (not in a compiled step or a CUDA
    #: graph's replay), so that they can be counted (``measuring.counting``)
    countable: bool = True
    #: keep the initial state now; the call it returns computes the first steps' numbers from
    #: it (``measuring.numbers``); ``None``: a step whose numbers are not read
    first_steps: Callable[[], Callable[[], StepNumbers]] | None = None
    #: ``train_loop``: the loader's side of the sample; ``None``: synthetic data
    loop: Loop | None = None


def make_optimizer(
    spec: str | Callable[..., Any], params: Any, lr: float, capturable: bool = False
) -> Any:
    """The optimizer a spec names; ``capturable``: one that a CUDA graph can capture (Adam
    and AdamW need to be told; SGD has nothing to tell)."""
    import torch

    if callable(spec):
        return spec(params)
    name = spec.lower()
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr * 0.1, capturable=capturable)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr * 0.1, capturable=capturable)
    raise ValueError(
        f"unknown optimizer {spec!r}; use one of {', '.join(OPTIMIZERS)} or a callable that "
        "takes the model's parameters and returns an optimizer"
    )


def amp_dtype(amp: str | None) -> Any:
    import torch

    return {None: None, "fp16": torch.float16, "bf16": torch.bfloat16}[amp]


def _autocast(device: Any, dtype: Any, cache: bool = True) -> AbstractContextManager[Any]:
    """Autocast to ``dtype`` on ``device`` (``None``: none); ``cache=False`` under CUDA graphs,
    which do not support autocast's cache of cast weights (``make_graphed_callables`` neither)."""
    import torch

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def classification_loss(output: Any, target: Any, *, model: Any = None) -> Any:
    """Cross-entropy, with torchvision's auxiliary heads weighted as its reference scripts do
    (Inception-V3: 0.4, GoogLeNet: 0.3 each); ``model`` names the model in the error about an
    output that is not a tensor of class scores."""
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
    return F.cross_entropy(class_scores(output, model), target)


def class_scores(output: Any, model: Any = None) -> Any:
    """A classifier's logits: the output, or its ``logits`` (torchvision's outputs with
    auxiliary heads); anything else is a ``TypeError`` that says what the model returned and
    how to measure such a model."""
    import torch

    logits = output.logits if hasattr(output, "logits") else output
    if isinstance(logits, torch.Tensor):
        return logits
    name = f" {type(model).__name__}" if model is not None else ""
    raise TypeError(
        f"the model{name} returned {described(output)}, not a tensor of class scores, which "
        "train_step's default loss needs; for a model that returns a dict or a tuple, pass "
        "loss=callable(output, target) and num_classes=N"
    )


def synthetic_data() -> Any:
    """The synthetic data's own generator, on the host: the same batch in every process,
    whatever the model's initialisation drew from torch's."""
    import torch

    return torch.Generator().manual_seed(numbers.SEED)


def synthetic_batch(
    batch_size: int, image_size: tuple[int, int], device: Any, channels_last: bool
) -> Any:
    import torch

    images = torch.randn(batch_size, 3, *image_size, generator=synthetic_data()).to(device)
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


def build_train(model: Any, spec: TrainSpec, device: Any, batch: Batch | None = None) -> Workload:
    """Move ``model`` to ``device`` and return the forward+loss / backward / optimizer phases,
    on a synthetic batch, or on ``batch`` as its reader fills it."""
    import torch

    model = _place(model, device, spec.channels_last)
    model.train()
    if batch is None:
        images = synthetic_batch(spec.batch_size, spec.image_size, device, spec.channels_last)
        num_classes = spec.num_classes
        if num_classes is None:
            with torch.no_grad():
                model.eval()
                num_classes = int(class_scores(model(images[:1]), model).shape[-1])
                model.train()
        targets = torch.randint(0, num_classes, (spec.batch_size,), generator=synthetic_data())
        batch = Batch(images, targets.to(device))
    module = model
    if spec.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(
            model, device_ids=[device] if device.type == "cuda" else None
        )
    optimizer = make_optimizer(
        spec.optimizer, model.parameters(), spec.lr, capturable=spec.cuda_graphs
    )
    loss_fn = spec.loss or functools.partial(classification_loss, model=module)
    dtype = amp_dtype(spec.amp)
    scaler = torch.amp.GradScaler(device.type) if spec.amp == "fp16" else None
    state: dict[str, Any] = {}

    def loss_of(x: Any, y: Any) -> Any:
        return loss_fn(model(x), y)

    def optimizer_step() -> None:
        optimizer.step()

    def forward() -> None:
        optimizer.zero_grad(set_to_none=True)
        with _autocast(device, dtype):
            state["loss"] = compute_loss(batch.images, batch.targets)

    def backward() -> None:
        loss = state.pop("loss")
        (scaler.scale(loss) if scaler else loss).backward()

    def step() -> None:
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            step_optimizer()

    def static_bytes() -> int:
        tensors = [*module.parameters(), *module.buffers(), batch.images, batch.targets]
        for value in optimizer.state.values():
            tensors += [v for v in value.values() if isinstance(v, torch.Tensor)]
        return _storage_bytes(iter(tensors))

    def settle() -> None:
        optimizer.zero_grad(set_to_none=True)

    def state_bytes() -> tuple[int, int, int]:
        weights = _storage_bytes(module.parameters())
        grads = sum(p.nbytes for p in module.parameters() if p.requires_grad)
        state = _storage_bytes(
            v for value in optimizer.state.values() for v in value.values() if torch.is_tensor(v)
        )
        return weights, grads, state

    compute_loss: Callable[[Any, Any], Any] = loss_of
    step_optimizer: Callable[[], None] = optimizer_step
    phases: list[Phase] = [("forward", forward), ("backward", backward), ("optimizer", step)]
    compiled = None
    if spec.compile is not None:
        # one eager step first, so that the optimizer's state exists when its step compiles
        # (compiled on empty state, it compiles again at the second step, when the state appears)
        for _, run in phases:
            run()
        compiled = Compiled(spec.compile, device)
        compute_loss = compiled.function(loss_of)
        if scaler is None:  # the scaler's step checks for infs on the CPU: it stays eager
            step_optimizer = compiled.function(optimizer_step, optimizer=True)
        phases = compiled.phases(phases)
    elif spec.cuda_graphs:
        from .graphed import capture

        def whole_step() -> None:
            with _autocast(device, dtype, cache=False):
                loss = loss_of(batch.images, batch.targets)
            loss.backward()
            optimizer.step()

        phases = [("step", capture(whole_step, settle, device))]

    def count_on_meta() -> Counts:
        return flops.count_train_on_meta(module, batch.images, batch.targets, loss_fn)

    def first_steps() -> Callable[[], StepNumbers]:
        within = numbers.tolerance(device.type, spec.amp or "fp32")
        return numbers.keep(module, optimizer, scaler, phases, lambda: state["loss"], within)

    # the numbers of a plain step: a compiled one's optimizer keeps its state's tensors, a
    # graphed one replays them, and ranks would each keep theirs
    plain = spec.compile is None and not spec.cuda_graphs and spec.world_size == 1

    return Workload(
        phases=phases,
        items_per_step=spec.batch_size,
        static_bytes=static_bytes,
        # a captured step refills its gradients in place: they must stay
        settle=(lambda: None) if spec.cuda_graphs else settle,
        state_bytes=state_bytes,
        model=model,
        compiled=compiled,
        precision=spec.amp or "fp32",
        # an optimizer of the user's own may multiply matrices: count a real step
        count_on_meta=None if callable(spec.optimizer) else count_on_meta,
        countable=spec.compile is None and not spec.cuda_graphs,
        first_steps=first_steps if plain else None,
    )


def build_inference(model: Any, spec: InferenceSpec, device: Any) -> Workload:
    """Move ``model`` to ``device`` in eval mode; one phase: a forward pass without autograd."""
    import torch

    model = _place(model, device, spec.channels_last)
    model.eval()
    images = synthetic_batch(spec.batch_size, spec.image_size, device, spec.channels_last)
    dtype = amp_dtype(spec.amp)
    compiled = Compiled(spec.compile, device) if spec.compile is not None else None
    run_model = compiled.function(model) if compiled else model

    def forward() -> None:
        with torch.inference_mode(), _autocast(device, dtype, cache=not spec.cuda_graphs):
            run_model(images)

    def static_bytes() -> int:
        return _storage_bytes(iter([*model.parameters(), *model.buffers(), images]))

    def state_bytes() -> tuple[int, int, int]:
        return _storage_bytes(model.parameters()), 0, 0

    phases: list[Phase] = [("forward", forward)]
    if compiled:
        phases = compiled.phases(phases)
    elif spec.cuda_graphs:
        from .graphed import capture

        phases = [("forward", capture(forward, lambda: None, device))]
    return Workload(
        phases=phases,
        items_per_step=spec.batch_size,
        static_bytes=static_bytes,
        state_bytes=state_bytes,
        model=model,
        compiled=compiled,
        precision=spec.amp or "fp32",
        count_on_meta=lambda: flops.count_inference_on_meta(model, images),
        countable=compiled is None and not spec.cuda_graphs,
    )


def build_custom(step_fn: Callable[[], Any], items_per_step: int) -> Workload:
    """A step of the user's own: one phase."""
    return Workload(phases=[("step", step_fn)], items_per_step=items_per_step)
