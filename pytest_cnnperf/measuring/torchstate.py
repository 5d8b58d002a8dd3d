"""Global torch state that a benchmark may touch, saved before it and restored after it.

cuDNN flags, TF32 switches, float32 matmul precision, deterministic-algorithm mode, thread count,
grad mode, the random number generators and the compiler cache folder (a compiled benchmark sets
``TORCHINDUCTOR_CACHE_DIR``) come back as they were, and the CUDA caching allocator gives back
what the benchmark left cached, even when the benchmark raised.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"


@dataclass(frozen=True)
class TorchState:
    cudnn: tuple[bool, bool, bool, bool]
    matmul_tf32: bool
    matmul_precision: str
    deterministic: tuple[bool, bool]
    threads: int
    grad_enabled: bool
    cpu_rng: Any
    cuda_rng: tuple[Any, ...] | None
    inductor_cache: str | None = None

    @classmethod
    def capture(cls) -> TorchState:
        import torch

        cudnn = torch.backends.cudnn
        return cls(
            cudnn=(cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32),
            matmul_tf32=torch.backends.cuda.matmul.allow_tf32,
            matmul_precision=torch.get_float32_matmul_precision(),
            deterministic=(
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
            ),
            threads=torch.get_num_threads(),
            grad_enabled=torch.is_grad_enabled(),
            cpu_rng=torch.get_rng_state(),
            # only read CUDA generators when CUDA is already up: reading them would initialise it
            cuda_rng=tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_initialized() else None,
            inductor_cache=os.environ.get(_INDUCTOR_CACHE),
        )

    def restore(self) -> None:
        import torch

        cudnn = torch.backends.cudnn
        cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = self.cudnn
        torch.backends.cuda.matmul.allow_tf32 = self.matmul_tf32
        torch.set_float32_matmul_precision(self.matmul_precision)
        torch.use_deterministic_algorithms(self.deterministic[0], warn_only=self.deterministic[1])
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.set_grad_enabled(self.grad_enabled)
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(list(self.cuda_rng))
        if self.inductor_cache is None:
            os.environ.pop(_INDUCTOR_CACHE, None)
        else:
            os.environ[_INDUCTOR_CACHE] = self.inductor_cache


@contextlib.contextmanager
def preserved() -> Iterator[TorchState]:
    """Restore the global torch state on exit, and release cached CUDA memory."""
    import torch

    state = TorchState.capture()
    try:
        yield state
    finally:
        state.restore()
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
