"""scripts/truth-check's logic on the CPU, with fakes for the GPU: what its gate lines count as a
catch, the slowdown they inject, the samples they take, the GPU they leave to the sample
processes, a second run into the same folder, and the memory line's two sides measured alike."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_cnnperf.gate.decide import combine
from pytest_cnnperf.gate.policy import CUDA, GateSettings, gate_policy
from pytest_cnnperf.gate.throughput import compare_throughput
from pytest_cnnperf.measuring import memory
from pytest_cnnperf.model import BenchConfig, Comparison, Decision, Result, Verdict
from pytest_cnnperf.settings import MEMORY_THRESHOLD, THRESHOLD
from pytest_cnnperf.store import results_file

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "truth-check"
SPIN = {"cycles": 4_000_000, "slowdown": 1.104}
ONE_GPU = {"count": 1, "cuda": "12.8", "name": "NVIDIA H200", "capability": [9, 0]}


@pytest.fixture
def truth(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module (its name has no ``.py``)."""
    loader = importlib.machinery.SourceFileLoader("truth_check", str(SCRIPT))
    spec = importlib.util.spec_from_loader("truth_check", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "truth_check", module)  # its dataclasses look it up
    loader.exec_module(module)
    return module


def comparison(metric: str, verdict: Verdict, samples: int) -> Comparison:
    return Comparison(
        metric=metric,
        baseline=1.0,
        current=1.1,
        change=0.1,
        threshold=0.05,
        verdict=verdict,
        baseline_samples=6,
        current_samples=samples,
    )


def result(run: str, step: Verdict, peak: Verdict, samples: int) -> Result:
    verdict = combine(step, peak)
    return Result(
        test_id=f"test_gate.py::test_gate[{run}]",
        config=BenchConfig("train_step", "gate", 64, (224, 224), optimizer="sgd", cudnn_mode="on"),
        decision=Decision(
            verdict=verdict,
            throughput=comparison("throughput", step, samples),
            memory=comparison("memory", peak, samples),
            failed=verdict is Verdict.REGRESSED,
        ),
    )


class FakeGpu:
    """What the script asks of processes and pytest runs, answered without a GPU: the probes'
    and the spin search's JSON, a saved baseline, and the gate run's results (``slow``: the
    verdicts of the slowed runs' step time and memory, and their samples)."""

    def __init__(self, slow: tuple[Verdict, Verdict, int] | None) -> None:
        self.slow = slow
        self.sources: list[str] = []
        self.pytest_args: list[list[str]] = []

    def run(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert command[:2] == [sys.executable, "-c"], command
        self.sources.append(command[2])
        answer = SPIN if "TRUTH_SEARCH" in command[2] else ONE_GPU
        return subprocess.CompletedProcess(command, 0, json.dumps(answer) + "\n", "")

    def run_pytest(
        self,
        folder: Path,
        module: str,
        source: str,
        args: list[str],
        env: dict[str, str],
        log: Path,
    ) -> int:
        self.pytest_args.append(args)
        log.write_text("")
        if module != "test_gate":
            return 1  # the reference run: no rows, its lines say "not measured"
        baselines = Path(
            next(a for a in args if a.startswith("--cnnperf-baselines=")).split("=")[1]
        )
        if "--cnnperf-save" in args:
            saved = baselines / "nvidia-h200" / "test_gate.json"
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps({"entries": {"test_gate[base]": {"saved": True}}}))
            return 0
        if self.slow is None:
            return 1  # the run died: it wrote no results
        step, peak, samples = self.slow
        results = [result(f"same-{i}", Verdict.OK, Verdict.OK, 3) for i in range(1, 4)]
        results += [result(f"slow-{i}", step, peak, samples) for i in range(1, 4)]
        path = Path(next(a for a in args if a.startswith("--cnnperf-json=")).split("=")[1])
        results_file.write(path, results, "nvidia-h200")
        return 1 if step is Verdict.REGRESSED or peak is Verdict.REGRESSED else 0


@pytest.fixture
def no_cuda_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A machine with one GPU, as this process sees it: counting it is allowed (NVML), starting
    CUDA is not; what tried to start it is listed."""
    started: list[str] = []

    def lazy_init() -> None:
        started.append("torch.cuda._lazy_init")
        raise AssertionError("the truth-check process started CUDA")

    monkeypatch.setattr(torch.cuda, "_lazy_init", lazy_init)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    return started


def use(truth: ModuleType, fake: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(truth, "subprocess", SimpleNamespace(run=fake.run, TimeoutExpired=OSError))
    monkeypatch.setattr(truth, "run_pytest", fake.run_pytest)
    # nvidia-ml-py may be installed here, but there is no driver to answer it
    monkeypatch.setattr(truth, "check_imports", lambda: ([], {"pynvml"}))


def lines_by_check(lines: list[Any]) -> dict[str, Any]:
    return {line.check: line for line in lines}


@pytest.mark.parametrize(
    ("slow", "caught", "outcome"),
    [
        # extra images: memory regressed at the first look, which stops the re-measure, and 3
        # samples against 6 can never show a step-time regression: not a catch
        ((Verdict.INCONCLUSIVE, Verdict.REGRESSED, 3), "step time caught 0 of 3", "fail"),
        ((Verdict.REGRESSED, Verdict.OK, 6), "step time caught 3 of 3", "pass"),
    ],
)
def test_a_catch_is_the_step_time_comparisons_own_regression(
    truth: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    no_cuda_here: list[str],
    slow: tuple[Verdict, Verdict, int],
    caught: str,
    outcome: str,
) -> None:
    use(truth, FakeGpu(slow), monkeypatch)
    lines = lines_by_check(truth.gate_lines(truth.CUDA_SETUP, tmp_path, set()))
    line = lines["gate defaults: +10% step caught"]
    assert line.measured.startswith(caught), line
    assert f"at {slow[2]} samples" in line.measured
    assert line.result == outcome
    assert lines["gate defaults: 3 identical re-runs"].result == "pass"


def test_the_injected_slowdown_is_a_gpu_spin_that_allocates_nothing(
    truth: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slowed model runs on the very batch it is given (extra images concatenated to it grew
    ResNet-18's peak by 11% and the memory gate answered first), after a spin of the GPU."""
    env = {
        "TRUTH_SPIN_CYCLES": "1000",
        "TRUTH_BATCH": "64",
        "TRUTH_SIZE": "224",
        "TRUTH_MODEL": "resnet18",
        "TRUTH_SAME": "5",
        "TRUTH_SLOW": "3",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    module = ModuleType("gate_tests")
    exec(compile(truth.GATE_TESTS, "test_gate.py", "exec"), module.__dict__)
    spins: list[int] = []
    monkeypatch.setattr(torch.cuda, "_sleep", spins.append)
    seen: list[torch.Tensor] = []

    class Inner(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(x)
            return x.sum(dim=(2, 3))

    images = torch.randn(4, 3, 8, 8)
    out = module.Injected(Inner(), 1000)(images)
    assert len(seen) == 1
    assert seen[0] is images  # not a copy, not a bigger batch
    assert out.shape == (4, 3)
    assert spins == [1000]
    module.Injected(Inner(), 0)(images)
    assert spins == [1000]  # the plain runs do not spin
    slow = [run for run in module.RUNS if run.startswith("slow")]
    assert slow == ["slow-1", "slow-2", "slow-3"]


def test_the_gate_lines_run_at_the_gpus_default_design(
    truth: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_cuda_here: list[str]
) -> None:
    """Both gate runs take the GPU's defaults: a save of as many samples as a first look
    against it needs, and a gated run that can show a step-time regression at its first look
    (3 against 9: all three above every baseline sample gives p = 1/220, within a share of 1%
    over two looks), even more so with one pair of samples out of order at the second."""
    looks, least = truth.gate_design()
    assert looks == (3, 6)
    fake = FakeGpu((Verdict.REGRESSED, Verdict.OK, 3))
    use(truth, fake, monkeypatch)
    truth.gate_lines(truth.CUDA_SETUP, tmp_path, set())
    assert len(fake.pytest_args) == 2
    assert not any(a.startswith("--cnnperf-samples") for args in fake.pytest_args for a in args)

    settings = GateSettings(
        policy=gate_policy("cuda"),
        throughput_threshold=THRESHOLD.default_for("cuda") or 0.05,
        memory_threshold=MEMORY_THRESHOLD.default_for("cuda") or 0.05,
        strict=False,
    )
    design = CUDA.sampling.design(CUDA.gate)
    baseline = [0.030 * (1 + 0.001 * i) for i in range(least)]
    slowed = [t * (1 + truth.INJECTED) for t in baseline]
    first = compare_throughput(baseline, slowed[:3], settings, design.look(0))
    assert first.verdict is Verdict.REGRESSED
    slowed[0] = 0.5 * (baseline[-1] + baseline[-2])  # one pair out of order
    again = compare_throughput(baseline, slowed[:6], settings, design.look(1))
    assert again.verdict is Verdict.REGRESSED


def test_the_truth_check_process_leaves_the_gpu_to_the_sample_processes(
    truth: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    no_cuda_here: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The GPU's name and the spin's length are asked of processes of the script's own, which
    end before the gate's samples start: a context kept here would be "another process on the
    GPU" in every sample where NVML lists this namespace's pids, and no regression would hold."""
    fake = FakeGpu((Verdict.REGRESSED, Verdict.OK, 6))
    use(truth, fake, monkeypatch)
    assert truth.main(["--out", str(tmp_path)]) == 1  # the reference run measured nothing
    assert no_cuda_here == []
    assert truth.DEVICE_PROBE in fake.sources
    assert truth.SPIN_SEARCH in fake.sources
    out = capsys.readouterr().out
    assert "truth check on cuda: NVIDIA H200, CUDA 12.8;" in out
    assert "gate defaults: +10% step caught: pass" in out


def test_a_second_run_into_the_same_folder_starts_afresh(
    truth: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    no_cuda_here: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    use(truth, FakeGpu((Verdict.REGRESSED, Verdict.OK, 6)), monkeypatch)
    assert truth.main(["--out", str(tmp_path)]) == 1
    assert "gate defaults: +10% step caught: pass" in capsys.readouterr().out
    # the second run's gate run dies: its lines must not read the first run's results
    use(truth, FakeGpu(None), monkeypatch)
    assert truth.main(["--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "gate defaults: +10% step caught: fail" in out
    line = lines_by_check(truth.gate_lines(truth.CUDA_SETUP, tmp_path, set()))
    assert line["gate defaults: +10% step caught"].measured.startswith(
        "step time caught 0 of 0 (no results"
    )


def test_the_memory_lines_two_sides_are_measured_alike(
    truth: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The reference peak is taken as cnnperf takes its own: from a step boundary, the
    allocator's cache emptied and its peaks reset, over as many steps (on a warm cache the
    allocated bytes count whole cached blocks, and the line would pass or fail by rounding)."""
    log: list[str] = []

    def logged(event: str, value: Any = None) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            log.append(event)
            return value

        return call

    stats = {"allocated_bytes.all.peak": 3 << 30, "reserved_bytes.all.peak": 4 << 30}
    monkeypatch.setattr(torch.cuda, "synchronize", logged("sync"))
    monkeypatch.setattr(torch.cuda, "empty_cache", logged("empty_cache"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", logged("reset_peaks"))
    monkeypatch.setattr(torch.cuda, "memory_stats", logged("read", stats))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", logged("read", 3 << 30))
    steps = CUDA.timing.memory_steps

    def measured() -> list[str]:
        """The events from the last step boundary on, reads before the steps left out."""
        tail = log[len(log) - log[::-1].index("settle") - 1 :]
        return [
            e for i, e in enumerate(tail) if e != "sync" and (e != "read" or i == len(tail) - 1)
        ]

    workload = SimpleNamespace(
        settle=logged("settle"),
        phases=[("forward", logged("step")), ("backward", logged("backward"))],
        state_bytes=None,
    )
    memory.cuda_peak(workload, torch.device("cuda"), steps)  # type: ignore[arg-type]
    cnnperf_side = [e for e in measured() if e != "backward"]

    log.clear()
    monkeypatch.setenv("TRUTH_OUT", str(tmp_path / "rows.jsonl"))
    monkeypatch.setenv(
        "TRUTH_CONFIG",
        json.dumps({"step_models": [], "seed_batch": 32, "seed_size": 224, "memory_steps": steps}),
    )
    module = ModuleType("reference_tests")
    exec(compile(truth.REFERENCE_TESTS, "test_reference.py", "exec"), module.__dict__)

    class Optimizer:
        def zero_grad(self, set_to_none: bool = True) -> None:
            assert set_to_none
            log.append("settle")

    class Model:
        def to(self, device: torch.device) -> Model:
            return self

    module.__dict__["bare"] = lambda model, device, batch, size: (logged("step"), Optimizer())
    model = Model()
    measurement = SimpleNamespace(peak_allocated_bytes=3 << 30)
    cnnperf = SimpleNamespace(
        device=torch.device("cuda"),
        train_step=lambda *args, **kwargs: SimpleNamespace(measurement=measurement),
    )
    module.test_peak_memory(cnnperf, lambda name: model)

    assert cnnperf_side == ["settle", "empty_cache", "reset_peaks", *["step"] * steps, "read"]
    assert measured() == cnnperf_side
    row = json.loads((tmp_path / "rows.jsonl").read_text())
    assert row == {"check": "memory", "cnnperf": 3 << 30, "reference": 3 << 30}


def test_the_direction_lines_run_where_the_gpu_bounds_the_step(
    truth: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """cuDNN off, bf16 and channels_last at the zoo's GPU batch of 128: at 32 an H200's
    ResNet-50 step is bound by the host's launches (29 ms at 32, 60 ms at 128), and
    channels_last came out x1.074 slower there."""
    monkeypatch.setenv("TRUTH_OUT", str(tmp_path / "rows.jsonl"))
    monkeypatch.setenv(
        "TRUTH_CONFIG",
        json.dumps({"step_models": [], "seed_batch": 32, "seed_size": 224, "direction_batch": 128}),
    )
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    module = ModuleType("reference_tests")
    exec(compile(truth.REFERENCE_TESTS, "test_reference.py", "exec"), module.__dict__)
    asked: list[dict[str, Any]] = []

    def train_step(model: object, **kwargs: Any) -> SimpleNamespace:
        asked.append(kwargs)
        return SimpleNamespace(
            measurement=SimpleNamespace(step_time_s=0.06, peak_allocated_bytes=1)
        )

    cnnperf = SimpleNamespace(device=torch.device("cuda"), train_step=train_step)
    module.test_seeds(cnnperf, lambda name: object())
    assert [(a["batch_size"], a["image_size"], a["name"]) for a in asked] == [
        (truth.DIRECTION_BATCH, 224, label) for label in ("on", "off", "bf16", "bf16-cl")
    ]
    assert truth.DIRECTION_BATCH == 128


def test_the_direction_lines_run_alone_for_a_short_call(
    truth: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    no_cuda_here: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--only-directions`` (gpu-check --stages directions): the reference run's seeds only,
    and their three lines."""
    fake = FakeGpu(None)
    use(truth, fake, monkeypatch)
    assert truth.main(["--only-directions", "--out", str(tmp_path)]) == 1  # nothing measured
    ((args),) = fake.pytest_args
    assert args[args.index("-k") + 1] == "test_seeds"
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert said == [
        f"  cuDNN off slower than on, resnet50 bs={truth.DIRECTION_BATCH}: fail",
        "  bf16 autocast faster and smaller than fp32: fail",
        "  channels_last + bf16 at least as fast: fail",
    ]
