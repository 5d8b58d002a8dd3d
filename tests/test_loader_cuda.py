"""``train_loop`` on CUDA: the batch copied from pinned memory without a sync, the wait and
the copy timed with events, the loop's figures beside the model's own. Skipped without a CUDA
device (not yet run on one)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from pytest_cnnperf.gate.policy import CUDA
from pytest_cnnperf.measuring.loader import LoopSpec, build_loop
from pytest_cnnperf.measuring.sample import SamplePlan, take_sample

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DEVICE = torch.device("cuda:0")
#: a short CUDA sample: these tests check what is measured, not how well
TIMING = dataclasses.replace(CUDA.timing, warmup_max_s=2.0, min_steps=10, min_time_s=0.1)


class Images(Dataset[tuple[torch.Tensor, int]]):
    def __len__(self) -> int:
        return 512

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.rand(3, 32, 32), index % 10


def net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 32 * 32, 10)
    )


def test_a_pinned_batch_is_copied_without_a_sync() -> None:
    """The copy phase queues the copy of a pinned batch on the stream (``non_blocking``):
    torch's sync debug mode sees no synchronising call in it."""
    loader = DataLoader(Images(), batch_size=16, pin_memory=True)
    workload = build_loop(net(), loader, LoopSpec(batch_size=16), DEVICE)
    loop = workload.loop
    assert loop is not None
    wait, copy = loop.phases[0][1], loop.phases[1][1]
    wait()
    assert loop.feed.host[0].is_pinned()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            copy()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert not [w for w in caught if "synchronizing CUDA operation" in str(w.message)]
    assert loop.batch.images.device == DEVICE


@pytest.mark.parametrize("pin_memory", [False, True])
def test_a_cuda_loops_wait_and_copy_are_timed_with_events(pin_memory: bool) -> None:
    loader = DataLoader(Images(), batch_size=16, shuffle=True, pin_memory=pin_memory)
    workload = build_loop(net(), loader, LoopSpec(batch_size=16), DEVICE)
    sample, environment = take_sample(
        workload, DEVICE, SamplePlan(TIMING, calibrate=False), memory_pass=True, in_process=True
    )
    loading = sample.loading
    assert loading is not None
    assert environment.device.startswith("cuda")
    steps = len(sample.step_times_s)
    assert steps >= TIMING.min_steps
    assert {name: len(times) for name, times in sample.phases.items()} == dict.fromkeys(
        ("wait", "copy", "forward", "backward", "optimizer"), steps
    )
    assert loading.copy_s > 0
    assert loading.synthetic_step_s > 0
    assert sample.memory is not None
    assert sample.memory.source.startswith("cuda")
