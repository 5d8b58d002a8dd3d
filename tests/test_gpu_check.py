"""The GPU check's path on the CPU: what tests/test_cuda.py expects of keys and messages, checked
against the code as a CUDA run takes it (the cnnperf fixture passes the cuDNN mode in force), and
scripts/gpu-check's stages: the wall time each prints, its limit against its estimate, and the
limits against the device call's 10 minutes."""

from __future__ import annotations

import importlib.machinery
import os
import re
import subprocess
import types
from pathlib import Path

import factories
import pytest
import test_cuda as cuda_tests
import torch
import torch.nn.functional as F
import torchvision

from pytest_cnnperf.measuring import device, flops
from pytest_cnnperf.model import BenchConfig, Peak, StepFlops
from pytest_cnnperf.sampling.xdist import check_gpus
from pytest_cnnperf.session import Session
from pytest_cnnperf.store import results_file

ROOT = Path(__file__).resolve().parent.parent
#: what one call of a lent device (600 s) may plan: a slower run than estimated must still end
#: inside the call, or the session's GPU budget is spent
CALL_S = 480
#: each stage's limit over its estimate
MARGIN = 1.25


def test_the_keys_and_lines_the_cuda_tests_expect_are_a_cuda_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session takes a CUDA run's branches (the cnnperf fixture passes the cuDNN mode in
    force, cuda_graphs=True is accepted) while it measures on the CPU, where each step fails
    with its key in the message."""
    monkeypatch.setattr(Session, "device_type", property(lambda self: "cuda"))
    pytester.makepyfile(
        """
        import torch
        from torch import nn

        def convnet(num_classes=10):
            return nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes),
            )

        class OutOfMemory(nn.Module):
            def forward(self, x):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")

        def test_graphed(cnnperf):
            cnnperf.train_step(
                convnet(), batch_size=32, image_size=32, amp="bf16", optimizer="adam",
                cuda_graphs=True,
            )

        def test_graphed_inference(cnnperf):
            cnnperf.inference(convnet(), batch_size=32, image_size=32, cuda_graphs=True)

        def test_too_big(cnnperf):
            cnnperf.train_step(nn.Sequential(OutOfMemory()), batch_size=1, image_size=512)
        """
    )
    result = pytester.runpytest("--cnnperf", "--cnnperf-inprocess", "-p", "no:randomly")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            f"cnnperf: measuring {cuda_tests.GRAPHED_KEY} on cpu failed: *",
            f"cnnperf: measuring {cuda_tests.GRAPHED_INFERENCE_KEY} on cpu failed: *",
            cuda_tests.OUT_OF_MEMORY.replace(" on cuda:0 ", " on cpu "),
        ]
    )


def test_a_missing_cuda_index_reads_as_the_cuda_test_expects(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device, "cuda_device_count", lambda: 1)
    pytester.makepyfile("def test_x(cnnperf):\n    pass\n")
    result = pytester.runpytest("--cnnperf", "--cnnperf-device=cuda:1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([cuda_tests.missing_index(1)])


def test_too_many_xdist_workers_read_as_the_cuda_test_expects() -> None:
    with pytest.raises(pytest.UsageError) as raised:
        check_gpus(2, 1, "cuda", None)
    assert re.fullmatch(
        cuda_tests.too_many_workers(1).replace("*", ".*"), str(raised.value), re.DOTALL
    )


def test_the_forward_flops_the_cuda_test_expects_are_counted() -> None:
    images, targets = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    phases, _ = flops.count_train_on_meta(
        cuda_tests.flops_model(), images, targets, F.cross_entropy
    )
    assert phases["forward"] == cuda_tests.FLOPS_FORWARD


# ---- scripts/gpu-check ----

FAKE_PYTHON = """#!/bin/sh
echo "python $*" >> "$FAKE_LOG"
[ "$1" = "-" ] && cat > /dev/null
exit 0
"""
FAKE_TIMEOUT = """#!/bin/sh
echo "timeout $1" >> "$FAKE_LOG"
shift
exec "$@"
"""
STAGE = re.compile(r"^-- (.+): (\d+) s \(limit (\d+) s, estimated (\d+) s\), \d\d:\d\d:\d\d$")


def gpu_check(tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """Run scripts/gpu-check with a python and a timeout that only say what they were asked."""
    bin = tmp_path / "bin"
    bin.mkdir()
    for name, text in (("python", FAKE_PYTHON), ("timeout", FAKE_TIMEOUT)):
        (bin / name).write_text(text)
        (bin / name).chmod(0o755)
    log = tmp_path / "log"
    log.touch()
    env = {
        **os.environ,
        "PATH": f"{bin}{os.pathsep}{os.environ['PATH']}",
        "PYTHON": str(bin / "python"),
        "FAKE_LOG": str(log),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check"), *args, str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, log.read_text().splitlines()


@pytest.mark.parametrize(
    ("mode", "stages"),
    [
        ((), ["machine", "CUDA tests", "attribution", "short zoo", "truth table"]),
        (
            ("--extra",),
            ["machine", "compiled training", "efficiency", "against a revision", "cnnperf doctor"],
        ),
    ],
)
def test_each_stage_prints_its_time_and_fits_the_device_call(
    tmp_path: Path, mode: tuple[str, ...], stages: list[str]
) -> None:
    out, calls = gpu_check(tmp_path, *mode)
    ended = [m for m in map(STAGE.match, out.splitlines()) if m]
    assert [m[1].split(":")[0] for m in ended] == stages, out
    limits = {m[1]: int(m[3]) for m in ended}
    for m in ended:
        assert int(m[3]) >= MARGIN * int(m[4]), m[0]  # a quarter over the estimate, at least
    # the limits printed are the ones the commands ran under, and they fit the call
    timeouts = [int(c.split()[1]) for c in calls if c.startswith("timeout ")]
    assert sum(timeouts) == sum(limits.values())
    assert all(limit in timeouts for stage, limit in limits.items() if stage != "machine")
    assert sum(limits.values()) <= CALL_S


def test_the_cuda_tests_run_in_file_order(tmp_path: Path) -> None:
    """The test that asserts no other process used the GPU runs before any test starts CUDA in
    the pytest process."""
    _, calls = gpu_check(tmp_path)
    (tests,) = [c for c in calls if "tests/test_cuda.py" in c and "not extra_convolution" in c]
    assert "not against_a_revision" in tests  # the second call's
    assert "-p no:randomly" in tests


def test_the_cpu_table_prints_its_time(tmp_path: Path) -> None:
    out, calls = gpu_check(tmp_path, "--cpu")
    assert re.search(r"^-- truth table on the CPU: \d+ s, \d\d:\d\d:\d\d$", out, re.MULTILINE), out
    assert any(c.startswith("python scripts/truth-check --cpu") for c in calls)


def test_ci_runs_the_cpu_table_on_one_model_and_round(tmp_path: Path) -> None:
    _, calls = gpu_check(tmp_path, "--cpu", "--advisory-timing", "--quick")
    (truth,) = [c for c in calls if "scripts/truth-check" in c]
    assert truth.endswith("--advisory-timing --models resnet18 --rounds 1")


def test_the_efficiency_stage_checks_the_counted_forward_against_torchvision(
    tmp_path: Path,
) -> None:
    """gpu-check --extra's last figures: ResNet-50's counted forward within 5% of torchvision's
    published multiply-adds (twice them in FLOPs), beside its TFLOPS, MFU and energy; one
    benchmark 50% off fails the check."""
    items = 4
    published = torchvision.models.get_model_weights("resnet50").DEFAULT.meta["_ops"]
    stated = Peak("fp32", 1e12, "setting", "cnnperf_peak_tflops = 1")
    results, lines = [], []
    for size, ratio in ((224, 1.0), (232, 1.5)):
        forward = round(ratio * published * 2e9 * items)
        counted = StepFlops({"forward": forward, "backward": 2 * forward}, {}, items, "meta")
        config = BenchConfig(
            kind="train_step", model="resnet50", batch_size=items, image_size=(size, size)
        )
        results.append(factories.result([0.1, 0.1, 0.1], config=config, flops=counted, peak=stated))
        mfu = 3 * forward / 0.1 / 1e12  # forward and backward counted, 0.1 s a step, 1 TFLOP/s
        lines += [
            f"{config.key}: 40 images/s",
            f"  TFLOPS {mfu:.1f} ({3 * forward / items / 1e9:.2f} GFLOP/image counted on meta; "
            f"forward / torchvision's _ops x 2 = {ratio:.4f})",
            f"  MFU {mfu:.1%} of 1 TFLOP/s fp32 (cnnperf_peak_tflops = 1)",
            "  J/image: - (no NVML energy counter: is nvidia-ml-py installed?)",
        ]
    report = tmp_path / "efficiency.json"
    results_file.write(report, results, "machine")
    # the script's check, loaded in-process (a fresh python would import torch again)
    loader = importlib.machinery.SourceFileLoader(
        "efficiency", str(ROOT / "scripts" / "efficiency")
    )
    script = types.ModuleType(loader.name)
    loader.exec_module(script)
    found, failed = script.check_lines(report)
    assert failed
    assert found == lines
