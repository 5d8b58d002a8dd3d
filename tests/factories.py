"""Values the unit tests build results from."""

from __future__ import annotations

from pytest_cnnperf.results import Environment, Flags

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
