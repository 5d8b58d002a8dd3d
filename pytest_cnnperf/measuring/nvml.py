"""The GPU's health around a measurement, read through NVML (the ``pynvml`` module of
``nvidia-ml-py``): clocks, clock-event (throttle) reasons, temperature, power and other
processes on the device. NVML numbers devices physically and ignores ``CUDA_VISIBLE_DEVICES``,
so the device is found by its UUID, as torch itself does.

Every call is guarded: a missing library, an old driver or a restricted container gives fewer
figures, never an error in a benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from ..results import DeviceHealth

T = TypeVar("T")

#: NVML clock-event reasons that mean the GPU ran slower than it can for reasons outside the code
SLOWDOWN_REASONS = {
    0x8: "HwSlowdown",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
}
#: reasons worth reporting that are normal under full load
INFO_REASONS = {0x4: "SwPowerCap", 0x10: "SyncBoost", 0x2: "ApplicationsClocksSetting"}
HOT_C = 85


def _guard(call: Callable[[], T]) -> T | None:
    try:
        return call()
    except Exception:  # NVML raises many error classes; any of them means "not available"
        return None


class GpuMonitor:
    """NVML handle for one torch CUDA device; ``None`` from ``open`` where NVML is unusable."""

    def __init__(self, nvml: Any, handle: Any, ignore_pids: frozenset[int] = frozenset()) -> None:
        self._nvml = nvml
        self._handle = handle
        self._ignore = ignore_pids | {os.getpid()}

    @classmethod
    def open(
        cls, device_index: int, ignore_pids: frozenset[int] = frozenset()
    ) -> GpuMonitor | None:
        """``ignore_pids``: our own processes (the pytest process that asked for the sample)."""
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(device_index).uuid)
            if not uuid.startswith(("GPU-", "MIG-")):
                uuid = f"GPU-{uuid}"
            return cls(pynvml, pynvml.nvmlDeviceGetHandleByUUID(uuid), ignore_pids)
        except Exception:
            return None

    @property
    def library(self) -> Any:
        """The ``pynvml`` module (for readers of their own, such as ``energy``)."""
        return self._nvml

    @property
    def handle(self) -> Any:
        return self._handle

    def driver_version(self) -> str | None:
        version = _guard(self._nvml.nvmlSystemGetDriverVersion)
        return version.decode() if isinstance(version, bytes) else version

    def _reasons(self) -> int:
        n = self._nvml
        value = _guard(lambda: n.nvmlDeviceGetCurrentClocksEventReasons(self._handle))
        if value is None:  # drivers older than the "event" naming
            value = _guard(lambda: n.nvmlDeviceGetCurrentClocksThrottleReasons(self._handle))
        return int(value or 0)

    def _other_processes(self) -> tuple[int, ...]:
        processes = _guard(lambda: self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle))
        return tuple(sorted(p.pid for p in processes or () if p.pid not in self._ignore))

    def read(self) -> tuple[int, DeviceHealth]:
        """One reading: the raw reason bits and the health it amounts to."""
        n, h = self._nvml, self._handle
        reasons = self._reasons()
        power = _guard(lambda: n.nvmlDeviceGetPowerUsage(h))
        limit = _guard(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
        health = DeviceHealth(
            sm_clock_mhz=_guard(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            max_sm_clock_mhz=_guard(lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            memory_clock_mhz=_guard(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            temperature_c=_guard(lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            power_w=power / 1000 if power is not None else None,
            power_limit_w=limit / 1000 if limit is not None else None,
            clock_event_reasons=(),
            other_processes=self._other_processes(),
            problems=(),
        )
        return reasons, health


def assess(readings: list[tuple[int, DeviceHealth]]) -> DeviceHealth | None:
    """Combine readings taken around a measurement into one health record with its problems."""
    if not readings:
        return None
    bits = 0
    others: set[int] = set()
    for reasons, health in readings:
        bits |= reasons
        others.update(health.other_processes)
    last = readings[-1][1]
    named = {**SLOWDOWN_REASONS, **INFO_REASONS}
    problems = []
    slowdowns = [name for bit, name in SLOWDOWN_REASONS.items() if bits & bit]
    if slowdowns:
        problems.append(f"GPU clocks were throttled ({', '.join(slowdowns)})")
    if others:
        pids = ", ".join(map(str, sorted(others)))
        problems.append(f"{len(others)} other process(es) used the GPU (pids {pids})")
    hottest = max((h.temperature_c or 0) for _, h in readings)
    if hottest >= HOT_C:
        problems.append(f"GPU temperature reached {hottest} C")
    return DeviceHealth(
        sm_clock_mhz=last.sm_clock_mhz,
        max_sm_clock_mhz=last.max_sm_clock_mhz,
        memory_clock_mhz=last.memory_clock_mhz,
        temperature_c=hottest or last.temperature_c,
        power_w=last.power_w,
        power_limit_w=last.power_limit_w,
        clock_event_reasons=tuple(name for bit, name in sorted(named.items()) if bits & bit),
        other_processes=tuple(sorted(others)),
        problems=tuple(problems),
    )
