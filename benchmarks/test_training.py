"""The repository's own benchmark tests: the README's examples, as a team would write them,
sized for the device the run measures on (a GPU at the published sizes, the CPU small)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_cnnperf.models import ModelFactory
from pytest_cnnperf.runner import CnnPerf


def on_gpu(device: Any) -> bool:
    return bool(device.type == "cuda")


def test_resnet50(cnnperf: CnnPerf, model_factory: ModelFactory, cnnperf_device: Any) -> None:
    if on_gpu(cnnperf_device):
        cnnperf.train_step(model_factory("resnet50"), batch_size=64)
    else:
        cnnperf.train_step(model_factory("resnet50"), batch_size=4, image_size=64)


@pytest.mark.cnnperf(threshold="15%")  # a noisier benchmark gets a looser gate
def test_mobilenet_amp(cnnperf: CnnPerf, model_factory: ModelFactory, cnnperf_device: Any) -> None:
    model = model_factory("mobilenet_v2", num_classes=100)
    batch, size = (128, 224) if on_gpu(cnnperf_device) else (8, 64)
    cnnperf.train_step(model, batch_size=batch, image_size=size, amp="bf16", channels_last=True)


def test_tinynet(cnnperf: CnnPerf, model_factory: ModelFactory, cnnperf_device: Any) -> None:
    """A project's own model, registered in the root conftest.py."""
    batch = 256 if on_gpu(cnnperf_device) else 32
    result = cnnperf.train_step(model_factory("tinynet"), batch_size=batch, optimizer="adamw")
    assert result.measurement is not None
    assert result.measurement.items_per_second > 0
