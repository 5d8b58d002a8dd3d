"""Which device a run measures on, decided once at the start of the session.

``auto``, ``cpu``, ``cuda`` or ``cuda:N`` as the user asked for it, resolved against the devices
that are there. CUDA devices are counted without initialising CUDA in the pytest process: the
sample processes forked from it must be able to initialise it themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceRequest:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N`` as the user asked for it."""

    kind: str
    index: int | None = None

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def parse_device(value: object) -> DeviceRequest:
    text = str(value).strip().lower()
    if text in ("auto", "cpu", "cuda"):
        return DeviceRequest(text)
    match = re.fullmatch(r"cuda:(\d+)", text)
    if match:
        return DeviceRequest("cuda", int(match.group(1)))
    raise ValueError(
        f"{value!r} is not a device; use auto, cpu, cuda or cuda:N with N a device index "
        "(e.g. --cnnperf-device=cuda:1)"
    )


class DeviceProblem(ValueError):
    """The device asked for is not there, or does not fit the other settings."""


def cuda_device_count() -> int:
    import torch

    if not torch.backends.cuda.is_built():
        return 0
    return int(torch.cuda.device_count())


def resolve(request: DeviceRequest, cudnn_modes: tuple[object, ...] | None) -> str:
    """``"cpu"`` or ``"cuda:N"``; a :class:`DeviceProblem` for a device that is not there, and
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
            raise DeviceProblem(
                f"--cnnperf-device={request} asks for a CUDA device, but none is usable here "
                f"(torch {torch.__version__} sees no CUDA device). Benchmark on the CPU with "
                "--cnnperf-device=cpu (or auto), or check the GPU and driver with nvidia-smi."
            )
        if index >= count:
            raise DeviceProblem(
                f"--cnnperf-device={request} asks for CUDA device {index}, but only {count} "
                f"{'is' if count == 1 else 'are'} visible (cuda:0 to cuda:{count - 1}); "
                "check CUDA_VISIBLE_DEVICES or pick one of those."
            )
        device = f"cuda:{index}"
    if cudnn_modes and not device.startswith("cuda"):
        modes = ",".join(str(m) for m in cudnn_modes)
        raise DeviceProblem(
            f"--cudnn={modes} asks for cuDNN modes, but this run measures on the CPU "
            f"(--cnnperf-device={request}), where cuDNN is not used. Drop --cudnn (and the "
            "cnnperf_cudnn ini setting) for CPU runs, or run on a GPU with --cnnperf-device=cuda."
        )
    return device
