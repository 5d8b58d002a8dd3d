"""Global torch state that a benchmark may touch, saved before it and restored after it, even
when it raised: cuDNN and precision flags, oneDNN, deterministic mode, default dtype and device,
threads, grad mode, the generators, the compiler cache folder; cached CUDA memory is given back.

The float32 precision switches have two APIs: up to torch 2.8 ``allow_tf32`` flags and
``set_float32_matmul_precision``; from 2.9 ``fp32_precision`` per backend and operator, whose
legacy getters raise once the two were mixed. Where the new flags exist they are what is saved
and restored, parents before children (a parent overwrites its children).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .compiled import CACHE_VARIABLE

#: torch >= 2.9's ``fp32_precision`` flags, by name, parents before children (``"cuda"`` is the
#: CUDA backend's own flag, which torch exposes as ``torch.backends.cudnn.fp32_precision``)
FP32_PRECISION: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("generic", lambda b: b),
    ("cuda", lambda b: b.cudnn),
    ("cuda.matmul", lambda b: b.cuda.matmul),
    ("cudnn.conv", lambda b: b.cudnn.conv),
    ("cudnn.rnn", lambda b: b.cudnn.rnn),
    ("mkldnn", lambda b: b.mkldnn),
    ("mkldnn.matmul", lambda b: b.mkldnn.matmul),
    ("mkldnn.conv", lambda b: b.mkldnn.conv),
    ("mkldnn.rnn", lambda b: b.mkldnn.rnn),
)


def has_fp32_precision(torch: Any) -> bool:
    """Whether this torch has the ``fp32_precision`` flags (2.9 and later)."""
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


def matmul_precision(torch: Any) -> str | None:
    """``torch.get_float32_matmul_precision()``, or ``None`` where it cannot be read (torch >= 2.9
    after the legacy and new APIs were mixed: the per-backend flags then say what is in force)."""
    try:
        return str(torch.get_float32_matmul_precision())
    except RuntimeError:
        return None


def capture_precision(torch: Any) -> dict[str, str | bool | None]:
    """The float32 precision switches as they are: the matmul precision, then the new
    ``fp32_precision`` flags where they exist, else the legacy TF32 flags."""
    state: dict[str, str | bool | None] = {"matmul_precision": matmul_precision(torch)}
    b = torch.backends
    if has_fp32_precision(torch):
        for name, owner in FP32_PRECISION:
            with contextlib.suppress(AttributeError, RuntimeError):
                state[name] = str(owner(b).fp32_precision)
    else:
        state["cudnn.allow_tf32"] = bool(b.cudnn.allow_tf32)
        state["cuda.matmul.allow_tf32"] = bool(b.cuda.matmul.allow_tf32)
    return state


def restore_precision(torch: Any, state: dict[str, str | bool | None]) -> None:
    b = torch.backends
    if "cudnn.allow_tf32" in state:
        # before 2.9, ``matmul.allow_tf32 = x`` also sets the matmul precision: precision last
        b.cudnn.allow_tf32 = state["cudnn.allow_tf32"]
        b.cuda.matmul.allow_tf32 = state["cuda.matmul.allow_tf32"]
    if state["matmul_precision"] is not None:
        # from 2.9 on it sets the new flags: before them
        torch.set_float32_matmul_precision(state["matmul_precision"])
    for name, owner in FP32_PRECISION:
        if name in state:
            owner(b).fp32_precision = state[name]


def effective_tf32(torch: Any) -> tuple[bool, bool]:
    """Whether cuDNN convolutions and cuBLAS matmuls may use TF32, whichever API set it."""
    b = torch.backends
    if not has_fp32_precision(torch):
        return bool(b.cudnn.allow_tf32), bool(b.cuda.matmul.allow_tf32)

    def tf32(*chain: Any) -> bool:  # an operator's flag, its backend's, the generic one
        return next((str(v) for v in chain if str(v) != "none"), "none") == "tf32"

    generic, cuda = b.fp32_precision, b.cudnn.fp32_precision
    return (
        tf32(b.cudnn.conv.fp32_precision, cuda, generic),
        tf32(b.cuda.matmul.fp32_precision, cuda, generic),
    )


def _optional(read: Callable[[], Any]) -> Any:
    """A switch that older torch versions lack: ``None`` there."""
    try:
        return read()
    except AttributeError:
        return None


@dataclass(frozen=True)
class TorchState:
    #: cuDNN enabled, benchmark (autotuner), deterministic
    cudnn: tuple[bool, bool, bool]
    #: see ``capture_precision``
    precision: dict[str, str | bool | None]
    #: cuBLAS's fp16 and bf16 reduced-precision reductions
    reduced_precision: tuple[bool | None, bool | None]
    mkldnn_enabled: bool
    deterministic: tuple[bool, bool]
    default_dtype: Any
    default_device: Any
    threads: int
    grad_enabled: bool
    cpu_rng: Any
    cuda_rng: tuple[Any, ...] | None
    inductor_cache: str | None = None

    @classmethod
    def capture(cls) -> TorchState:
        import torch

        cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
        return cls(
            cudnn=(cudnn.enabled, cudnn.benchmark, cudnn.deterministic),
            precision=capture_precision(torch),
            reduced_precision=(
                _optional(lambda: bool(matmul.allow_fp16_reduced_precision_reduction)),
                _optional(lambda: bool(matmul.allow_bf16_reduced_precision_reduction)),
            ),
            mkldnn_enabled=bool(torch.backends.mkldnn.enabled),
            deterministic=(
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
            ),
            default_dtype=torch.get_default_dtype(),
            default_device=_optional(torch.get_default_device),
            threads=torch.get_num_threads(),
            grad_enabled=torch.is_grad_enabled(),
            cpu_rng=torch.get_rng_state(),
            # only read CUDA generators when CUDA is already up: reading them would initialise it
            cuda_rng=tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_initialized() else None,
            inductor_cache=os.environ.get(CACHE_VARIABLE),
        )

    def restore(self) -> None:
        import torch

        cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
        cudnn.enabled, cudnn.benchmark, cudnn.deterministic = self.cudnn
        restore_precision(torch, self.precision)
        fp16, bf16 = self.reduced_precision
        if fp16 is not None:
            matmul.allow_fp16_reduced_precision_reduction = fp16
        if bf16 is not None:
            matmul.allow_bf16_reduced_precision_reduction = bf16
        torch.backends.mkldnn.enabled = self.mkldnn_enabled  # type: ignore[assignment]
        torch.use_deterministic_algorithms(self.deterministic[0], warn_only=self.deterministic[1])
        torch.set_default_dtype(self.default_dtype)
        if self.default_device is not None and _optional(torch.get_default_device) != (
            self.default_device
        ):
            torch.set_default_device(self.default_device)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.set_grad_enabled(self.grad_enabled)
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(list(self.cuda_rng))
        if self.inductor_cache is None:
            os.environ.pop(CACHE_VARIABLE, None)
        else:
            os.environ[CACHE_VARIABLE] = self.inductor_cache


def release_cuda_memory(torch: Any, device: Any) -> None:
    """Give back what the caching allocator holds for nothing, cuBLAS's workspaces too (which
    ``empty_cache`` keeps; cleared as PyTorch's leak checker does), once ``device``'s work is
    done; synchronises ``device``, never the current one (a context on GPU 0 for nothing)."""

    if not torch.cuda.is_initialized():
        return
    if device is not None and getattr(device, "type", None) == "cuda":
        torch.cuda.synchronize(device)
    else:
        torch.cuda.synchronize()
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    torch.cuda.empty_cache()


@contextlib.contextmanager
def preserved(device: Any = None) -> Iterator[TorchState]:
    """Restore the global torch state on exit, and release cached CUDA memory of ``device``.
    A CUDA ``device`` is the current device meanwhile (the benchmark's own CUDA calls without a
    device, and its streams, then belong to the measured GPU), and the one before it afterwards."""
    import torch

    state = TorchState.capture()
    current = (
        torch.cuda.device(device)
        if getattr(device, "type", None) == "cuda"
        else contextlib.nullcontext()
    )
    try:
        with current:
            yield state
    finally:
        state.restore()
        gc.collect()
        release_cuda_memory(torch, device)
