"""Which device a run measures on, decided once at the start of the session: ``auto``, ``cpu``,
``cuda`` or ``cuda:N`` as asked, resolved against the devices there, counted without
initialising CUDA in the pytest process (see ``cuda_device_count``)."""

from __future__ import annotations

import re
import subprocess
import sys
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


#: how long a throw-away process may take to count CUDA devices
COUNT_TIMEOUT_S = 120


def _driver_present() -> bool:
    """Whether the CUDA driver library can be loaded (loading it initialises nothing)."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1" if sys.platform.startswith("linux") else "nvcuda")
    except OSError:
        return False
    return True


def cuda_device_count() -> int:
    """The CUDA devices this process sees, counted through NVML or else in a throw-away process,
    never by initialising CUDA here (as ``torch.cuda.device_count()`` may): forked samples could
    not use CUDA, and an xdist worker could not pin its GPU afterwards."""
    import torch

    if not torch.backends.cuda.is_built():
        return 0
    if torch.cuda.is_initialized():
        return int(torch.cuda.device_count())
    nvml_count = getattr(torch.cuda, "_device_count_nvml", lambda: -1)  # private, 2.0 to 2.14
    count = int(nvml_count())  # -1: NVML cannot tell
    if count >= 0:
        return count
    if not _driver_present():
        return 0
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
            capture_output=True,
            text=True,
            timeout=COUNT_TIMEOUT_S,
            check=False,
        )
        return int(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0


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
