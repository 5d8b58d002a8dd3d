"""One sample: warm up, time a block of steps, time the calibration workload, measure peak
memory in a pass of its own, and read the GPU's health and the CPU's contention around it all."""

from __future__ import annotations

from typing import Any

from . import calibration, cpuload, memory, nvml
from .policy import TimingPolicy
from .results import DeviceHealth, Sample
from .timing import Clock, CpuClock, CudaClock, measure_steps
from .workload import Workload


def clock_for(device: Any) -> Clock:
    return CudaClock(device) if device.type == "cuda" else CpuClock()


def measure_sample(
    workload: Workload,
    device: Any,
    policy: TimingPolicy,
    *,
    clock: Clock | None = None,
    in_process: bool = False,
    ignore_pids: frozenset[int] = frozenset(),
    calibrate: bool = True,
    with_memory: bool = True,
) -> Sample:
    cuda = device.type == "cuda"
    clock = clock or clock_for(device)
    monitor = nvml.GpuMonitor.open(device.index or 0, ignore_pids) if cuda else None
    readings = [monitor.read()] if monitor else []
    # on a GPU the CPU only launches work, and xdist workers beside it launch theirs: not counted
    cpu_before = None if cuda else cpuload.snapshot()
    timed = measure_steps(workload.phases, clock, policy, per_step_wall=not cuda)
    cpu_contention = None
    if cpu_before is not None:
        cpu_contention = cpuload.contention(cpu_before, cpuload.snapshot(), _threads())
    if monitor:
        readings.append(monitor.read())
    calibration_s = calibration.calibrate(device, clock) if calibrate else None
    peak = None
    if with_memory and cuda:
        peak = memory.cuda_peak(workload, device, policy.memory_steps)
    elif with_memory:
        peak = memory.cpu_peak(workload, policy.memory_steps)
    health: DeviceHealth | None = nvml.assess(readings)
    return Sample(
        step_time_s=timed.step_time_s,
        step_times_s=timed.step_times_s,
        phases=timed.phases,
        cold_step_s=timed.cold_step_s,
        warmup_steps=timed.warmup_steps,
        warmup_steady=timed.warmup_steady,
        calibration_s=calibration_s,
        memory=peak,
        health=health,
        in_process=in_process,
        cpu_contention=cpu_contention,
    )


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())
