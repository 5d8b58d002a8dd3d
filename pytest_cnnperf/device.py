"""Which device a run measures on, decided once at the start of the session.

CUDA is looked for through NVML (``torch.cuda.device_count`` before CUDA is initialised), which
does not initialise CUDA in the pytest process: the sample processes forked from it must be able
to initialise it themselves.
"""

from __future__ import annotations

import pytest

from .config import DeviceRequest
from .cudnn import CudnnMode


def cuda_device_count() -> int:
    import torch

    if not torch.backends.cuda.is_built():
        return 0
    return int(torch.cuda.device_count())


def resolve(request: DeviceRequest, cudnn_modes: tuple[CudnnMode, ...] | None) -> str:
    """``"cpu"`` or ``"cuda:N"``; a ``pytest.UsageError`` for a device that is not there, and
    for cuDNN modes on a run that is not on CUDA. Never a silent fall-back to the CPU."""
    import torch

    count = cuda_device_count()
    if request.kind == "cpu":
        device = "cpu"
    elif request.kind == "auto":
        device = "cuda:0" if count else "cpu"
    else:
        index = request.index or 0
        if count == 0:
            raise pytest.UsageError(
                f"--cnnperf-device={request} asks for a CUDA device, but none is usable here "
                f"(torch {torch.__version__} sees no CUDA device). Benchmark on the CPU with "
                "--cnnperf-device=cpu (or auto), or check the GPU and driver with nvidia-smi."
            )
        if index >= count:
            raise pytest.UsageError(
                f"--cnnperf-device={request} asks for CUDA device {index}, but only {count} "
                f"{'is' if count == 1 else 'are'} visible (cuda:0 to cuda:{count - 1}); "
                "check CUDA_VISIBLE_DEVICES or pick one of those."
            )
        device = f"cuda:{index}"
    if cudnn_modes and not device.startswith("cuda"):
        modes = ",".join(m.value for m in cudnn_modes)
        raise pytest.UsageError(
            f"--cudnn={modes} asks for cuDNN modes, but this run measures on the CPU "
            f"(--cnnperf-device={request}), where cuDNN is not used. Drop --cudnn (and the "
            "cnnperf_cudnn ini setting) for CPU runs, or run on a GPU with --cnnperf-device=cuda."
        )
    return device
