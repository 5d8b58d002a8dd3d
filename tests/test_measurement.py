"""Workloads, one sample, peak memory and torch state, on tiny models in this process."""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from typing import Any

import pytest
import torch
from torch import nn

from pytest_cnnperf.benchmark import InferenceSpec, TrainSpec
from pytest_cnnperf.gate.policy import CPU
from pytest_cnnperf.measuring import environment, memory, torchstate
from pytest_cnnperf.measuring.sample import SamplePlan, take_sample
from pytest_cnnperf.measuring.timing import TimingPolicy
from pytest_cnnperf.measuring.workload import (
    build_custom,
    build_inference,
    build_train,
    classification_loss,
)
from pytest_cnnperf.model import Sample

CPU_DEVICE = torch.device("cpu")
QUICK = dataclasses.replace(CPU.timing, min_time_s=0.01, min_steps=3, warmup_max_s=0.5)


def measure_sample(
    workload: Any,
    device: torch.device,
    timing: TimingPolicy,
    *,
    in_process: bool = False,
    calibrate: bool = True,
) -> Sample:
    plan = SamplePlan(timing=timing, calibrate=calibrate)
    return take_sample(workload, device, plan, memory_pass=True, in_process=in_process)[0]


def tiny(num_classes: int = 5) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, num_classes),
    )


def run(workload: Any, steps: int = 2) -> None:
    for _ in range(steps):
        for _, phase in workload.phases:
            phase()


@pytest.mark.parametrize(
    "optimizer", ["sgd", "adam", "adamw", lambda params: torch.optim.RMSprop(params)]
)
def test_train_step_trains_with_each_optimizer(optimizer: Any) -> None:
    model = tiny()
    before = model[4].weight.detach().clone()
    workload = build_train(
        model, TrainSpec(batch_size=4, image_size=(8, 8), optimizer=optimizer), CPU_DEVICE
    )
    assert [name for name, _ in workload.phases] == ["forward", "backward", "optimizer"]
    run(workload)
    assert not torch.equal(before, model[4].weight)


def test_train_step_with_bf16_autocast_and_channels_last() -> None:
    model = tiny()
    spec = TrainSpec(batch_size=4, image_size=(8, 8), amp="bf16", channels_last=True)
    workload = build_train(model, spec, CPU_DEVICE)
    run(workload)
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)


def test_the_number_of_classes_is_read_from_the_model() -> None:
    seen = []

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        seen.append(int(target.max()))
        return output.sum() * 0 + nn.functional.cross_entropy(output, target)

    run(
        build_train(
            tiny(num_classes=3), TrainSpec(batch_size=64, image_size=(4, 4), loss=loss), CPU_DEVICE
        ),
        3,
    )
    assert max(seen) <= 2


def test_auxiliary_heads_weigh_in_as_in_torchvisions_reference_scripts() -> None:
    Inception = namedtuple("Inception", ["logits", "aux_logits"])
    GoogLeNet = namedtuple("GoogLeNet", ["logits", "aux_logits2", "aux_logits1"])
    logits, target = torch.randn(4, 3), torch.tensor([0, 1, 2, 0])
    ce = nn.functional.cross_entropy(logits, target)
    assert classification_loss(Inception(logits, logits), target) == pytest.approx(1.4 * ce.item())
    assert classification_loss(GoogLeNet(logits, logits, logits), target) == pytest.approx(
        1.6 * ce.item()
    )
    assert classification_loss(logits, target) == pytest.approx(ce.item())


def test_inference_runs_forward_only_in_eval_mode() -> None:
    model = tiny()
    workload = build_inference(model, InferenceSpec(batch_size=2, image_size=(8, 8)), CPU_DEVICE)
    assert [name for name, _ in workload.phases] == ["forward"]
    run(workload)
    assert not model.training
    assert model[4].weight.grad is None


def test_a_sample_has_every_figure() -> None:
    workload = build_train(tiny(), TrainSpec(batch_size=4, image_size=(16, 16)), CPU_DEVICE)
    sample = measure_sample(workload, CPU_DEVICE, QUICK, in_process=True)
    assert sample.step_time_s > 0
    assert len(sample.step_times_s) >= QUICK.min_steps
    assert set(sample.phases) == {"forward", "backward", "optimizer"}
    assert sample.cold_step_s is not None
    assert sample.cold_step_s > 0
    assert sample.calibration_s is not None
    assert sample.calibration_s > 0
    assert sample.memory is not None
    assert sample.memory.source == "cpu-profiler"
    assert sample.memory.allocated_bytes > 0
    assert (
        sample.memory.reserved_bytes is None
        or sample.memory.reserved_bytes > sample.memory.allocated_bytes
    )
    assert sample.in_process


def test_custom_steps_have_one_phase() -> None:
    calls = []
    workload = build_custom(lambda: calls.append(1), items_per_step=3)
    sample = measure_sample(workload, CPU_DEVICE, QUICK, calibrate=False)
    assert sample.phases == {}
    assert sample.calibration_s is None
    assert len(calls) > len(sample.step_times_s)


def test_cpu_peak_memory_is_exact_and_sees_growth() -> None:
    """The profiler's allocation events give the same peak every time; 4 MiB more alive inside
    a step, or kept from one step to the next, show as 4 MiB more."""
    model = tiny()
    workload = build_train(model, TrainSpec(batch_size=4, image_size=(16, 16)), CPU_DEVICE)
    run(workload, 3)
    first = memory.cpu_peak(workload, 2).allocated_bytes
    assert memory.cpu_peak(workload, 2).allocated_bytes == first
    weights = sum(p.numel() * 4 for p in model.parameters())
    assert first >= 3 * weights  # weights, their gradients and SGD's momentum at the peak
    forward, backward, step = workload.phases
    kept: list[torch.Tensor] = []

    def grown_within_the_step() -> None:
        kept.append(torch.ones(1 << 20))  # 4 MiB, alive until the step ends
        backward[1]()
        step[1]()
        kept.clear()

    within = dataclasses.replace(workload, phases=[forward, ("backward", grown_within_the_step)])
    assert memory.cpu_peak(within, 2).allocated_bytes == first + (4 << 20)

    def kept_across_steps() -> None:
        forward[1]()
        kept.clear()
        kept.append(torch.ones(1 << 20))  # kept until the next step, as a model caching features

    across = dataclasses.replace(workload, phases=[("forward", kept_across_steps), backward, step])
    assert memory.cpu_peak(across, 3).allocated_bytes == first + (4 << 20)


def test_static_bytes_count_weights_optimizer_state_and_batch() -> None:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1000)
    )
    workload = build_train(model, TrainSpec(batch_size=2, image_size=(8, 8)), CPU_DEVICE)
    run(workload)
    weights = sum(p.numel() * 4 for p in model.parameters())
    # weights and SGD's momentum buffers, plus the batch; gradients belong to the step
    assert 2 * weights < workload.static_bytes() < 3 * weights
    workload.settle()
    assert all(p.grad is None for p in model.parameters())


def test_torch_state_is_restored_after_a_failing_benchmark() -> None:
    threads = torch.get_num_threads()
    rng = torch.get_rng_state()

    def failing_benchmark() -> None:
        with torchstate.preserved():
            torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
            torch.set_num_threads(1)
            torch.use_deterministic_algorithms(True)
            torch.set_float32_matmul_precision("medium")
            torch.set_grad_enabled(False)
            torch.randn(100)
            raise RuntimeError("CUDA out of memory (simulated)")

    with pytest.raises(RuntimeError, match="out of memory"):
        failing_benchmark()
    assert torch.get_num_threads() == threads
    assert torch.equal(torch.get_rng_state(), rng)
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.is_grad_enabled()
    assert torch.backends.cudnn.benchmark is False


def test_torchvisions_version_is_read_without_importing_it() -> None:
    """The string ``torchvision.__version__`` holds (local tag included), found by a process
    that has not imported torchvision, and the import still not done afterwards."""
    import subprocess
    import sys

    torchvision = pytest.importorskip("torchvision")
    script = (
        "import sys\n"
        "from pytest_cnnperf.measuring.environment import torchvision_version\n"
        "print(torchvision_version(), 'torchvision' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == [torchvision.__version__, "False"]
    assert environment.torchvision_version() == torchvision.__version__
