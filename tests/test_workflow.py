"""The whole workflow through pytest: record baselines, gate against them, and every way a
baseline can be missing, stale, corrupt or from another environment. Samples are scripted
(``tests/scripted.py``): changes are made large and exact (a tripled step time, 16 MiB more at
the peak) and go through the real plugin, session, baseline files and gate. One test times the
sleepy model for real, end to end; no test asserts a timing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from scripted import Scripted

BENCH = """
from models import Sleepy

def test_a(cnnperf):
    cnnperf.train_step(Sleepy(name="a"), batch_size=2, image_size=8)

def test_b(cnnperf):
    cnnperf.train_step(Sleepy(name="b"), batch_size=2, image_size=8)
"""
KEY = "train_step Sleepy bs=2 8x8 opt=sgd"


def baseline_file(project: pytest.Pytester, module: str = "test_bench") -> Path:
    files = list((project.path / "baselines").glob(f"*/{module}.json"))
    assert len(files) == 1, files
    return files[0]


def save(project: pytest.Pytester) -> pytest.Pytester:
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest("--cnnperf", "--cnnperf-save")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["saved*test_a*Sleepy bs=2 8x8*", "saved 2 baseline(s) to *test_bench.json"]
    )
    return project


@pytest.fixture
def saved(scripted_project: pytest.Pytester, scripted: Scripted) -> pytest.Pytester:
    """Scripted baselines of both benchmarks, none timed: 9 samples each, what a first look of
    three samples against them needs to reach its share of the false-alarm rate."""
    save(scripted_project)
    assert scripted.script.taken == [("test_a", 9), ("test_b", 9)]
    return scripted_project


@pytest.mark.usefixtures("one_thread")
def test_a_real_slowdown_fails_the_test_that_slowed_and_the_other_passes(
    project: pytest.Pytester, inject: Callable[[str], Path]
) -> None:
    """The workflow end to end with real timing: the sleepy model's baselines are saved, then
    its sleep is tripled in one test; that test regresses, the unchanged one passes."""
    ini = project.path.joinpath("tox.ini").read_text()
    project.makeini(
        ini.replace("min_time = 0.1", "min_time = 0.05").replace("samples = 4", "samples = 3")
    )
    save(project)
    inject("SLOWDOWN-a")
    result = project.runpytest("--cnnperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*cnnperf: {KEY} regressed (throughput)",
            "*  throughput  * images/s now, * images/s in the baseline: -*% (fails below -30%)",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_bench.py::test_a - *"])


def test_save_writes_one_entry_per_benchmark(saved: pytest.Pytester) -> None:
    data = json.loads(baseline_file(saved).read_text())
    assert set(data["entries"]) == {"test_a", "test_b"}
    entry = data["entries"]["test_a"][KEY]
    assert len(entry["measurement"]["samples"]) == 9
    assert entry["environment"]["machine"] == baseline_file(saved).parent.name


def test_an_unchanged_rerun_passes(saved: pytest.Pytester) -> None:
    result = saved.runpytest("--cnnperf")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("regressed*")


def test_a_slowdown_fails_the_test_that_slowed(saved: pytest.Pytester, scripted: Scripted) -> None:
    scripted.slow_down("test_a", 3.0)
    result = saved.runpytest("--cnnperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Sleepy bs=2 8x8 opt=sgd regressed (throughput)",
            "*  throughput  * images/s now, * images/s in the baseline: -*% (fails below -30%)",
            "*3 samples now against 9 (look 1 of 2): exact one-sided Mann-Whitney test p = 0.0045, at most this look's 0.005; with 99.5% confidence, allowing for +-1.4% between the two runs beside their samples, the loss is at least *",
            "*error rates fixed in advance: 1% false alarms and 5% missed slowdowns over 2 looks, split equally",
            "*  baseline    baselines/*/test_bench.json",
            "*  To accept this as the new baseline, run: pytest --cnnperf --cnnperf-save test_bench.py::test_a",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_bench.py::test_a - *"])


def test_a_memory_growth_fails_the_test_that_grew(
    saved: pytest.Pytester, scripted: Scripted
) -> None:
    scripted.grow("test_b", 16 << 20)
    result = saved.runpytest("--cnnperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Sleepy bs=2 8x8 opt=sgd regressed (*memory)",
            "*  memory      * MiB now, * in the baseline at peak: +*% (fails above +5%)",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_bench.py::test_b - *"])
    # the throughput did not regress: no claim of a loss, its bound says how small it is
    assert "the loss is at least" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*with 97.5% confidence* the loss is at most *"])


def test_accepting_a_change_with_save(saved: pytest.Pytester, scripted: Scripted) -> None:
    scripted.slow_down("test_a", 3.0)
    saved.runpytest("--cnnperf", "--cnnperf-save", "test_bench.py::test_a").assert_outcomes(
        passed=1
    )
    saved.runpytest("--cnnperf").assert_outcomes(passed=2)


def test_a_benchmark_without_baseline_is_new_and_passes(
    scripted_project: pytest.Pytester,
) -> None:
    scripted_project.makepyfile(test_bench=BENCH)
    result = scripted_project.runpytest("--cnnperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["new *test_a *", "new *test_b *"])


def test_strict_mode_fails_missing_baselines(scripted_project: pytest.Pytester) -> None:
    scripted_project.makepyfile(test_bench=BENCH)
    result = scripted_project.runpytest("--cnnperf", "--cnnperf-strict")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Sleepy bs=2 8x8 opt=sgd has no baseline in baselines/*/test_bench.json "
            "(strict mode fails benchmarks without one)",
            "*  Record one with: pytest --cnnperf --cnnperf-save test_bench.py::test_a",
        ]
    )


def test_a_changed_environment_is_reported_and_fails_in_strict_mode(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    data = json.loads(path.read_text())
    data["entries"]["test_a"][KEY]["environment"]["torch"] = "1.0.0"
    path.write_text(json.dumps(data))
    result = saved.runpytest("--cnnperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["note: test_a: environment changed: torch 1.0.0 -> *"])
    strict = saved.runpytest("--cnnperf", "--cnnperf-strict")
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Sleepy bs=2 8x8 opt=sgd: the environment differs from the baseline's (strict mode)",
            "*  environment changed: torch 1.0.0 -> *",
        ]
    )


def test_a_corrupt_baseline_fails_its_benchmarks_and_the_run_goes_on(
    saved: pytest.Pytester,
) -> None:
    saved.makepyfile(test_other=BENCH.replace("test_a", "test_c").replace("test_b", "test_d"))
    saved.runpytest("--cnnperf", "--cnnperf-save", "test_other.py").assert_outcomes(passed=2)
    path = baseline_file(saved)
    path.write_text("{ this is not json")
    result = saved.runpytest("--cnnperf")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            f"*cnnperf: baseline file {path} cannot be used: it is not valid JSON (*). Mend it (or "
            "delete it) and record new baselines with --cnnperf-save; it is left untouched until then."
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    saved.runpytest("--cnnperf", "--cnnperf-save", "test_bench.py").assert_outcomes(failed=2)
    assert path.read_text() == "{ this is not json"


def test_stale_entries_are_reported_and_pruned_on_request(saved: pytest.Pytester) -> None:
    saved.makepyfile(test_bench=BENCH.split("def test_b")[0])
    result = saved.runpytest("--cnnperf")
    result.stdout.fnmatch_lines(
        [
            "1 baseline entry belongs to no test its module has now (if that test is gone, remove it with --cnnperf-save --cnnperf-prune):",
            "  test_b in *test_bench.json",
        ]
    )
    saved.runpytest("--cnnperf", "--cnnperf-save").stdout.fnmatch_lines(["*1 baseline entry*"])
    assert "test_b" in json.loads(baseline_file(saved).read_text())["entries"]
    pruned = saved.runpytest("--cnnperf", "--cnnperf-save", "--cnnperf-prune")
    pruned.stdout.fnmatch_lines(
        ["saved 1 baseline(s) to *test_bench.json, removed 1 stale test(s)"]
    )
    assert set(json.loads(baseline_file(saved).read_text())["entries"]) == {"test_a"}


def test_a_partial_save_keeps_the_other_entries(saved: pytest.Pytester) -> None:
    saved.runpytest("--cnnperf", "--cnnperf-save", "-k", "test_a").assert_outcomes(
        passed=1, deselected=1
    )
    data = json.loads(baseline_file(saved).read_text())
    assert set(data["entries"]) == {"test_a", "test_b"}


def test_per_test_thresholds_and_command_line_precedence(
    saved: pytest.Pytester, scripted: Scripted
) -> None:
    saved.makepyfile(
        test_bench=BENCH.replace(
            "def test_a(cnnperf):",
            "import pytest\n\n@pytest.mark.cnnperf(threshold='90%')\ndef test_a(cnnperf):",
        )
    )
    scripted.slow_down("test_a", 3.0)
    saved.runpytest("--cnnperf").assert_outcomes(passed=2)
    saved.runpytest("--cnnperf", "--cnnperf-threshold=30%").assert_outcomes(passed=1, failed=1)
