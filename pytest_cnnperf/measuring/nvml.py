"""The GPU's health around a measurement, read through NVML (``pynvml`` of ``nvidia-ml-py``):
clocks, throttle reasons, how long the clocks were held back, temperature, power and other
processes. The device is found by its UUID (NVML ignores ``CUDA_VISIBLE_DEVICES``). Throttling
comes from the cumulative violation counters read before and after, which instant readings would
miss. Where NVML lists host pids (a container's own pid namespace), other processes are unknown,
never a false alarm. Every call is guarded: a missing library or an old driver gives fewer figures.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ..model import DeviceHealth

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
#: NVML's performance policies with cumulative violation counters
#: (``nvmlDeviceGetViolationStatus``), by the name a report gives them
POLICIES = {
    "power": "NVML_PERF_POLICY_POWER",
    "thermal": "NVML_PERF_POLICY_THERMAL",
    "sync_boost": "NVML_PERF_POLICY_SYNC_BOOST",
    "board_limit": "NVML_PERF_POLICY_BOARD_LIMIT",
    "reliability": "NVML_PERF_POLICY_RELIABILITY",
}
#: causes that make a timing untrustworthy when they held the clocks back this long a fraction of
#: the measurement; running at the power cap under full load (``power``) is normal and reported only
SLOWDOWN_POLICIES = ("thermal", "board_limit", "reliability")
SLOWDOWN_FRACTION = 0.01
#: where the driver says its version when NVML is not installed
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")


def _guard(call: Callable[[], T]) -> T | None:
    try:
        return call()
    except Exception:  # NVML raises many error classes; any of them means "not available"
        return None


@dataclass(frozen=True)
class Reading:
    """One reading: the instant clock-event reason bits, the health they amount to, and the
    cumulative violation counters (ns) at monotonic time ``at``."""

    reasons: int
    health: DeviceHealth
    counters: dict[str, int] = field(default_factory=dict)
    at: float = 0.0


class GpuMonitor:
    """NVML handle for one torch CUDA device; ``None`` from ``open`` where NVML is unusable."""

    def __init__(self, nvml: Any, handle: Any, ignore_pids: frozenset[int] = frozenset()) -> None:
        #: the ``pynvml`` module and the device's handle (``energy`` reads them too)
        self.library = nvml
        self.handle = handle
        self._ignore = ignore_pids | {os.getpid()}

    @classmethod
    def open(
        cls, device_index: int, ignore_pids: frozenset[int] = frozenset()
    ) -> GpuMonitor | None:
        """``ignore_pids``: our own processes (the pytest process that asked for the sample,
        the other ranks of a data-parallel step)."""
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        except Exception:
            return None
        names = [uuid] if uuid.startswith(("GPU-", "MIG-")) else [f"GPU-{uuid}", f"MIG-{uuid}"]
        for name in names:  # torch gives a MIG instance's uuid without its prefix too
            handle = _guard(partial(pynvml.nvmlDeviceGetHandleByUUID, name))
            if handle is not None:
                return cls(pynvml, handle, ignore_pids)
        return None

    def uuid(self) -> str | None:
        value = _guard(lambda: self.library.nvmlDeviceGetUUID(self.handle))
        return value.decode() if isinstance(value, bytes) else value

    def _reasons(self) -> int:
        n = self.library
        value = _guard(lambda: n.nvmlDeviceGetCurrentClocksEventReasons(self.handle))
        if value is None:  # bindings or drivers older than the "event" naming (r535)
            value = _guard(lambda: n.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle))
        return int(value or 0)

    def _other_processes(self) -> tuple[int, ...] | None:
        """Pids of the other processes with a context on the GPU, ``None`` where NVML cannot
        tell them from ours. Read only once this process holds a context on it."""
        processes = _guard(lambda: self.library.nvmlDeviceGetComputeRunningProcesses(self.handle))
        if processes is None:
            return None
        pids = {int(p.pid) for p in processes}
        if os.getpid() not in pids:  # host pids, seen from a container's own pid namespace
            return None
        return tuple(sorted(pids - self._ignore))

    def counters(self) -> dict[str, int]:
        """NVML's cumulative violation counters, ns since the driver loaded, by cause; the
        causes the bindings or the driver do not have are left out."""
        n = self.library
        found: dict[str, int] = {}
        for name, constant in POLICIES.items():
            policy = getattr(n, constant, None)
            if policy is None:
                continue
            status = _guard(partial(n.nvmlDeviceGetViolationStatus, self.handle, policy))
            value = getattr(status, "violationTime", None)
            if value is not None:
                found[name] = int(value)
        return found

    def read(self) -> Reading:
        n, h = self.library, self.handle
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
        return Reading(reasons, health, self.counters(), time.monotonic())


def driver_version(monitor: GpuMonitor | None) -> str | None:
    """The NVIDIA driver's version: from NVML, or where it is not installed from the kernel
    module's own file."""
    version = _guard(monitor.library.nvmlSystemGetDriverVersion) if monitor else None
    if version:
        return version.decode() if isinstance(version, bytes) else str(version)
    try:
        text = DRIVER_VERSION_FILE.read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def throttled(readings: list[Reading]) -> dict[str, float]:
    """Fraction of the time between the first and last readings that the clocks were held back,
    by cause, from the cumulative counters both readings have."""
    if len(readings) < 2:
        return {}
    first, last = readings[0], readings[-1]
    wall = last.at - first.at
    if wall <= 0:
        return {}
    return {
        name: min(1.0, max(0.0, (last.counters[name] - before) / 1e9 / wall))
        for name, before in first.counters.items()
        if name in last.counters
    }


def assess(readings: list[Reading]) -> DeviceHealth | None:
    """Combine readings taken around a measurement into one health record with its problems."""
    if not readings:
        return None
    bits = 0
    known: list[tuple[int, ...]] = []
    for reading in readings:
        bits |= reading.reasons
        if reading.health.other_processes is not None:
            known.append(reading.health.other_processes)
    others = sorted({pid for pids in known for pid in pids})
    fractions = throttled(readings)
    last = readings[-1].health
    named = {**SLOWDOWN_REASONS, **INFO_REASONS}
    problems = []
    slowdowns = [name for bit, name in SLOWDOWN_REASONS.items() if bits & bit]
    if slowdowns:
        problems.append(f"GPU clocks were throttled ({', '.join(slowdowns)})")
    held = [
        f"{name.replace('_', ' ')} {fractions[name]:.0%}"
        for name in SLOWDOWN_POLICIES
        if fractions.get(name, 0.0) >= SLOWDOWN_FRACTION
    ]
    if held:
        problems.append(
            f"GPU clocks were held back for part of the measurement ({', '.join(held)})"
        )
    if others:
        pids = ", ".join(map(str, others))
        problems.append(f"{len(others)} other process(es) used the GPU (pids {pids})")
    hottest = max((r.health.temperature_c or 0) for r in readings)
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
        other_processes=tuple(others) if known else None,
        problems=tuple(problems),
        throttled=fractions,
    )
