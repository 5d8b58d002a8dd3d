"""Energy over the timed steps, from the device's cumulative energy counter, read right after
the timed block's first and last synchronisation (``timing.time_block``'s probe).

On an NVIDIA GPU (Volta or newer), NVML's total energy in millijoules, which advances every 20
to 100 ms (hence ``model.sample.ENERGY_MIN_WINDOW_S``); on the CPU, the packages' RAPL counters
(``intel-rapl:N/energy_uj``, wrapping at ``max_energy_range_uj``) where this user may read them.
Both count the whole device, other processes too; elsewhere nothing is estimated.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..model import Energy

POWERCAP = "sys/class/powercap"


class Counter(Protocol):
    source: str

    def joules(self) -> float:
        """The counter's reading: joules, from an arbitrary origin (raises when unreadable)."""


class NvmlCounter:
    """The GPU board's energy counter."""

    source = "nvml"

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle

    def joules(self) -> float:
        return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1000.0


@dataclass(frozen=True)
class RaplZone:
    energy: Path
    max_range_uj: int


class RaplCounter:
    """The CPU packages' energy counters, summed; each one's wraparound undone."""

    source = "rapl"

    def __init__(self, zones: list[RaplZone]) -> None:
        self._zones = zones
        self._last: list[int] | None = None
        self._total_uj = 0

    @classmethod
    def open(cls, root: Path = Path("/")) -> RaplCounter | None:
        """The packages' counters under ``root``, or ``None`` when there are none or they
        cannot be read by this user."""
        base = root / POWERCAP
        zones = []
        try:
            folders = sorted(base.iterdir())
        except OSError:
            return None
        for folder in folders:
            # packages only: sub-zones (intel-rapl:0:0, core, uncore, dram) are inside them,
            # and psys covers the whole platform
            if not re.fullmatch(r"intel-rapl:\d+", folder.name):
                continue
            try:
                if not (folder / "name").read_text().strip().startswith("package"):
                    continue
                max_range = int((folder / "max_energy_range_uj").read_text())
                int((folder / "energy_uj").read_text())
            except (OSError, ValueError):
                return None
            zones.append(RaplZone(folder / "energy_uj", max_range))
        return cls(zones) if zones else None

    def joules(self) -> float:
        now = [int(zone.energy.read_text()) for zone in self._zones]
        if self._last is not None:
            for zone, before, after in zip(self._zones, self._last, now, strict=True):
                delta = after - before
                if delta < 0:  # the counter wrapped
                    delta += zone.max_range_uj + 1
                self._total_uj += delta
        self._last = now
        return self._total_uj / 1e6


class EnergyProbe:
    """Reads a counter at the start and the end of a timed block."""

    def __init__(self, counter: Counter, clock: Callable[[], float] = time.perf_counter) -> None:
        self._counter = counter
        self._clock = clock
        self._start: tuple[float, float] | None = None
        self._used: tuple[float, float] | None = None

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> None:
        end = self._read()
        if self._start is not None and end is not None:
            self._used = (end[0] - self._start[0], end[1] - self._start[1])

    def _read(self) -> tuple[float, float] | None:
        try:
            return self._counter.joules(), self._clock()
        except Exception:  # the counter became unreadable: no figure
            return None

    def energy(self, items: int) -> Energy | None:
        """The energy of the block of ``items`` items, if both readings were taken."""
        if self._used is None or self._used[1] <= 0 or items <= 0:
            return None
        joules, seconds = self._used
        return Energy(
            joules=max(joules, 0.0), seconds=seconds, items=items, source=self._counter.source
        )


def probe_for(device: Any, gpu: Any | None = None, root: Path = Path("/")) -> EnergyProbe | None:
    """A probe of ``device``'s energy: ``gpu`` is its ``nvml.GpuMonitor`` (``None`` where NVML
    is unusable). ``None`` where no counter can be read."""
    if device.type == "cuda":
        if gpu is None:
            return None
        counter = NvmlCounter(gpu.library, gpu.handle)
        try:
            counter.joules()
        except Exception:  # NotSupported before Volta, or a restricted container
            return None
        return EnergyProbe(counter)
    if device.type != "cpu" or _shared_package():
        return None
    rapl = RaplCounter.open(root)
    return EnergyProbe(rapl) if rapl else None


def _shared_package() -> bool:
    """Whether other benchmarks share the CPU package: data-parallel ranks, or pytest-xdist's
    workers (which set ``PYTEST_XDIST_WORKER_COUNT``); its energy is then all of theirs."""
    import torch.distributed as dist

    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or "1") > 1:
        return True
    return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)
