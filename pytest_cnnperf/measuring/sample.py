"""One sample: calibration, warm-up, a timed block, peak memory in a pass of its own, the GPU's
health, the CPU's contention and the energy around it; in a benchmark's first sample also FLOPs,
the device's peak, operator counts and the first steps' numbers; then the environment."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..model import DeviceHealth, Environment, Peak, Sample, StepFlops
from . import (
    calibration,
    compiled,
    counting,
    cpuload,
    energy,
    environment,
    flops,
    instructions,
    memory,
    nvml,
    profile,
)
from .loader import counting_workers
from .peak import find as find_peak
from .peak_table import PeakSetting
from .timing import Clock, CpuClock, CudaClock, TimingPolicy, time_steps
from .workload import Workload

T = TypeVar("T")


@dataclass(frozen=True)
class SamplePlan:
    """How to take a sample, the same for every sample of a benchmark."""

    timing: TimingPolicy
    #: time the calibration workload
    calibrate: bool = True
    #: the kind of machine the baselines apply to, when the user named it
    machine: str | None = None
    #: the device's peak as the project states it (``cnnperf_peak_tflops``)
    peak_tflops: PeakSetting | None = None
    #: steps to count the instructions of instead of timing (in a process under callgrind)
    instructions: int = 0


def clock_for(device: Any) -> Clock:
    return CudaClock(device) if device.type == "cuda" else CpuClock()


def take_sample(
    workload: Workload,
    device: Any,
    plan: SamplePlan,
    *,
    memory_pass: bool,
    in_process: bool,
    ignore_pids: frozenset[int] = frozenset(),
    count_pass: bool = False,
    profile_pass: bool = False,
    trace: str | None = None,
) -> tuple[Sample, Environment]:
    """Measure one sample of ``workload`` on ``device``; ``ignore_pids``: our own processes,
    not other users of the GPU; ``count_pass``: what does not vary (FLOPs, peak, counts, first
    steps' numbers); ``profile_pass``: the operators last, as a Chrome trace to ``trace``."""
    if plan.instructions:
        return counted_sample(workload, device, plan)
    policy = plan.timing
    cuda = device.type == "cuda"
    clock = clock_for(device)
    monitor = nvml.GpuMonitor.open(device.index or 0, ignore_pids) if cuda else None
    readings = [monitor.read()] if monitor else []
    # the initial state, kept before the first step, to compute the first steps' numbers from
    first_steps = _quietly(workload.first_steps) if count_pass else None
    # on a GPU the CPU only launches work, and xdist workers beside it launch theirs: not counted
    cpu_before = None if cuda else cpuload.snapshot()
    loop = workload.loop
    if loop is not None:  # the loader's workers are the benchmark's own processes
        cpu_before = counting_workers(cpu_before)
    # on the CPU before the first step, where the benchmark's heap, caches and threads cannot
    # reach it; on CUDA after the timed steps, at the clocks they ran at
    calibrated = calibration.calibrate(device, clock) if plan.calibrate and not cuda else None
    if workload.compiled:
        workload.compiled.start()
    # not over a loop's block: it comes in parts, with untimed steps between them
    probe = energy.probe_for(device, monitor) if loop is None else None
    # a loop's figure is its block's wall time per step on the CPU too: its waits come in
    # bursts, which a median of its steps would leave out
    per_step_wall = not cuda and loop is None
    timed = time_steps(
        workload.phases, clock, policy, per_step_wall=per_step_wall, probe=probe, window=loop
    )
    compilation = workload.compiled.figures(timed) if workload.compiled else None
    cpu_contention = None
    if cpu_before is not None:
        cpu_after = cpuload.snapshot()
        if loop is not None:
            cpu_after = counting_workers(cpu_after)
        cpu_contention = cpuload.contention(cpu_before, cpu_after, _threads())
    loading = loop.figures(timed, clock, policy) if loop is not None else None
    if plan.calibrate and cuda:
        calibrated = calibration.calibrate(device, clock)
    calibration_s, calibration_unit = calibrated or (None, None)
    if monitor:  # after the calibration too: it must be judged by the same clocks
        readings.append(monitor.read())
    peak = None
    if memory_pass and cuda:
        peak = memory.cuda_peak(workload, device, policy.memory_steps)
    elif memory_pass:
        peak = memory.cpu_peak(workload, policy.memory_steps)
    health: DeviceHealth | None = nvml.assess(readings)
    counted, device_peak = _efficiency(workload, device, plan) if count_pass else (None, None)
    used = probe.energy(workload.items_per_step * len(timed.step_times_s)) if probe else None
    structure, structure_error = None, None
    if count_pass:
        try:
            structure = counting.count_steps(workload, device, clock)
        except counting.CountingFailed as exc:
            structure_error = str(exc)
    operators, profile_error = None, None
    if profile_pass:
        try:
            operators = profile.profile_steps(workload, device, clock, trace)
        except profile.ProfileFailed as exc:
            profile_error = str(exc)
    computed = _quietly(first_steps)
    sample = Sample(
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
        compilation=compilation,
        calibration_unit=calibration_unit,
        flops=counted,
        parameters=_parameters(workload.model),
        profile=operators,
        profile_error=profile_error,
        structure=structure,
        structure_error=structure_error,
        numbers=computed,
        peak=device_peak,
        energy=used,
        loading=loading,
    )
    driver = nvml.driver_version(monitor) if cuda else None
    env = environment.capture(device, plan.machine, driver)
    if workload.compiled:
        env = dataclasses.replace(env, compiler=compiled.compiler_stack(device.type))
    return sample, env


def counted_sample(workload: Workload, device: Any, plan: SamplePlan) -> tuple[Sample, Environment]:
    """A sample whose figure is the instructions of ``plan.instructions`` steps under callgrind,
    on one thread (collection is per thread) with the garbage collector off; its step time is
    Valgrind's, never compared."""
    import gc
    import time

    import torch

    requests = instructions.Requests()
    if not requests.running():
        raise instructions.InstructionsProblem(
            "the counting process does not run under Valgrind; --cnnperf-metric=instructions "
            "starts one itself"
        )
    if workload.compiled or workload.loop is not None:  # a count taken ahead of its test
        raise instructions.InstructionsProblem(
            "a compiled step or a loader's loop is not counted: gate it by time"
        )
    if torch.get_num_threads() != 1:
        raise instructions.InstructionsProblem(
            f"torch runs {torch.get_num_threads()} threads in the counting process; callgrind "
            "counts one thread, so the others' work would drop out of the count"
        )
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    try:
        instructions.count_steps(requests, workload.phases, plan.instructions)
    finally:
        gc.enable()
    seconds = time.perf_counter() - started
    dumps = instructions.read_dumps(instructions.output_file())
    if not dumps:
        raise instructions.InstructionsProblem("callgrind wrote no counts for the counted steps")
    env = environment.capture(device, plan.machine, None)
    counts = instructions.counted(dumps, env.cpu_capability, seconds)
    sample = Sample(
        step_time_s=seconds / (plan.instructions + 1),
        instructions=counts,
        parameters=_parameters(workload.model),
    )
    return sample, env


def _quietly(call: Callable[[], T] | None) -> T | None:
    """``call()``, or ``None`` where there is nothing to call or it fails: the first steps'
    numbers are a check beside the sample, which they must not fail (a loss of the user's own
    that is no tensor, a state that does not load back)."""
    if call is None:
        return None
    try:
        return call()
    except Exception:
        return None


def _parameters(model: Any) -> int | None:
    return sum(p.numel() for p in model.parameters()) if model is not None else None


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())


def _efficiency(
    workload: Workload, device: Any, plan: SamplePlan
) -> tuple[StepFlops | None, Peak | None]:
    """The step's FLOPs (after the timed steps and the memory pass: a real step counted here
    is no cold step) and the peak they are measured against."""
    counted = flops.count(workload.phases, workload.items_per_step, workload.count_on_meta)
    if counted is None:
        return None, None
    if device.type == "cuda":
        clock_for(device).sync()
    return counted, find_peak(device, workload.precision, counted, plan.peak_tflops)
