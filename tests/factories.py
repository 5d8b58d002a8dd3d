"""Values the unit tests build results from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_cnnperf.model import (
    BenchConfig,
    Environment,
    Flags,
    Look,
    Measurement,
    MemoryPeak,
    NoiseProfile,
    Result,
    Sample,
)

#: the noise profile of scripted samples: a fixed spread, no drift between runs (the tests of
#: the between-run noise itself give their own)
QUIET = NoiseProfile(
    within=0.02, between=0.01, between_calibrated=0.01, calibration_within=0.02, drift_covered=0.5
)

#: the environment of a 2-thread CPU test machine
ENV = Environment(
    machine="cpu-test-2t",
    device="cpu",
    device_name="Test CPU",
    driver=None,
    cuda=None,
    cudnn=None,
    torch="2.14.1",
    torchvision="0.29.1",
    python="3.11.7",
    platform="Linux x86_64",
    cpu="Test CPU",
    threads=2,
    interop_threads=2,
    flags=Flags(None, None, None, "highest", False),
)


def sample(step: float, memory: int = 100 << 20, **fields: Any) -> Sample:
    """A sample of three steps of ``step`` seconds, split 30/60/10 into its phases, with a
    peak of ``memory`` bytes allocated; ``fields`` sets the others (``flops=``...)."""
    return Sample(
        step_time_s=step,
        step_times_s=(step,) * 3,
        phases={"forward": (step * 0.3,), "backward": (step * 0.6,), "optimizer": (step * 0.1,)},
        cold_step_s=step * 3,
        warmup_steps=3,
        warmup_steady=True,
        calibration_s=None,
        memory=MemoryPeak(memory, memory * 2, "test"),
        **fields,
    )


#: a training step of a made-up model, the configuration most unit tests measure
CONFIG = BenchConfig(kind="train_step", model="m", batch_size=8, image_size=(64, 64))


def result(
    steps: list[float] | tuple[float, ...],
    *,
    calibration: float | None = 1e-3,
    memory: int | None = 100 << 20,
    config: BenchConfig = CONFIG,
    test_id: str = "tests/test_m.py::test_m",
    **fields: Any,
) -> Result:
    """A result without a decision (as a baseline entry, or a measurement about to be gated):
    one sample per step time, each with ``calibration`` and a peak of ``memory`` bytes;
    ``fields`` sets more fields of every sample."""
    samples = tuple(
        Sample(
            step_time_s=t,
            step_times_s=(t,) * 3,
            calibration_s=calibration,
            memory=MemoryPeak(memory, memory, "test") if memory is not None else None,
            **fields,
        )
        for t in steps
    )
    return Result(
        config=config,
        test_id=test_id,
        recorded="2026-11-30T00:00:00Z",
        environment=ENV,
        measurement=Measurement(config.batch_size, samples, config.unit),
    )


def one_look(alpha: float, beta: float) -> Look:
    """The only look of a design of one: all of both error rates spent at once, as the gate's
    tests decide on samples taken before it."""
    return Look(number=1, of=1, alpha=alpha, beta=beta)


def record_quiet_noise(baselines: Path, machine: str | None = None) -> None:
    """Write :data:`QUIET` as the noise profile of ``machine`` (this machine's kind at 2 and 1
    threads by default) under ``baselines``."""
    import torch

    from pytest_cnnperf.measuring.environment import machine_name
    from pytest_cnnperf.store import noise

    machines = [machine] if machine else [machine_name(torch.device("cpu"), n) for n in (1, 2)]
    for name in machines:
        noise.write(baselines, name, QUIET)
