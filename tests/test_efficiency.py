"""FLOPs against torchvision's published counts, the peaks table and cnnperf_peak_tflops, energy
counters (fake NVML, fake RAPL trees), the efficiency figures in every report, and through a
session: on scripted samples that carry them, and in one real run of a tiny model."""

from __future__ import annotations

import dataclasses
import io
import json
import textwrap
from pathlib import Path
from typing import Any

import factories
import pytest
import scipy.stats  # noqa: F401  (imported once, for the in-process runs that gate)
import torch
import torchvision
from factories import ENV, QUIET
from scripted import Script, Scripted
from torch import nn

from pytest_cnnperf.benchmark import InferenceSpec, TrainSpec
from pytest_cnnperf.cli import main
from pytest_cnnperf.measuring import energy, flops, peak
from pytest_cnnperf.measuring import peak_table as peaks
from pytest_cnnperf.measuring.timing import time_block
from pytest_cnnperf.measuring.workload import build_custom, build_inference, build_train
from pytest_cnnperf.model import (
    BenchConfig,
    Decision,
    Energy,
    Flags,
    Measurement,
    Peak,
    Result,
    ResultsFile,
    Sample,
    StepFlops,
    Verdict,
)
from pytest_cnnperf.reports import compare, epoch, markdown, modes, plot, table, terminal
from pytest_cnnperf.sampling.manager import Target
from pytest_cnnperf.store.results_file import RESULTS, Loaded

CPU_DEVICE = torch.device("cpu")
STATED = peaks.parse_peak_tflops("1")  # so that no test waits for the CPU's peak measurement


def tiny(num_classes: int = 5) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, num_classes),
    )


# ---- FLOPs ----


@pytest.mark.parametrize(
    "name", ["resnet18", "resnet50", "vgg16", "mobilenet_v2", "efficientnet_b0"]
)
def test_counted_forward_agrees_with_torchvisions_published_operation_counts(name: str) -> None:
    """torchvision's ``_ops`` are giga multiply-adds of one image at the weights' crop size:
    half the counted forward (two FLOPs per multiply-add)."""
    weights = torchvision.models.get_model_weights(name).DEFAULT
    crop = weights.transforms().crop_size[0]
    with torch.device("meta"):
        model = torchvision.models.get_model(name).eval()
    images = torch.empty(1, 3, crop, crop, device="meta")
    phases, operators = flops.count_inference_on_meta(model, images)
    giga_macs = phases["forward"] / 2 / 1e9
    assert giga_macs == pytest.approx(weights.meta["_ops"], rel=0.05)
    assert set(operators) <= {"aten.convolution", "aten.addmm", "aten.mm"}


def test_a_train_step_counted_on_meta_tensors_equals_a_real_step_and_leaves_the_model_alone() -> (
    None
):
    model = tiny()
    workload = build_train(model, TrainSpec(batch_size=4, image_size=(16, 16)), CPU_DEVICE)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert workload.count_on_meta is not None
    on_meta = workload.count_on_meta()
    assert {k: v for k, v in model.state_dict().items()}.keys() == before.keys()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    real = flops.count_phases(workload.phases)
    assert on_meta == real
    phases, operators = on_meta
    # a 3x3 conv of 3 -> 4 channels on 16x16 images, 4 of them: 2 FLOPs per multiply-add
    assert operators["aten.convolution"] == 2 * 4 * 4 * 3 * 9 * 16 * 16
    assert phases["optimizer"] == 0
    assert phases["backward"] > phases["forward"] > 0


@pytest.mark.parametrize("groups", [1, 4, 8])
def test_the_backward_of_a_grouped_convolution_is_twice_its_forward(groups: int) -> None:
    """Input and weight gradients each cost what the forward costs; PyTorch's own formula
    counts a grouped convolution's weight gradient ``groups`` times over."""
    conv = nn.Conv2d(8, 8, 3, padding=1, groups=groups)
    x = torch.randn(2, 8, 16, 16, requires_grad=True)
    _, operators = flops.count_phases([("step", lambda: conv(x).sum().backward())])
    forward = 2 * 2 * 8 * (8 // groups) * 9 * 16 * 16
    assert operators == {"aten.convolution": forward, "aten.convolution_backward": 2 * forward}


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "efficientnet_b0"])
def test_a_train_step_counts_about_three_forwards(name: str) -> None:
    with torch.device("meta"):
        model = torchvision.models.get_model(name).train()
    images = torch.empty(4, 3, 64, 64, device="meta")
    targets = torch.empty(4, dtype=torch.long, device="meta")
    phases, _ = flops.count_train_on_meta(model, images, targets, nn.functional.cross_entropy)
    # the first convolution's input needs no gradient, so the backward is a little under 2x
    assert 1.9 < phases["backward"] / phases["forward"] < 2.0


def test_an_inference_pass_is_counted_as_one_forward_phase() -> None:
    workload = build_inference(tiny(), InferenceSpec(batch_size=2, image_size=(8, 8)), CPU_DEVICE)
    counted = flops.count(workload.phases, workload.items_per_step, workload.count_on_meta)
    assert counted is not None
    assert counted.method == "meta"
    assert list(counted.phases) == ["forward"]
    assert workload.precision == "fp32"


class ReadsValues(nn.Module):
    """A model whose forward reads a tensor's value, which meta tensors do not have."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x.flatten(1)[:, :8])
        return y * 2 if float(y.sum().item()) > 0 else y


def test_a_model_that_reads_values_is_counted_on_a_real_step() -> None:
    workload = build_train(ReadsValues(), TrainSpec(batch_size=2, image_size=(4, 4)), CPU_DEVICE)
    counted = flops.count(workload.phases, workload.items_per_step, workload.count_on_meta)
    assert counted is not None
    assert counted.method == "step"
    assert counted.phases["forward"] == 2 * 2 * 8 * 3


def test_an_optimizer_of_ones_own_is_counted_on_a_real_step() -> None:
    spec = TrainSpec(batch_size=2, image_size=(8, 8), optimizer=lambda p: torch.optim.SGD(p, 0.1))
    workload = build_train(tiny(), spec, CPU_DEVICE)
    assert workload.count_on_meta is None
    counted = flops.count(workload.phases, workload.items_per_step, workload.count_on_meta)
    assert counted is not None
    assert counted.method == "step"
    assert set(counted.phases) == {"forward", "backward", "optimizer"}


def test_a_measure_step_is_counted_on_one_real_step() -> None:
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    calls = []
    workload = build_custom(lambda: calls.append(a @ b), items_per_step=16)
    counted = flops.count(workload.phases, workload.items_per_step, workload.count_on_meta)
    assert counted == StepFlops({"step": 2 * 16 * 32 * 8}, {"aten.mm": 2 * 16 * 32 * 8}, 16, "step")
    assert len(calls) == 1
    assert workload.precision is None


def test_a_step_without_products_or_convolutions_has_no_flops() -> None:
    x = torch.randn(100)
    assert flops.count([("step", lambda: x.relu())], 1, None) is None


def test_a_measurement_takes_the_flops_and_peak_of_the_sample_that_counted_them() -> None:
    """Only a benchmark's first sample counts FLOPs and finds the peak (they do not vary); the
    measurement's figures take them from there, over the median step time of all samples."""
    counted = StepFlops({"forward": 4 * 10**9}, {"aten.convolution": 4 * 10**9}, 2, "meta")
    stated = peak.find(CPU_DEVICE, "fp32", counted, STATED)
    assert stated == Peak("fp32", 1e12, "setting", "cnnperf_peak_tflops = 1")
    first = factories.sample(0.01, flops=counted, peak=stated)
    m = Measurement(2, (first, factories.sample(0.02), factories.sample(0.03)))
    assert (m.flops, m.peak) == (counted, stated)
    assert m.achieved_flops_per_s == pytest.approx(4e9 / 0.02)
    assert m.utilisation == pytest.approx(4e9 / 0.02 / 1e12)


def test_the_cpu_peak_is_measured_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peak, "CPU_MATRIX", 128)
    monkeypatch.setattr(peak, "_measured", {})
    calls = []
    real_mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda *a, **k: calls.append(1) or real_mm(*a, **k))
    counted = StepFlops({"forward": 10}, {"aten.convolution": 10}, 1, "meta")
    first = peak.find(CPU_DEVICE, "fp32", counted, None)
    assert first.source == "measured"
    assert first.flops_per_s is not None
    assert first.flops_per_s > 0
    assert first.detail.startswith("measured: torch.mm of two 128x128 fp32 matrices on ")
    made = len(calls)
    assert peak.CPU_MIN_CALLS + 1 <= made <= peak.CPU_MAX_CALLS + 1
    assert peak.find(CPU_DEVICE, "fp32", counted, None) == first
    assert len(calls) == made


# ---- peaks ----

FP32 = StepFlops({"forward": 10}, {"aten.convolution": 9, "aten.mm": 1}, 1, "meta")
MATMULS = StepFlops({"forward": 10}, {"aten.convolution": 1, "aten.mm": 9}, 1, "meta")
DEFAULT_FLAGS = Flags("on", True, False, "highest", False)


@pytest.mark.parametrize(
    ("name", "sms", "row"),
    [
        ("NVIDIA H200", 132, "NVIDIA H200 SXM"),
        ("NVIDIA H200 NVL", 132, "NVIDIA H200 NVL"),
        ("NVIDIA H100 80GB HBM3", 132, "NVIDIA H100 SXM5"),
        ("NVIDIA H100 PCIe", 114, "NVIDIA H100 PCIe"),
        ("NVIDIA H100 NVL", 132, "NVIDIA H100 NVL"),
        ("NVIDIA A100-SXM4-80GB", 108, "NVIDIA A100"),
        ("NVIDIA A100 80GB PCIe", 108, "NVIDIA A100"),
        ("NVIDIA L40S", 142, "NVIDIA L40S"),
        ("NVIDIA L4", 58, "NVIDIA L4"),
        ("NVIDIA A10", 72, "NVIDIA A10"),
        ("NVIDIA A40", 84, "NVIDIA A40"),
        ("Tesla T4", 40, "NVIDIA T4"),
        ("Tesla V100-SXM2-16GB", 80, "NVIDIA V100 SXM2"),
        ("Tesla V100-PCIE-32GB", 80, "NVIDIA V100 PCIe"),
        ("Tesla V100S-PCIE-32GB", 80, "NVIDIA V100S PCIe"),
        ("NVIDIA GeForce RTX 4090", 128, "NVIDIA GeForce RTX 4090"),
        ("NVIDIA GeForce RTX 3090", 82, "NVIDIA GeForce RTX 3090"),
        ("NVIDIA RTX A6000", 84, "NVIDIA RTX A6000"),
        ("NVIDIA RTX 6000 Ada Generation", 142, "NVIDIA RTX 6000 Ada Generation"),
    ],
)
def test_gpu_names_map_to_their_rows(name: str, sms: int, row: str) -> None:
    found = peaks.lookup(name, sms).row
    assert found is not None
    assert found.name == row
    assert peaks.lookup(name, None).row == found


@pytest.mark.parametrize(
    ("name", "sms", "problem"),
    [
        ("NVIDIA A10G", 80, "NVIDIA A10G is not in pytest-cnnperf's table of peaks"),
        ("NVIDIA L40", 142, "NVIDIA L40 is not in pytest-cnnperf's table of peaks"),
        ("NVIDIA GH200 480GB", 132, "NVIDIA GH200 480GB is not in pytest-cnnperf's table of peaks"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 76, "is not in pytest-cnnperf's table"),
        (
            "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
            42,
            "NVIDIA A100-SXM4-40GB MIG 3g.20gb has 42 SMs where the table's NVIDIA A100 has 108 "
            "(a MIG slice or a variant the table does not know)",
        ),
    ],
)
def test_an_unknown_gpu_gets_no_peak_and_the_reason(name: str, sms: int, problem: str) -> None:
    found = peaks.lookup(name, sms)
    assert found.row is None
    assert found.problem is not None
    assert problem in found.problem


def test_every_row_has_a_source_and_dense_figures_below_the_sparse_ones() -> None:
    for row in peaks.GPUS:
        assert row.source
        assert row.fp32 > 0
        tensor = [row.tf32, row.bf16, row.fp16]
        assert all(v is None or v >= row.fp32 for v in tensor), row.name
        if row.tf32 and row.bf16:
            assert row.bf16 == pytest.approx(2 * row.tf32, rel=0.02), row.name


def test_the_peak_of_a_gpu_follows_the_precision_and_the_tf32_switches() -> None:
    def find(
        precision: str | None, flags: Flags = DEFAULT_FLAGS, counted: StepFlops = FP32
    ) -> Peak:
        return peak.gpu_peak("NVIDIA H100 PCIe", 114, (9, 0), precision, counted, flags, None)

    bf16 = find("bf16")
    assert (bf16.precision, bf16.flops_per_s, bf16.source) == ("bf16", 756.5e12, "table")
    assert bf16.detail.startswith("NVIDIA H100 PCIe, dense bf16: NVIDIA H100 Tensor Core GPU")
    assert "unverified" not in bf16.detail
    # fp32 convolutions with cuDNN's TF32 switch on (its default) run on TF32 tensor cores
    assert find("fp32").precision == "tf32"
    assert find("fp32").flops_per_s == 378e12
    assert find("fp32", dataclasses.replace(DEFAULT_FLAGS, cudnn_tf32=False)).precision == "fp32"
    # with cuDNN off, convolutions are matrix products: the matmul switch decides
    off = dataclasses.replace(DEFAULT_FLAGS, cudnn_mode="off")
    assert find("fp32", off).precision == "fp32"
    assert find("fp32", dataclasses.replace(off, matmul_tf32=True)).precision == "tf32"
    assert find("fp32", DEFAULT_FLAGS, MATMULS).precision == "fp32"
    # before Ampere there is no TF32
    t4 = peak.gpu_peak("Tesla T4", 40, (7, 5), "fp32", FP32, DEFAULT_FLAGS, None)
    assert (t4.precision, t4.flops_per_s) == ("fp32", 8.1e12)
    no_bf16 = peak.gpu_peak("Tesla T4", 40, (7, 5), "bf16", FP32, DEFAULT_FLAGS, None)
    assert (no_bf16.flops_per_s, no_bf16.detail) == (None, "NVIDIA T4 has no bf16 tensor cores")


def test_an_unverified_row_says_so() -> None:
    found = peak.gpu_peak("NVIDIA H200", 132, (9, 0), "bf16", FP32, DEFAULT_FLAGS, None)
    assert found.flops_per_s == 989.5e12
    assert found.detail.endswith("; figure unverified")


def test_the_project_states_its_peak() -> None:
    setting = peaks.parse_peak_tflops("bf16=989,tf32=494")
    stated = peak.gpu_peak("NVIDIA A10G", 80, (8, 6), "bf16", FP32, DEFAULT_FLAGS, setting)
    assert stated == Peak("bf16", 989e12, "setting", "cnnperf_peak_tflops = bf16=989,tf32=494")
    fp16 = peak.gpu_peak("NVIDIA A10G", 80, (8, 6), "fp16", FP32, DEFAULT_FLAGS, setting)
    assert fp16.flops_per_s is None
    assert fp16.source == "unknown"
    custom = peak.gpu_peak("NVIDIA A10G", 80, (8, 6), None, FP32, DEFAULT_FLAGS, setting)
    assert custom.detail == "the precision of a measure() step is unknown"
    every = peak.gpu_peak("NVIDIA A10G", 80, (8, 6), None, FP32, DEFAULT_FLAGS, STATED)
    assert every.flops_per_s == 1e12


@pytest.mark.parametrize(
    ("text", "every", "named"),
    [
        ("312", 312.0, ()),
        ("bf16=989, tf32=494.5", None, (("bf16", 989.0), ("tf32", 494.5))),
        ("100,BF16=400", 100.0, (("bf16", 400.0),)),
    ],
)
def test_peak_tflops_is_a_number_or_figures_per_precision(
    text: str, every: float | None, named: tuple[tuple[str, float], ...]
) -> None:
    assert peaks.parse_peak_tflops(text) == peaks.PeakSetting(every, named)


@pytest.mark.parametrize("text", ["fast", "bf17=3", "-5", "bf16=", "0"])
def test_a_bad_peak_names_the_value_and_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        peaks.parse_peak_tflops(text)
    assert str(caught.value) == (
        f"{text!r} is not a peak in TFLOP/s; use TFLOP/s as a number for every precision "
        "(e.g. 312) or per precision, naming fp32, tf32, bf16, fp16 (e.g. bf16=989,tf32=494)"
    )


def test_a_bad_peak_in_the_ini_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ncnnperf_peak_tflops = lots\n")
    result = pytester.runpytest("--cnnperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini setting cnnperf_peak_tflops = 'lots': 'lots' is not a peak in TFLOP/s; use *"]
    )


# ---- energy ----


class FakeNvml:
    def __init__(self, millijoules: list[int]) -> None:
        self.readings = iter(millijoules)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        return next(self.readings)


class FakeClock:
    def __init__(self, *times: float) -> None:
        self.times = iter(times)

    def __call__(self) -> float:
        return next(self.times)


def test_nvml_energy_over_the_block_gives_joules_per_item_and_mean_power() -> None:
    probe = energy.EnergyProbe(
        energy.NvmlCounter(FakeNvml([1_000_000, 1_900_000]), "h"), FakeClock(10.0, 13.0)
    )
    probe.start()
    probe.stop()
    used = probe.energy(items=300)
    assert used == Energy(joules=900.0, seconds=3.0, items=300, source="nvml")
    assert used.joules_per_item == 3.0
    assert used.mean_power_w == 300.0
    assert used.long_enough


def test_a_gpu_without_an_energy_counter_has_no_probe() -> None:
    class Unsupported:
        def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
            raise RuntimeError("NVMLError_NotSupported")

    class Monitor:
        library, handle = Unsupported(), "h"

    assert energy.probe_for(torch.device("cuda", 0), Monitor()) is None
    assert energy.probe_for(torch.device("cuda", 0), None) is None


def rapl_tree(root: Path, zones: dict[str, tuple[str, int, int]]) -> None:
    """``zones``: folder -> (name, energy_uj, max_energy_range_uj)."""
    for folder, (name, value, top) in zones.items():
        path = root / "sys/class/powercap" / folder
        path.mkdir(parents=True)
        (path / "name").write_text(name + "\n")
        (path / "energy_uj").write_text(f"{value}\n")
        (path / "max_energy_range_uj").write_text(f"{top}\n")


def test_rapl_sums_the_packages_and_undoes_the_wraparound(tmp_path: Path) -> None:
    rapl_tree(
        tmp_path,
        {
            "intel-rapl:0": ("package-0", 999_000_000, 1_000_000_000),
            "intel-rapl:0:0": ("core", 5, 1_000_000_000),
            "intel-rapl:1": ("package-1", 10_000_000, 1_000_000_000),
            "intel-rapl:2": ("psys", 7, 1_000_000_000),
        },
    )
    counter = energy.RaplCounter.open(tmp_path)
    assert counter is not None
    probe = energy.EnergyProbe(counter, FakeClock(0.0, 0.5))
    probe.start()
    zones = tmp_path / "sys/class/powercap"
    (zones / "intel-rapl:0/energy_uj").write_text("2000000\n")  # wrapped: +1,000,001 + 2,000,000
    (zones / "intel-rapl:0:0/energy_uj").write_text("900000000\n")  # inside package 0
    (zones / "intel-rapl:1/energy_uj").write_text("14000000\n")  # +4,000,000
    probe.stop()
    used = probe.energy(items=10)
    assert used is not None
    assert used.joules == pytest.approx(3.000001 + 4.0)
    assert (used.source, used.seconds, used.items) == ("rapl", 0.5, 10)


def test_no_rapl_where_the_kernel_exposes_none_or_this_user_cannot_read_it(
    tmp_path: Path,
) -> None:
    assert energy.RaplCounter.open(tmp_path) is None
    rapl_tree(tmp_path, {"intel-rapl:0": ("package-0", 1, 100)})
    energy_file = tmp_path / "sys/class/powercap/intel-rapl:0/energy_uj"
    energy_file.unlink()
    energy_file.mkdir()  # a read fails as a root-only file's would
    assert energy.RaplCounter.open(tmp_path) is None


def test_no_cpu_energy_where_xdist_workers_share_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    rapl_tree(tmp_path, {"intel-rapl:0": ("package-0", 1, 1_000_000_000)})
    cpu = torch.device("cpu")
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)  # the suite's own workers
    assert energy.probe_for(cpu, root=tmp_path) is not None
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")  # the package's energy is both workers'
    assert energy.probe_for(cpu, root=tmp_path) is None


def test_the_probe_reads_the_counter_outside_the_timed_interval() -> None:
    events: list[str] = []

    class Clock:
        def sync(self) -> None:
            events.append("sync")

        def now(self) -> float:
            events.append("now")
            return 0.0

        def mark(self) -> float:
            return 0.0

        def seconds_between(self, start: float, end: float) -> float:
            return 0.0

    class Probe:
        def start(self) -> None:
            events.append("start")

        def stop(self) -> None:
            events.append("stop")

    time_block([("step", lambda: events.append("step"))], Clock(), 2, Probe())
    assert events == ["sync", "start", "now", "step", "step", "sync", "now", "stop"]


# ---- the figures in the reports ----


def sample(
    step: float,
    counted: StepFlops | None = None,
    found: Peak | None = None,
    used: Energy | None = None,
) -> Sample:
    return factories.sample(step, flops=counted, peak=found, energy=used)


H100 = Peak("bf16", 989.5e12, "table", "NVIDIA H100 SXM5, dense bf16: datasheet")
STEP_FLOPS = StepFlops(
    {"forward": 4 * 10**12, "backward": 8 * 10**12, "optimizer": 0}, {}, 64, "meta"
)


def efficient(
    name: str = "resnet50",
    found: Peak | None = H100,
    seconds: float = 3.0,
    amp: str | None = "bf16",
) -> Result:
    """A benchmark of 64 images a step at 0.1 s: 120 TFLOP/s, 400 J over ``seconds``."""
    cfg = BenchConfig("train_step", name, 64, (224, 224), amp=amp, optimizer="sgd")
    samples = (
        sample(0.1, STEP_FLOPS, found, Energy(200.0, seconds / 2, 1920, "nvml")),
        sample(0.1, used=Energy(200.0, seconds / 2, 1920, "nvml")),
    )
    return Result(
        config=cfg,
        test_id=f"tests/test_perf.py::test_train[{name}]",
        decision=Decision(Verdict.NEW),
        environment=ENV,
        measurement=Measurement(64, samples),
    )


def test_the_table_shows_flops_utilisation_and_energy_with_their_legend() -> None:
    lines = terminal.lines([efficient()])
    header, row = lines[2], lines[3]
    assert header.split()[-3:] == ["FLOP/s", "MFU", "energy"]
    assert row.endswith("120 TFLOP/s  12.1%  104 mJ/image at 133 W")
    assert table.efficiency_legend([efficient()]) == [
        "FLOP/s: the step's FLOPs as torch.utils.flop_counter counts them (convolutions and "
        "matrix products, 2 per multiply-add; the optimizer counts 0) over its step time; MFU: "
        "FLOP/s over the device's dense peak for the precision used",
        "peak (bf16): 990 TFLOP/s, NVIDIA H100 SXM5, dense bf16: datasheet",
        "energy: per image over the timed steps, and mean power, from NVML's energy counter of "
        "the GPU board (other processes on the GPU count too)",
    ]
    assert all(line in lines for line in table.efficiency_legend([efficient()]))


def test_columns_without_figures_are_left_out() -> None:
    plain = dataclasses.replace(
        efficient(),
        measurement=Measurement(64, (sample(0.1), sample(0.1))),
    )
    header = terminal.lines([plain])[2]
    assert "FLOP/s" not in header
    assert "MFU" not in header
    assert "energy" not in header
    assert table.efficiency_legend([plain]) == []


def test_an_unknown_peak_and_a_short_energy_window_are_said_so() -> None:
    unknown = Peak("bf16", None, "unknown", "NVIDIA A10G is not in pytest-cnnperf's table of peaks")
    result = efficient(found=unknown, seconds=1.2)
    row = table.row(result)
    assert (row.flops, row.mfu, row.energy) == ("120 TFLOP/s", "-", "-")
    assert row.notes == (
        "energy not shown: the timed steps lasted 1.20 s in all, under the 2 s the NVML energy "
        "counter needs (it advances every 20 to 100 ms); give each sample more time with "
        "cnnperf_min_time",
    )
    assert (
        "peak unknown (bf16): NVIDIA A10G is not in pytest-cnnperf's table of peaks; state it "
        "with cnnperf_peak_tflops" in table.efficiency_legend([result])
    )


def test_measured_cpu_peaks_are_shown_as_a_range() -> None:
    def measured(value: float) -> Peak:
        return Peak("fp32", value, "measured", "measured: torch.mm of two 2048x2048 fp32 ...")

    results = [efficient("a", measured(90e9)), efficient("b", measured(100e9))]
    assert table.efficiency_legend(results)[1] == (
        "peak (fp32): 90.0 GFLOP/s to 100 GFLOP/s, measured: torch.mm of two 2048x2048 fp32 ..."
    )


def test_markdown_has_the_efficiency_columns_and_legend() -> None:
    text = markdown.render([efficient()])
    assert "| FLOP/s | MFU | energy |" in text
    assert "| 120 TFLOP/s | 12.1% | 104 mJ/image at 133 W |" in text
    assert "_peak (bf16): 990 TFLOP/s, NVIDIA H100 SXM5, dense bf16: datasheet_" in text


def test_results_files_carry_flops_peak_and_energy() -> None:
    document = RESULTS.dump(ResultsFile("now", "m", (efficient(),)))
    samples = document["results"][0]["measurement"]["samples"]
    assert samples[0]["flops"] == {
        "items": 64,
        "method": "meta",
        "operators": {},
        "phases": {"backward": 8 * 10**12, "forward": 4 * 10**12, "optimizer": 0},
    }
    assert samples[0]["peak"]["source"] == "table"
    assert samples[1]["energy"] == {
        "items": 1920,
        "joules": 200.0,
        "seconds": 1.5,
        "source": "nvml",
    }
    loaded = RESULTS.load(json.loads(json.dumps(document)))
    assert loaded.results[0] == efficient()


def test_compare_and_modes_show_achieved_flops_per_side_and_mode() -> None:
    old, new = efficient(), efficient()
    new_m = new.measurement
    assert new_m is not None
    faster = dataclasses.replace(
        new,
        measurement=dataclasses.replace(
            new_m, samples=tuple(dataclasses.replace(s, step_time_s=0.05) for s in new_m.samples)
        ),
    )
    settings = compare.settings_for([], None)
    pairs, matching = compare.compare([old], [faster], settings, QUIET)
    loaded = Loaded(Path("old.json"), "results", ())
    lines = compare.lines(loaded, loaded, pairs, matching, settings, QUIET)
    header = next(line for line in lines if line.startswith("test "))
    assert header.split()[-5:] == ["old", "FLOP/s", "new", "FLOP/s", "verdict"]
    row = next(line for line in lines if line.startswith("test_train[resnet50]"))
    assert "+0.0%  120 TFLOP/s  240 TFLOP/s" in row
    fp32 = efficient(amp=None)
    table_ = modes.build([fp32, faster])
    assert table_ is not None
    text = "\n".join(modes.lines(table_))
    assert "FLOP/s: the step's counted FLOPs over its step time" in text
    assert "100.0 ms  120 TFLOP/s" in text
    assert "50.0 ms  2.00x  240 TFLOP/s" in text


def test_epoch_adds_energy_per_epoch_where_it_was_measured() -> None:
    lines = epoch.lines([efficient()], epoch.IMAGENET_1K, "ImageNet-1k")
    assert lines[2].split()[-1] == "energy"
    # 400 J for 3,840 images, times 1,281,167 images
    assert lines[3].endswith("133 kJ")
    short = epoch.lines([efficient(seconds=1)], 1000, None)
    assert "energy" not in short[2]


def test_the_plot_draws_utilisation_per_benchmark(tmp_path: Path) -> None:
    unknown = Peak("bf16", None, "unknown", "not in the table")
    picture = plot.picture([efficient("a"), efficient("b", unknown)], {})
    assert [b.utilisation for b in picture.benches] == [pytest.approx(0.1213, abs=1e-4), None]
    assert [b.flops_per_s for b in picture.benches] == [pytest.approx(120e12)] * 2
    path = tmp_path / "efficiency.svg"
    plot.draw(picture, path)
    assert "utilisation of the peak (MFU)" in path.read_text()


def test_the_command_shows_the_efficiency_of_a_results_file(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(RESULTS.dump(ResultsFile("now", "m", (efficient(),)))))
    out = io.StringIO()
    assert main(["show", str(path)], out=out) == 0
    assert "120 TFLOP/s  12.1%  104 mJ/image at 133 W" in out.getvalue()


# ---- through a session, on scripted samples ----

BENCH = """
from models import Sleepy

def test_a(cnnperf):
    cnnperf.train_step(Sleepy(), batch_size=2, image_size=8)
"""
#: a step of 2 images, 1.5 GFLOPs each: at the scripted 10 ms, 300 GFLOP/s
SCRIPTED_FLOPS = StepFlops(
    {"forward": 10**9, "backward": 2 * 10**9, "optimizer": 0},
    {"aten.convolution": 3 * 10**9},
    2,
    "meta",
)
SCRIPTED_PEAK = Peak("fp32", 1e12, "setting", "cnnperf_peak_tflops = 1")


def scripted_efficiency(looks: list[int]) -> Scripted:
    """Samples that carry FLOPs and the peak where a real sampler would count them (the first
    ``target.counted_samples`` of a look), and 0.6 J over 40 ms of RAPL energy each (75 mJ per
    image at 15 W); ``looks`` gets each look's ``counted_samples``."""

    def decorate(target: Target, i: int, sample: Sample) -> Sample:
        if i == 0:
            looks.append(target.counted_samples)
        counted = i < target.counted_samples
        return dataclasses.replace(
            sample,
            flops=SCRIPTED_FLOPS if counted else None,
            peak=SCRIPTED_PEAK if counted else None,
            energy=Energy(0.6, 0.04, 8, "rapl"),
        )

    return Scripted(Script(decorate=decorate))


@pytest.fixture
def five_samples(project: pytest.Pytester) -> pytest.Pytester:
    """At most five samples (looks after three and five): the scripted spread's median is its
    step time at each look."""
    project.makeini(
        "[pytest]\ncnnperf_samples = 5\ncnnperf_calibration = false\ncnnperf_attribution = off\n"
    )
    project.makepyfile(test_net=BENCH)
    return project


def test_a_session_shows_the_flops_mfu_and_energy_its_samples_carry(
    five_samples: pytest.Pytester,
) -> None:
    looks: list[int] = []
    result = five_samples.runpytest(
        "--cnnperf",
        "--cnnperf-json=run.json",
        "--cnnperf-markdown=summary.md",
        plugins=[scripted_efficiency(looks)],
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "verdict*throughput*peak mem*FLOP/s*MFU*energy",
            "new*test_a*200 images/s*300 GFLOP/s  30.0%  75.0 mJ/image at 15 W",
            "",
            "FLOP/s: the step's FLOPs as torch.utils.flop_counter counts them*",
            "peak (fp32): 1.00 TFLOP/s, cnnperf_peak_tflops = 1",
            "energy: per image over the timed steps, and mean power, from RAPL's energy counters "
            "of the CPU packages (other processes count too)",
        ]
    )
    markdown_text = (five_samples.path / "summary.md").read_text()
    assert "| FLOP/s | MFU | energy |" in markdown_text
    assert "| 300 GFLOP/s | 30.0% | 75.0 mJ/image at 15 W |" in markdown_text
    document: Any = json.loads((five_samples.path / "run.json").read_text())
    samples = document["results"][0]["measurement"]["samples"]
    assert looks == [1]
    first, *rest = samples
    assert {"flops", "peak", "energy"} <= set(first)
    # a benchmark without a baseline: its first look's three samples are the result
    assert [sorted({"flops", "peak", "energy"} & set(s)) for s in rest] == [["energy"]] * 2


def test_a_benchmark_measured_again_counts_its_flops_once(five_samples: pytest.Pytester) -> None:
    """A benchmark measured again before its verdict (here: 10% slower, which the first look
    of three samples cannot tell from the threshold) does not count its FLOPs again in the
    later samples; its reports still show them."""
    looks: list[int] = []
    scripted = scripted_efficiency(looks)
    five_samples.runpytest("--cnnperf", "--cnnperf-save", plugins=[scripted]).assert_outcomes(
        passed=1
    )
    scripted.slow_down("test_a", 1.1)
    result = five_samples.runpytest("--cnnperf", "--cnnperf-json=run.json", plugins=[scripted])
    result.stdout.fnmatch_lines(["*test_a*GFLOP/s  *%*"])
    assert [count for test, count in scripted.script.taken] == [9, 3, 2]
    assert looks == [1, 1, 0]  # saved; the first look, then the second
    document: Any = json.loads((five_samples.path / "run.json").read_text())
    samples = document["results"][0]["measurement"]["samples"]
    assert len(samples) == 5
    assert ["flops" in s for s in samples] == [True] + [False] * 4


# ---- end to end ----


def test_a_run_reports_flops_and_utilisation_against_the_stated_peak(
    project: pytest.Pytester,
) -> None:
    project.makeini(
        """
        [pytest]
        cnnperf_inprocess = true
        cnnperf_samples = 2
        cnnperf_min_time = 0.05
        cnnperf_attribution = off
        cnnperf_calibration = false
        cnnperf_peak_tflops = 0.001
        """
    )
    project.makepyfile(
        test_net=textwrap.dedent(
            """
            from models import Sleepy

            def test_a(cnnperf):
                cnnperf.train_step(Sleepy(), batch_size=4, image_size=16)
            """
        )
    )
    result = project.runpytest("--cnnperf", "--cnnperf-json=run.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "verdict*throughput*FLOP/s*MFU*",
            "new*test_a*MFLOP/s*%*",
            "FLOP/s: the step's FLOPs as torch.utils.flop_counter counts them*",
            "peak (fp32): 1.00 GFLOP/s, cnnperf_peak_tflops = 0.001",
        ]
    )
    document: Any = json.loads((project.path / "run.json").read_text())
    first, second = document["results"][0]["measurement"]["samples"]
    # the sleepy model's conv: 4 images of 16x16, 3 -> 4 channels, 3x3; its linear layer: 4 -> 10
    assert first["flops"]["phases"]["forward"] == 2 * 4 * 4 * 3 * 9 * 16 * 16 + 2 * 4 * 4 * 10
    assert (first["flops"]["method"], first["flops"]["items"]) == ("meta", 4)
    assert first["peak"] == {
        "detail": "cnnperf_peak_tflops = 0.001",
        "flops_per_s": 1e9,
        "precision": "fp32",
        "source": "setting",
    }
    # counted in the first sample only (a results file leaves out a field that is not set)
    assert "flops" not in second
    assert "peak" not in second
