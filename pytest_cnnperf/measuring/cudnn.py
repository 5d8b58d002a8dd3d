"""The cuDNN modes a benchmark runs under, and setting them for one test: ``on`` (autotuner
off), ``benchmark`` (with the autotuner), ``deterministic`` (deterministic algorithms only),
``off`` (PyTorch's native kernels). Torch is imported only when a mode is applied."""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator


class CudnnMode(str, enum.Enum):
    ON = "on"
    OFF = "off"
    BENCHMARK = "benchmark"
    DETERMINISTIC = "deterministic"

    def __str__(self) -> str:
        return self.value

    @property
    def flags(self) -> tuple[bool, bool, bool]:
        """``(enabled, benchmark, deterministic)`` for ``torch.backends.cudnn``."""
        return {
            CudnnMode.ON: (True, False, False),
            CudnnMode.OFF: (False, False, False),
            CudnnMode.BENCHMARK: (True, True, False),
            CudnnMode.DETERMINISTIC: (True, False, True),
        }[self]


ACCEPTED_MODES = ", ".join(m.value for m in CudnnMode)


def parse_modes(value: object) -> tuple[CudnnMode, ...]:
    """Parse ``on,off,benchmark``; a ``ValueError`` names the bad mode and the accepted ones."""
    text = str(value)
    modes: list[CudnnMode] = []
    for part in text.split(","):
        name = part.strip().lower()
        try:
            mode = CudnnMode(name)
        except ValueError:
            raise ValueError(
                f"unknown cuDNN mode {part.strip()!r} in {text!r}; use one or more of "
                f"{ACCEPTED_MODES}, separated by commas (e.g. --cudnn=on,benchmark)"
            ) from None
        if mode not in modes:
            modes.append(mode)
    return tuple(modes)


def current_mode() -> CudnnMode:
    """The mode the global cuDNN flags are in now (deterministic wins over benchmark, as in
    cuDNN itself)."""
    import torch

    cudnn = torch.backends.cudnn
    if not cudnn.enabled:
        return CudnnMode.OFF
    if cudnn.deterministic:
        return CudnnMode.DETERMINISTIC
    return CudnnMode.BENCHMARK if cudnn.benchmark else CudnnMode.ON


@contextlib.contextmanager
def cudnn_mode_applied(mode: CudnnMode) -> Iterator[None]:
    """Set the cuDNN flags of ``mode`` and restore the previous ones afterwards."""
    import torch

    cudnn = torch.backends.cudnn
    saved = (cudnn.enabled, cudnn.benchmark, cudnn.deterministic)
    cudnn.enabled, cudnn.benchmark, cudnn.deterministic = mode.flags
    try:
        yield
    finally:
        cudnn.enabled, cudnn.benchmark, cudnn.deterministic = saved
