"""The GPU check's path on the CPU: what tests/test_cuda.py expects of keys, messages and sample
counts, checked against the code as a CUDA run takes it (the cnnperf fixture passes the cuDNN
mode in force), and scripts/gpu-check's stages: the work each limit is derived from, the wall
time each prints, and the limits against the device call's 10 minutes."""

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


def test_the_keys_and_lines_the_cuda_tests_expect_are_a_cuda_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session takes a CUDA run's branches (the cnnperf fixture passes the cuDNN mode in
    force, cuda_graphs=True is accepted) while it measures on the CPU, where each step fails
    with its key in the message."""
    monkeypatch.setattr(Session, "device_type", property(lambda self: "cuda"))
    pytester.makepyfile(
        f"""
        import torch
        from torch import nn

        def convnet(num_classes=10):
            return nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes),
            )

        class OutOfMemory(nn.Linear):
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
            cnnperf.train_step(
                nn.Sequential(OutOfMemory(3, 10)), batch_size={cuda_tests.OOM_BATCH},
                image_size={cuda_tests.OOM_SIZE}, num_classes=10,
            )
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


def test_the_against_test_expects_the_samples_the_gpus_design_takes() -> None:
    """A paired run of 6 samples at the GPU's design looks once, after 6 of each side; a memory
    change past its threshold, measured once there, takes a pair more of each side."""
    assert cuda_tests.against_samples("ok") == 6
    assert cuda_tests.against_samples("regressed") == 8


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
PLANNED = re.compile(r"^  (\S+) +limit +(\d+) s, estimated +(\d+) s: (.+)$")
CALLS = {
    (): ["machine", "cuda-tests", "attribution", "truth"],
    ("--extra",): ["machine", "compiled", "efficiency", "doctor"],
    ("--zoo",): ["machine", "zoo", "against"],
}


def gpu_check(
    tmp_path: Path, *args: str, out: str | None = "out", code: int = 0, **env: str
) -> tuple[str, list[str]]:
    """Run scripts/gpu-check from ``tmp_path`` with a python and a timeout that only say what
    they were asked (``out``: the output folder given, relative to ``tmp_path``)."""
    bin = tmp_path / "bin"
    bin.mkdir(exist_ok=True)
    for name, text in (("python", FAKE_PYTHON), ("timeout", FAKE_TIMEOUT)):
        (bin / name).write_text(text)
        (bin / name).chmod(0o755)
    log = tmp_path / "log"
    log.write_text("")
    environment = {
        **{k: v for k, v in os.environ.items() if k not in ("OUT", "CC")},
        "PATH": f"{bin}{os.pathsep}{os.environ['PATH']}",
        "PYTHON": str(bin / "python"),
        "FAKE_LOG": str(log),
        **env,
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check"), *args, *([out] if out else [])],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == code, done.stdout + done.stderr
    return done.stdout + done.stderr, log.read_text().splitlines()


def planned(out: str) -> dict[str, tuple[int, int, str]]:
    """The dry run's stages: limit, estimate and the work it is derived from."""
    return {m[1]: (int(m[2]), int(m[3]), m[4]) for m in map(PLANNED.match, out.splitlines()) if m}


def test_each_limit_is_derived_from_the_work_its_stage_counts(tmp_path: Path) -> None:
    """The dry run names each stage's work (processes, samples, counting passes) at the cost
    per unit stated once in the script; the estimate is their sum, the limit a quarter more
    (at least 10 s), and each call's limits fit the device call."""
    script = (ROOT / "scripts" / "gpu-check").read_text()
    units = {
        name.lower().replace("_", "-"): int(value)
        for name, value in re.findall(r"^([A-Z0-9_]+)=(\d+) +#", script, re.MULTILINE)
    }
    for args, stages in CALLS.items():
        out, calls = gpu_check(tmp_path, *args, "--dry-run")
        assert calls == []  # nothing ran
        plan = planned(out)
        assert list(plan) == stages, out
        for stage, (limit, estimate, work) in plan.items():
            terms = [re.fullmatch(r"(\d+) (\S+) x (\d+) s", t) for t in work.split(" + ")]
            assert all(terms), work
            assert all(units[t[2]] == int(t[3]) for t in terms if t), work
            assert estimate == sum(int(t[1]) * int(t[3]) for t in terms if t), stage
            assert limit >= estimate + max(estimate / 4, 10), stage
        total = sum(limit for limit, _, _ in plan.values())
        assert f"  total: {total} s of the {CALL_S} s a device call may plan" in out
        assert total <= CALL_S


def test_the_against_stage_counts_the_samples_the_design_takes(tmp_path: Path) -> None:
    """Two runs of the against test: the slower commit's, with its memory pair, and the
    parent against itself; each side's samples from the design."""
    out, _ = gpu_check(tmp_path, "--zoo", "--dry-run")
    work = planned(out)["against"][2]
    samples = 2 * cuda_tests.against_samples("regressed") + 2 * cuda_tests.against_samples("ok")
    assert f" + {samples} sample x " in work


@pytest.mark.parametrize("args", list(CALLS), ids=["default", "extra", "zoo"])
def test_each_stage_prints_its_time_and_runs_under_its_limit(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    out, calls = gpu_check(tmp_path, *args)
    ended = [m for m in map(STAGE.match, out.splitlines()) if m]
    assert [m[1] for m in ended] == CALLS[args], out
    dry, _ = gpu_check(tmp_path, *args, "--dry-run")
    plan = planned(dry)
    assert {m[1]: (int(m[3]), int(m[4])) for m in ended} == {
        stage: (limit, estimate) for stage, (limit, estimate, _) in plan.items()
    }
    # every command runs under what is left of its stage's limit, nvidia-smi under 10 s
    timeouts = [int(c.split()[1]) for c in calls if c.startswith("timeout ")]
    assert timeouts[0] == 10
    assert max(timeouts) <= max(limit for limit, _, _ in plan.values())
    for stage, (limit, _, _) in plan.items():
        if stage != "machine":  # a stage's first command gets the whole limit (bash's
            # $SECONDS may tick between the stage's start and the command: a second less)
            assert limit in timeouts or limit - 1 in timeouts, stage


def test_chosen_stages_run_alone_and_a_call_that_cannot_fit_is_refused(tmp_path: Path) -> None:
    """``--stages`` runs again what failed (after ``machine``); stages whose limits exceed one
    device call, or a stage unknown, are refused, naming the fix."""
    out, calls = gpu_check(tmp_path, "--stages", "cuda-tests,directions")
    assert [m[1] for m in map(STAGE.match, out.splitlines()) if m] == [
        "machine",
        "cuda-tests",
        "directions",
    ]
    assert any("scripts/truth-check --only-directions" in c for c in calls)
    out, calls = gpu_check(tmp_path, "--stages", "truth,compiled", code=2)
    assert calls == []
    assert (
        "gpu-check: the stages chosen (machine truth compiled) plan 560 s of limits, more " in out
    )
    assert "split them over two calls with --stages" in out
    out, _ = gpu_check(tmp_path, "--stages", "truth,zoo-test", code=2)
    assert out.startswith(
        "gpu-check: unknown stage 'zoo-test' in --stages; the stages are cuda-tests, attribution,"
    )
    assert out.rstrip().endswith("e.g. --stages cuda-tests,truth")


def test_the_output_folder_is_out_by_default_and_always_absolute(tmp_path: Path) -> None:
    """A relative folder is the caller's (the zoo's pytest runs inside it and writes its JSON
    there by the absolute path); without one, $OUT, the device machine's folder that comes
    back."""
    _, calls = gpu_check(tmp_path, "--zoo", out="relative")
    (zoo,) = [c for c in calls if "pytest_cnnperf.zoo" in c]
    assert f"--cnnperf-json={tmp_path}/relative/zoo.json" in zoo
    assert (tmp_path / "relative").is_dir()
    _, calls = gpu_check(tmp_path, out=None, OUT=str(tmp_path / "device-out"))
    (truth,) = [c for c in calls if "scripts/truth-check" in c]
    assert f"--out {tmp_path}/device-out/truth" in truth


def test_without_a_c_compiler_the_compiled_stage_says_so_and_fails(tmp_path: Path) -> None:
    out, calls = gpu_check(tmp_path, "--stages", "compiled", code=1, CC="no-such-cc")
    assert (
        "gpu-check: no C compiler ($CC, gcc or clang): Triton builds compile='s kernels with one; "
        "install gcc (apt-get install gcc) or set CC to one, then run --stages compiled again"
    ) in out
    assert not any("test_compiled_gpu.py" in c for c in calls)
    dry, _ = gpu_check(tmp_path, "--extra", "--dry-run", CC="no-such-cc")
    assert "note: no C compiler here ($CC, gcc or clang): the compiled stage would fail" in dry


def test_the_cuda_tests_run_in_file_order_with_each_tests_time(tmp_path: Path) -> None:
    """The test that asserts no other process used the GPU runs before any test starts CUDA in
    the pytest process; each test's name and time are printed, and a hung one's traceback."""
    _, calls = gpu_check(tmp_path)
    (tests,) = [c for c in calls if "tests/test_cuda.py" in c and "not extra_convolution" in c]
    assert "not against_a_revision" in tests  # the third call's
    for option in ("-p no:randomly", " -v ", "--durations=0", "faulthandler_timeout=60"):
        assert option in tests


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
