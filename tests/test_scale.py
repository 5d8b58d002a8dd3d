"""Scaling out: pytest-xdist workers merged at the controller, data-parallel train steps through
torch.distributed (Gloo on the CPU). Fresh pytest processes, as in real use, except where a
test checks what is refused before anything is measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_cnnperf.sampling import xdist

#: one sample a benchmark (two to save: the quick effort's; ``cnnperf_samples = 1`` would save
#: the 99 a one-sample look needs against them) and a stated peak (no peak measured in each
#: benchmark's first sample): these tests are about processes, not figures
INI = """
[pytest]
cnnperf_effort = quick
cnnperf_min_time = 0.02
cnnperf_attribution = off
cnnperf_calibration = false
cnnperf_peak_tflops = 1
cnnperf_sample_timeout = 60
"""

BENCH = """
import torch.distributed as dist
from torch import nn


def tiny():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 4))


class BrokenOnRank1(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = tiny()

    def forward(self, x):
        if dist.get_rank() == 1:
            raise RuntimeError("rank 1 cannot go on")
        return self.net(x)
"""


@pytest.fixture
def scale(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester.makepyfile(models=BENCH)
    return pytester


def test_xdist_workers_save_and_compare_with_every_entry_once(scale: pytest.Pytester) -> None:
    scale.makepyfile(
        test_bench="\n".join(
            f"from models import tiny\n\ndef test_{i}(cnnperf):\n    cnnperf.train_step(tiny(), batch_size=2, image_size=8)\n"
            for i in range(4)
        )
    )
    # in-process samples: the workers' merge is what is tested, not their sample processes
    saved = scale.runpytest_subprocess(
        "--cnnperf", "--cnnperf-save", "-n", "2", "--cnnperf-json=saved.json", "--cnnperf-inprocess"
    )
    saved.assert_outcomes(passed=4)
    saved.stdout.fnmatch_lines(["saved 4 baseline(s) to *test_bench.json"])
    saved.stdout.fnmatch_lines(
        [
            "warning: 2 xdist workers share this CPU's * cores, * thread* each: their benchmarks run at the same time and their figures interfere"
        ]
    )
    (baseline,) = (scale.path / "baselines").rglob("test_bench.json")
    assert sorted(json.loads(baseline.read_text())["entries"]) == [f"test_{i}" for i in range(4)]
    results = json.loads((scale.path / "saved.json").read_text())["results"]
    assert sorted(r["test_id"] for r in results) == [f"test_bench.py::test_{i}" for i in range(4)]
    # the workers' baselines are where a gating run looks: the machine the results name
    assert {r["environment"]["machine"] for r in results} == {baseline.parent.name}


def test_a_data_parallel_train_step_over_two_gloo_ranks(scale: pytest.Pytester) -> None:
    """Two ranks in processes of their own measure a data-parallel step; a rank that fails
    fails its own test cleanly, naming the rank and its error, and leaves no process behind."""
    scale.makepyfile(
        test_ddp="""
        from models import BrokenOnRank1, tiny

        def test_broken(cnnperf):
            cnnperf.train_step(BrokenOnRank1(), batch_size=2, image_size=8, world_size=2)

        def test_ddp(cnnperf):
            result = cnnperf.train_step(tiny(), batch_size=2, image_size=8, world_size=2)
            assert result.config.world_size == 2
            assert result.config.batch_size == 4
            assert result.key.endswith("world=2")
            assert 0 < result.measurement.scaling_efficiency
        """
    )
    result = scale.runpytest_subprocess("--cnnperf", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: measuring train_step BrokenOnRank1 bs=4 8x8 opt=sgd world=2 on cpu failed: rank 1 of 2: RuntimeError: rank 1 cannot go on (raised at models.py:* in forward)"
        ]
    )
    leftovers = subprocess.run(
        ["pgrep", "-f", str(scale.path)], capture_output=True, text=True
    ).stdout
    assert not leftovers.strip()


def test_data_parallel_needs_sample_processes(scale: pytest.Pytester) -> None:
    """Refused before anything is measured (in this process: no sample processes to fork)."""
    scale.makepyfile(
        test_ddp="""
        from models import tiny

        def test_ddp(cnnperf):
            cnnperf.train_step(tiny(), batch_size=2, image_size=8, world_size=2)
        """
    )
    result = scale.runpytest("--cnnperf", "--cnnperf-inprocess")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*world_size=2 needs sample processes, which are unavailable here (measuring in-process)*"]
    )


@pytest.mark.parametrize(
    ("workers_", "gpus", "kind", "index", "message"),
    [
        (
            4,
            2,
            "cuda",
            None,
            "-n 4 starts 4 workers, but only 2 CUDA devices are visible, and two benchmarks never share a GPU: use -n 2 (or fewer), or benchmark on the CPU with --cnnperf-device=cpu",
        ),
        (
            2,
            2,
            "cuda",
            1,
            "--cnnperf-device=cuda:1 names one GPU, but -n 2 starts 2 workers, each benchmarking on a GPU of its own; use --cnnperf-device=cuda (or auto) with -n, or drop -n",
        ),
    ],
)
def test_one_gpu_per_worker(
    workers_: int, gpus: int, kind: str, index: int | None, message: str
) -> None:
    with pytest.raises(pytest.UsageError) as info:
        xdist.check_gpus(workers_, gpus, kind, index)
    assert str(info.value) == message
    xdist.check_gpus(2, 2, "cuda", None)
    xdist.check_gpus(8, 0, "cpu", None)


def test_workers_pick_their_gpu_from_the_callers_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    xdist.pin_gpu(1)
    import os

    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    xdist.pin_gpu(2)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"


def test_worker_shares_merge_without_loss_or_duplicates(tmp_path: Path) -> None:
    """Two workers' results, pending baselines and collected tests, sent as each worker ends
    and merged at the controller."""
    from types import SimpleNamespace

    from factories import result as measured

    from pytest_cnnperf.model import BenchConfig, Decision, Result, Verdict
    from pytest_cnnperf.models import ModelRegistry
    from pytest_cnnperf.session import Session
    from pytest_cnnperf.settings import Configuration

    config = BenchConfig(kind="train_step", model="m", batch_size=2, image_size=(8, 8))

    def result(test: str) -> Result:
        return Result(config, test_id=f"test_x.py::{test}", decision=Decision(Verdict.NEW))

    def entry(test: str) -> Result:
        return measured([0.010, 0.011], config=config, test_id=f"test_x.py::{test}").as_baseline()

    def state() -> Session:
        configuration = Configuration({}, {}, tmp_path, tmp_path)
        return Session(configuration, "cpu", ModelRegistry())

    controller = state()
    for tests in (["test_b", "test_a"], ["test_c"]):
        worker = state()
        worker.results.extend(result(t) for t in tests)
        worker.pending[("cpu-m-1t", "test_x")] = {t: {config.key: entry(t)} for t in tests}
        worker.collected["test_x"].update(["test_a", "test_b", "test_c"])
        worker.machine = "cpu-m-1t"
        worker.warnings.append("2 xdist workers share this CPU")
        ended = SimpleNamespace(workeroutput={})
        xdist.send(ended, worker)  # type: ignore[arg-type]
        xdist.receive(controller, ended.workeroutput[xdist.KEY])
    assert [r.test_id for r in controller.results] == [
        "test_x.py::test_a",
        "test_x.py::test_b",
        "test_x.py::test_c",
    ]
    assert controller.pending == {
        ("cpu-m-1t", "test_x"): {t: {config.key: entry(t)} for t in ("test_a", "test_b", "test_c")}
    }
    assert controller.collected["test_x"] == {"test_a", "test_b", "test_c"}
    assert controller.warnings == ["2 xdist workers share this CPU"]
    assert controller.machine == "cpu-m-1t"
