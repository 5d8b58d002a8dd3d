"""The cuDNN modes a benchmark runs under, and setting them for one test.

``on``: cuDNN enabled, autotuner off. ``benchmark``: enabled with the autotuner
(``torch.backends.cudnn.benchmark``). ``deterministic``: enabled, deterministic algorithms only.
``off``: cuDNN disabled, PyTorch's native kernels. Torch is imported only when a mode is applied.
"""

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

    @classmethod
    def from_flags(cls, enabled: bool, benchmark: bool, deterministic: bool) -> CudnnMode:
        """The mode that the current flags amount to (deterministic wins over benchmark, as
        in cuDNN itself)."""
        if not enabled:
            return cls.OFF
        if deterministic:
            return cls.DETERMINISTIC
        return cls.BENCHMARK if benchmark else cls.ON


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
    """The mode the global cuDNN flags are in now."""
    import torch

    cudnn = torch.backends.cudnn
    return CudnnMode.from_flags(
        bool(cudnn.enabled), bool(cudnn.benchmark), bool(cudnn.deterministic)
    )


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
