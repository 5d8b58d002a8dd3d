"""What a benchmark call asks for, checked: the runner's arguments turned into a description.

``train_step``, ``inference`` and ``measure`` take keyword arguments from the user's test. Here
they are checked (a bad one is an :class:`ArgumentProblem` whose message names the value and the
accepted forms) and turned into a spec of the work, which ``measuring.workload`` builds on a
device, and into the :class:`~pytest_cnnperf.results.BenchConfig` that identifies the benchmark in
its baseline. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .results import BenchConfig
from .settings import parse_amp

OPTIMIZERS = ("sgd", "adam", "adamw")


class ArgumentProblem(ValueError):
    """A benchmark call's argument that cannot be measured; the message says why."""


@dataclass(frozen=True)
class TrainSpec:
    batch_size: int
    image_size: tuple[int, int]
    amp: str | None = None
    channels_last: bool = False
    optimizer: str | Callable[..., Any] = "sgd"
    loss: Callable[..., Any] | None = None
    num_classes: int | None = None
    lr: float = 0.01
    #: data-parallel ranks; above 1 the model is wrapped in DistributedDataParallel, which needs
    #: the process group to be initialised already
    world_size: int = 1


@dataclass(frozen=True)
class InferenceSpec:
    batch_size: int
    image_size: tuple[int, int]
    amp: str | None = None
    channels_last: bool = False


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def image_size(value: object, default: tuple[int, int]) -> tuple[int, int]:
    if value is None:
        return default
    if _positive_int(value):
        return (value, value)  # type: ignore[return-value]
    if isinstance(value, tuple) and len(value) == 2 and all(_positive_int(v) for v in value):
        return (value[0], value[1])
    raise ArgumentProblem(
        f"image_size={value!r} is not an image size; use a positive int (224) or (height, width)"
    )


def batch_size(value: object) -> int:
    if _positive_int(value):
        return value  # type: ignore[return-value]
    raise ArgumentProblem(
        f"batch_size={value!r} is not a batch size; use a positive int such as 32"
    )


def flag(name: str, value: object) -> bool:
    """A boolean argument: ``True`` or ``False`` only (``"no"`` is truthy, and would measure
    the opposite of what was meant)."""
    if isinstance(value, bool):
        return value
    raise ArgumentProblem(f"{name}={value!r} is not a boolean; use True or False")


def amp(value: object) -> str | None:
    if value is None or value is False:
        return None
    try:
        return parse_amp(str(value))
    except ValueError as exc:
        raise ArgumentProblem(f"amp={value!r}: {exc}") from None


def optimizer(value: str | Callable[..., Any]) -> str | Callable[..., Any]:
    if callable(value) or (isinstance(value, str) and value.lower() in OPTIMIZERS):
        return value
    raise ArgumentProblem(
        f"optimizer={value!r} is not an optimizer; use one of {', '.join(OPTIMIZERS)} or "
        "a callable that takes the model's parameters and returns an optimizer"
    )


def world_size(value: object) -> int:
    if _positive_int(value):
        return value  # type: ignore[return-value]
    raise ArgumentProblem(f"world_size={value!r} is not a number of ranks; use a positive int")


def optimizer_name(value: str | Callable[..., Any]) -> str:
    if isinstance(value, str):
        return value.lower()
    return getattr(value, "__name__", type(value).__name__)


def loss_name(loss: Callable[..., Any] | None) -> str | None:
    if loss is None:
        return None
    return getattr(loss, "__name__", type(loss).__name__)


def train_config(
    spec: TrainSpec, model: str, cudnn_mode: str | None, label: str | None
) -> BenchConfig:
    """The benchmark's identity; its batch size counts every rank's images."""
    return BenchConfig(
        kind="train_step",
        model=model,
        batch_size=spec.batch_size * spec.world_size,
        image_size=spec.image_size,
        amp=spec.amp,
        channels_last=spec.channels_last,
        optimizer=optimizer_name(spec.optimizer),
        loss=loss_name(spec.loss),
        cudnn_mode=cudnn_mode,
        world_size=spec.world_size,
        label=label,
    )


def inference_config(
    spec: InferenceSpec, model: str, cudnn_mode: str | None, label: str | None
) -> BenchConfig:
    return BenchConfig(
        kind="inference",
        model=model,
        batch_size=spec.batch_size,
        image_size=spec.image_size,
        amp=spec.amp,
        channels_last=spec.channels_last,
        cudnn_mode=cudnn_mode,
        label=label,
    )


def custom_config(
    step_fn: object, items_per_step: object, name: object, unit: str, cudnn_mode: str | None
) -> BenchConfig:
    """The identity of ``cnnperf.measure(step_fn, items_per_step=..., name=...)``."""
    if not callable(step_fn):
        raise ArgumentProblem(f"measure() needs a callable step function, got {step_fn!r}")
    if not isinstance(name, str) or not name.strip():
        raise ArgumentProblem(f"measure() needs a name for the baseline, got {name!r}")
    return BenchConfig(
        kind="measure",
        model=name,
        batch_size=batch_size(items_per_step),
        image_size=None,
        cudnn_mode=cudnn_mode,
        unit=unit,
    )
