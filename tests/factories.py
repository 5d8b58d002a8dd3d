"""Values the unit tests build results from."""

from __future__ import annotations

from typing import Any

from pytest_cnnperf.results import Environment, Flags, MemoryPeak, Sample

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
