"""Samples in fresh processes: each a fork of the pytest process taken before any test ran.

These tests run pytest in a subprocess, because that is the point: a fresh pytest process whose
torch has started no threads, as in real use. (The zoo's options, which measure nothing of their
own, run in this process with scripted samples.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted import Scripted

#: a stated peak, so that no benchmark's first sample measures the CPU's: these tests are about
#: processes, not figures
INI = """
[pytest]
cnnperf_samples = 3
cnnperf_min_time = 0.02
cnnperf_attribution = off
cnnperf_calibration = false
cnnperf_peak_tflops = 1
cnnperf_sample_timeout = 4
"""

MODELS = """
import os
import time

import torch
from torch import nn


def tiny(num_classes=4):
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, num_classes))


class Broken(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.layer = nn.Linear(3, 2)

    def forward(self, x):
        if self.how == "raise":
            raise RuntimeError("boom: the model cannot take this input")
        if self.how == "exit":
            os._exit(7)
        time.sleep(3600)
"""


@pytest.fixture
def fresh(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester.makepyfile(models=MODELS)
    return pytester


def test_every_sample_is_a_fresh_process_and_a_failing_one_fails_only_its_test(
    fresh: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each sample runs the test again in a process of its own. A benchmark that raises, exits
    or hangs there, or whose test asks for something other than the pytest process measured,
    fails its own test; the next one measures as usual."""
    fresh.makepyfile(
        test_bench="""
        import os
        import uuid

        import torch

        from models import Broken, tiny

        def test_raises(cnnperf):
            cnnperf.train_step(Broken("raise"), batch_size=2, image_size=8, num_classes=2)

        def test_exits(cnnperf):
            cnnperf.train_step(Broken("exit"), batch_size=2, image_size=8, num_classes=2)

        def test_hangs(cnnperf):
            cnnperf.train_step(Broken("hang"), batch_size=2, image_size=8, num_classes=2)

        def test_random(cnnperf):
            cnnperf.train_step(tiny(), batch_size=2 + uuid.uuid4().int % 1000, image_size=8)

        def test_fine_afterwards(cnnperf):
            with open(os.environ["PIDS_FILE"], "a") as pids:
                pids.write(f"{os.getpid()}\\n")
            threads = torch.get_num_threads()
            result = cnnperf.train_step(tiny(), batch_size=2, image_size=8)
            assert torch.get_num_threads() == threads
            assert not result.measurement.in_process
            assert len(result.measurement.samples) == 3
        """
    )
    pids = fresh.path / "pids.txt"
    monkeypatch.setenv("PIDS_FILE", str(pids))
    result = fresh.runpytest_subprocess(
        "--cnnperf", "--cnnperf-json=results.json", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=1, failed=4)
    seen = pids.read_text().split()
    assert len(seen) == 4  # the pytest process, then one process per sample
    assert len(set(seen)) == 4
    data = json.loads((fresh.path / "results.json").read_text())
    assert data["schema"] == "pytest-cnnperf/results"
    (fine,) = [r for r in data["results"] if r["test_id"].endswith("::test_fine_afterwards")]
    # a field at its default (in_process: false) is left out of the file
    samples = fine["measurement"]["samples"]
    assert [s.get("in_process", False) for s in samples] == [False, False, False]
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: measuring train_step Broken bs=2 8x8 opt=sgd on cpu failed: RuntimeError: boom: the model cannot take this input (raised at models.py:20 in forward)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: measuring train_step Broken bs=2 8x8 opt=sgd on cpu failed: the sample process exited with status 7 without a report*"
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: measuring train_step Broken bs=2 8x8 opt=sgd on cpu failed: the sample process took longer than 4 s (cnnperf_sample_timeout) and was killed; if it needs longer, raise cnnperf_sample_timeout in the ini file"
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*the test asked for 'train_step Sequential bs=* 8x8 opt=sgd' where the pytest process measured 'train_step Sequential bs=* 8x8 opt=sgd'; a benchmark test must make the same calls in every run"
        ]
    )
    assert not [
        line
        for line in result.outlines
        if line.startswith("FAILED") and "test_fine_afterwards" in line
    ]


@pytest.mark.slow  # a fresh pytest process; tests/test_cuda_fakes.py checks the probe's verdict
def test_torch_work_before_the_session_falls_back_to_in_process_samples(
    fresh: pytest.Pytester,
) -> None:
    """A conftest that runs torch ops at import starts torch's thread pool, which a forked
    process cannot use: the plugin notices, says so, and measures in-process."""
    fresh.makeconftest(
        """
        import torch

        torch.set_num_threads(2)
        (torch.ones(1 << 20) * 2).sum()
        """
    )
    fresh.makepyfile(
        test_bench="""
        from models import tiny

        def test_bench(cnnperf):
            assert cnnperf.train_step(tiny(), batch_size=2, image_size=8).measurement.in_process
        """
    )
    result = fresh.runpytest_subprocess("--cnnperf", "--cnnperf-samples=1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "warning: samples were taken inside the pytest process because a forked process hung in "
            "torch's thread pool: the pytest process ran torch operations before the session started "
            "(for example at import time in a conftest.py)*"
        ]
    )


def test_a_zoo_batch_a_model_cannot_train_at_fails_its_test_naming_the_fix(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    result = pytester.runpytest(
        "--cnnperf",
        "--pyargs",
        "pytest_cnnperf.zoo",
        "--cnnperf-zoo-models=inception_v3,resnet18",
        "--cnnperf-zoo-batch-size=1",
        "--cnnperf-zoo-image-size=32",
        plugins=[Scripted()],
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: inception_v3 trains at a batch size of 2 or more, not 1: one of its batch "
            "normalisations sees a 1x1 map, which needs more than one image in training; give --cnnperf-zoo-batch-size=2 or more, or leave inception_v3 out with "
            "--cnnperf-zoo-models"
        ]
    )


def test_zoo_runs_with_small_settings(pytester: pytest.Pytester) -> None:
    """The zoo's options choose its models, batch size, image size and precisions. Its models
    are built, and take scripted samples: how a train step is measured, bf16 included, is
    test_measurement's, and the zoo's real run is the GPU workflow's."""
    pytester.makeini(INI)
    scripted = Scripted()
    result = pytester.runpytest(
        "--cnnperf",
        "--pyargs",
        "pytest_cnnperf.zoo",
        "--cnnperf-zoo-models=mobilenet_v2,resnet18",
        "--cnnperf-zoo-batch-size=2",
        "--cnnperf-zoo-image-size=32",
        "--cnnperf-zoo-amp=off,bf16",
        "-v",
        plugins=[scripted],
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*test_train[[]mobilenet_v2[]] PASSED*",
            "*test_train[[]mobilenet_v2-bf16[]] PASSED*",
            "*test_train[[]resnet18[]] PASSED*",
        ]
    )
    result.stdout.fnmatch_lines(["new*test_train[[]resnet18-bf16[]]*resnet18 bs=2 32x32 amp=bf16*"])
    assert sorted(test for test, _ in scripted.script.taken) == [
        "test_train[mobilenet_v2-bf16]",
        "test_train[mobilenet_v2]",
        "test_train[resnet18-bf16]",
        "test_train[resnet18]",
    ]


def test_the_failure_that_caused_the_others_is_reported() -> None:
    """Ranks of a data-parallel step fail together: the report names the cause."""
    from pytest_cnnperf.sampling.messages import ChildReport, cause

    crashed = ChildReport(error="killed by signal 11 (SIGSEGV)", rank=1)
    waited = ChildReport(error="Connection closed by peer", rank=0, failed_at=20.0)
    # a crash writes no time: exiting first, it is the cause of the later, timed failure
    assert cause([crashed, waited]) is crashed
    raised = ChildReport(error="RuntimeError: shapes differ", rank=1, failed_at=10.0)
    # timed failures: the earliest, whichever process exited first
    assert cause([waited, raised]) is raised
    # stopped after the grace period: no time, and not the first to exit
    assert cause([raised, ChildReport(error="stopped", rank=0)]) is raised


def test_a_module_that_fails_to_preload_leaves_the_zygote_serving(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Preloading saves time only: a module whose import raises something other than
    ImportError (scipy 1.10's boost under Valgrind raises SystemError) must not end the zygote,
    which would leave the pytest process with "the sample-process server ended"."""
    import os

    from pytest_cnnperf.sampling import zygote

    (tmp_path / "breaks_on_import.py").write_text("raise SystemError('unreported exception')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(zygote, "PRELOAD", ("breaks_on_import",))
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(requests_write)
            os.close(replies_read)
            zygote.serve(requests_read, replies_write, lambda done: done(), lambda job: None)
        finally:
            os._exit(0)
    os.close(requests_read)
    os.close(replies_write)
    with os.fdopen(replies_read) as replies:
        first = replies.readline()
        os.close(requests_write)
        os.waitpid(pid, 0)
    assert json.loads(first) == {"unusable": None}


def test_a_zygote_that_ends_on_an_error_says_which() -> None:
    """The zygote's output goes nowhere (it must not reach the terminal), so an error that ends
    it is said on its pipe, and the pytest process's message carries it."""
    from pytest_cnnperf.sampling.manager import Zygote
    from pytest_cnnperf.sampling.messages import BenchmarkError

    def broken(requests: int, replies: int) -> None:
        raise SystemError("initialization of beta_ufunc raised unreported exception")

    zygote = Zygote.fork(broken)
    try:
        with pytest.raises(BenchmarkError) as raised:
            zygote.receive(timeout=60)
    finally:
        zygote.close(grace=5)
    assert str(raised.value) == (
        "the sample-process server ended: SystemError: initialization of beta_ufunc raised "
        "unreported exception"
    )
