"""What a benchmark call asks for, checked: the runner's arguments turned into a description.

A bad argument is an :class:`ArgumentProblem` that names the value and the accepted forms; good
ones make the spec that ``measuring.workload`` (``measuring.loader`` for a loop) builds on a
device, and the :class:`~pytest_cnnperf.model.BenchConfig` that keys the baseline. No torch here.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable, Iterable
from typing import Any

from .measuring.batches import Unpacker, is_dataloader, loader_name, said_batch_size
from .measuring.compiled import CompileRequest
from .measuring.loader import LoopSpec
from .measuring.workload import OPTIMIZERS, InferenceSpec, TrainSpec
from .model import BenchConfig, CompileSetting, OptionValue
from .model.config import LoaderSetting
from .parsers import COMPILE_MODES, parse_amp

#: the ``torch.compile`` arguments ``compile={...}`` takes
COMPILE_ARGUMENTS = ("backend", "mode", "fullgraph", "dynamic", "options")
COMPILE_FORMS = (
    f"use True, a mode ({', '.join(COMPILE_MODES)}) or a dict of torch.compile arguments "
    f"({', '.join(COMPILE_ARGUMENTS)}), e.g. compile={{'mode': 'max-autotune'}}"
)


class ArgumentProblem(ValueError):
    """A benchmark call's argument that cannot be measured; the message says why."""


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


def _compile_mode(value: object, given: str) -> str | None:
    if isinstance(value, str) and value.strip().lower() in COMPILE_MODES:
        mode = value.strip().lower()
        return None if mode == "default" else mode
    raise ArgumentProblem(
        f"{given} is not a torch.compile mode; use one of {', '.join(COMPILE_MODES)}"
    )


def _compile_options(value: object) -> tuple[tuple[str, OptionValue], ...]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ArgumentProblem(
            f"compile={{'options': {value!r}}}: options is a dict of inductor option names "
            "and values, e.g. {'max_autotune': True} (see torch._inductor.list_options())"
        )
    for name, option in value.items():
        if not isinstance(option, (bool, int, float, str)):
            raise ArgumentProblem(
                f"compile={{'options': {{{name!r}: {option!r}}}}}: an option's value must be a "
                "bool, number or string (benchmarks record it in their baseline)"
            )
    return tuple(sorted(value.items()))


def compile_request(value: object) -> CompileRequest | None:
    """``compile=``: ``None``/``False`` (eager), ``True`` or a mode name, or a dict of
    ``torch.compile`` arguments."""
    if value is None or value is False:
        return None
    if value is True:
        return CompileRequest(CompileSetting())
    if isinstance(value, str):
        if value.strip().lower() not in COMPILE_MODES:
            raise ArgumentProblem(f"compile={value!r} is not a compile mode; {COMPILE_FORMS}")
        return CompileRequest(CompileSetting(mode=_compile_mode(value, f"compile={value!r}")))
    if not isinstance(value, dict):
        raise ArgumentProblem(f"compile={value!r} is not a compile setting; {COMPILE_FORMS}")
    unknown = sorted(str(k) for k in value if k not in COMPILE_ARGUMENTS)
    if unknown:
        raise ArgumentProblem(
            f"compile={value!r}: {', '.join(unknown)} is not an argument it takes; use "
            f"{', '.join(COMPILE_ARGUMENTS)} (the plugin sets the rest)"
        )
    if value.get("mode") is not None and value.get("options") is not None:
        raise ArgumentProblem(
            f"compile={value!r}: torch.compile takes a mode or options, not both; put the "
            "mode's options among yours (torch._inductor.list_mode_options(mode))"
        )
    backend = value.get("backend", "inductor")
    if callable(backend):
        backend_name = getattr(backend, "__name__", type(backend).__name__)
    elif isinstance(backend, str) and backend.strip():
        backend_name = backend.strip()
    else:
        raise ArgumentProblem(
            f"compile={{'backend': {backend!r}}}: a backend is a name such as 'inductor' or "
            "'aot_eager' (torch.compiler.list_backends()) or a callable"
        )
    flags = {}
    for name in ("fullgraph", "dynamic"):
        flag = value.get(name, False)
        if not (isinstance(flag, bool) or (name == "dynamic" and flag is None)):
            accepted = "True or False" + (" or None" if name == "dynamic" else "")
            raise ArgumentProblem(f"compile={{{name!r}: {flag!r}}}: use {accepted}")
        flags[name] = flag
    mode = value.get("mode")
    setting = CompileSetting(
        backend=backend_name,
        mode=None if mode is None else _compile_mode(mode, f"compile={{'mode': {mode!r}}}"),
        fullgraph=bool(flags["fullgraph"]),
        dynamic=flags["dynamic"],
        options=_compile_options(value["options"]) if value.get("options") is not None else (),
    )
    return CompileRequest(setting, backend=backend if callable(backend) else backend_name)


def cuda_graphs(
    value: object, device_type: str, compiled: CompileRequest | None, amp: str | None
) -> bool:
    """``cuda_graphs=True``: a whole step captured and replayed as a CUDA graph, on CUDA only."""
    if value is None or value is False:
        return False
    if value is not True:
        raise ArgumentProblem(f"cuda_graphs={value!r}: use True or False")
    if device_type != "cuda":
        raise ArgumentProblem(
            f"cuda_graphs=True captures the step as a CUDA graph, which needs a CUDA device, "
            f"and this run measures on the {device_type.upper()}; leave cuda_graphs out on the "
            "CPU, or run with --cnnperf-device=cuda"
        )
    if compiled is not None:
        raise ArgumentProblem(
            "cuda_graphs=True and compile= both ask for CUDA graphs in their own way: use "
            "compile='reduce-overhead' for the compiler's CUDA graphs, or cuda_graphs=True "
            "alone for a capture of the eager step"
        )
    if amp == "fp16":
        raise ArgumentProblem(
            "cuda_graphs=True with amp='fp16': the gradient scaler syncs with the CPU, which a "
            "CUDA graph capture forbids; use amp='bf16', which needs no scaler"
        )
    return True


def _name(value: str | Callable[..., Any] | None) -> str | None:
    """How a benchmark's key names its optimizer or loss: a name lowercased, or a callable's."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.lower()
    return getattr(value, "__name__", type(value).__name__)


def image_config(
    spec: InferenceSpec, model: str, cudnn_mode: str | None, label: str | None
) -> BenchConfig:
    """The identity of a ``train_step`` or ``inference`` benchmark; a train step's batch size
    counts every rank's images."""
    config = BenchConfig(
        kind="inference",
        model=model,
        batch_size=spec.batch_size,
        image_size=spec.image_size,
        amp=spec.amp,
        channels_last=spec.channels_last,
        cudnn_mode=cudnn_mode,
        label=label,
        compile=spec.compile.setting if spec.compile else None,
        cuda_graphs=spec.cuda_graphs,
    )
    if not isinstance(spec, TrainSpec):
        return config
    return dataclasses.replace(
        config,
        kind="train_step",
        batch_size=spec.batch_size * spec.world_size,
        optimizer=_name(spec.optimizer),
        loss=_name(spec.loss),
        world_size=spec.world_size,
    )


def loader_setting(loader: Any) -> LoaderSetting:
    """What ``train_loop`` reads, as its key names it: a DataLoader's dataset class, workers,
    pin_memory, persistent workers and prefetch; another iterable's class. Nothing is read."""
    iterable = isinstance(loader, Iterable) and not isinstance(loader, (str, bytes))
    if not iterable:
        raise ArgumentProblem(
            f"loader={reprlib.repr(loader)} is not iterable; train_loop reads a "
            "torch.utils.data.DataLoader or any iterable of (images, targets) batches; pass "
            "the DataLoader itself"
        )
    if not is_dataloader(loader):
        return LoaderSetting(dataset=type(loader).__name__)
    workers = int(getattr(loader, "num_workers", 0) or 0)
    prefetch = getattr(loader, "prefetch_factor", None)
    return LoaderSetting(
        dataset=type(loader.dataset).__name__,
        workers=workers,
        pin_memory=bool(getattr(loader, "pin_memory", False)),
        persistent_workers=bool(getattr(loader, "persistent_workers", False)),
        prefetch_factor=prefetch if workers and isinstance(prefetch, int) else None,
    )


def loop_batch_size(loader: object, given: object, unpack: Unpacker | None = None) -> int:
    """The images per batch of a loop: what the loader says (a DataLoader's ``batch_size``,
    a list's first batch's through ``unpack``), else ``batch_size=``, which must agree."""
    said = said_batch_size(loader, unpack)
    if given is None:
        if said is None:
            raise ArgumentProblem(
                f"train_loop cannot tell how many images a batch of {loader_name(loader)} "
                "holds without reading it (only a DataLoader or a list of batches says); pass "
                "batch_size=N, the images each batch it yields holds"
            )
        return said
    size = batch_size(given)
    if said is not None and said != size:
        raise ArgumentProblem(
            f"batch_size={given!r}, but {loader_name(loader)} yields batches of {said} images; "
            "leave batch_size out: train_loop reads it from the loader"
        )
    return size


def steps(value: object) -> int | None:
    """``steps=``: timed steps per sample, or ``None`` for as many as the timing policy asks."""
    if value is None or _positive_int(value):
        return value  # type: ignore[return-value]
    raise ArgumentProblem(
        f"steps={value!r} is not a number of steps; use a positive int (the timed steps of "
        "each sample), or leave it out for as many as the run's timing asks for"
    )


def loop_config(
    spec: LoopSpec, loader: LoaderSetting, model: str, cudnn_mode: str | None, label: str | None
) -> BenchConfig:
    """The identity of a ``train_loop`` benchmark: its train step's, with its loader's
    configuration in place of an image size."""
    config = image_config(spec, model, cudnn_mode, label)
    return dataclasses.replace(config, kind="train_loop", image_size=None, loader=loader)


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
