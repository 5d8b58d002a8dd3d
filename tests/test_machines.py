"""Baselines and the kind of machine: a run that finds none for its machine says where it looked,
which machines have them and the two fixes; a baseline file names its own module and machine, so
a copy of it compares like the original. Samples are scripted (``tests/scripted.py``)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from scripted import Scripted
from test_workflow import BENCH, baseline_file

from pytest_cnnperf.cli import main


@pytest.fixture
def saved_elsewhere(scripted_project: pytest.Pytester) -> pytest.Pytester:
    """Baselines recorded under another machine name, as on another kind of runner."""
    scripted_project.makepyfile(test_bench=BENCH)
    scripted_project.runpytest(
        "--cnnperf", "--cnnperf-save", "--cnnperf-machine=gpu-runner-a", "test_bench.py::test_a"
    ).assert_outcomes(passed=1)
    return scripted_project


def test_no_baseline_for_this_machine_says_where_and_what_to_do(
    saved_elsewhere: pytest.Pytester,
) -> None:
    result = saved_elsewhere.runpytest("--cnnperf", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "    Sleepy bs=2 8x8: new: * (no baseline for cpu-*; baselines of it exist for gpu-runner-a)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "2 benchmarks had no baseline for this kind of machine (cpu-*); looked in "
            "baselines/cpu-*/test_bench.json",
            "  baselines of them exist for other kinds of machine: gpu-runner-a (1 of 2)",
            "  Record them for this machine: run the same command with --cnnperf-save, and commit "
            "the files it writes.",
            "  Or, if this machine is of the same kind as gpu-runner-a, share its baselines: "
            "--cnnperf-machine=gpu-runner-a (or cnnperf_machine = gpu-runner-a in the ini file).",
        ]
    )


def test_no_baseline_anywhere_suggests_naming_the_machine(
    scripted_project: pytest.Pytester,
) -> None:
    scripted_project.makepyfile(test_bench=BENCH)
    result = scripted_project.runpytest("--cnnperf")
    result.stdout.fnmatch_lines(
        [
            "2 benchmarks had no baseline for this kind of machine (cpu-*); looked in *",
            "  Record them for this machine: run the same command with --cnnperf-save*",
            "  Or, to share baselines between runners of one class whose machine names differ, "
            "name the kind with --cnnperf-machine=NAME (or cnnperf_machine in the ini file).",
        ]
    )


def test_strict_mode_fails_it_and_names_the_machines_that_have_one(
    saved_elsewhere: pytest.Pytester,
) -> None:
    result = saved_elsewhere.runpytest("--cnnperf", "--cnnperf-strict", "test_bench.py::test_a")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Sleepy bs=2 8x8 opt=sgd has no baseline in baselines/cpu-*/test_bench.json "
            "(strict mode fails benchmarks without one)",
            "*  note: no baseline for cpu-*; baselines of it exist for gpu-runner-a",
            "*  Record one with: pytest --cnnperf --cnnperf-save test_bench.py::test_a",
            "*  Or, if this machine is of the same kind as gpu-runner-a, share its baselines: "
            "--cnnperf-machine=gpu-runner-a (or cnnperf_machine = gpu-runner-a in the ini file).",
        ]
    )


def on_capability(scripted: Scripted, capability: str) -> None:
    """Make the scripted samples' machine one where torch dispatches to ``capability``."""
    from pytest_cnnperf.measuring.environment import cpu_kind

    env = scripted.environment(None)
    machine = cpu_kind(env.cpu, env.cpu_id, capability, env.threads)
    scripted._environment = dataclasses.replace(env, cpu_capability=capability, machine=machine)


def test_a_baseline_of_another_cpu_capability_is_another_kind_never_judged(
    scripted_project: pytest.Pytester, scripted: Scripted
) -> None:
    """Baselines recorded where torch ran AVX2 kernels, then a 40% slower run on AVX-512 (the
    same CPU name): another kind of machine, so its benchmarks are new, not regressed; the note
    names what picks other kernels, and sharing the other kind's baselines is not offered."""
    scripted_project.makepyfile(test_bench=BENCH)
    on_capability(scripted, "AVX2")
    scripted_project.runpytest("--cnnperf", "--cnnperf-save").assert_outcomes(passed=2)
    on_capability(scripted, "AVX512")
    scripted.slow_down("test_a", 1.4)
    result = scripted_project.runpytest("--cnnperf", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "    Sleepy bs=2 8x8: new: * (no baseline for cpu-*-avx512-*t; baselines of it exist "
            "for cpu-*-avx2-*t (CPU capability AVX2 -> AVX512: other kernels, whose figures are "
            "not compared with these))",
            "  baselines of them exist for other kinds of machine: cpu-*-avx2-*t (2 of 2; CPU "
            "capability AVX2 -> AVX512: other kernels)",
            "  Record them for this machine: run the same command with --cnnperf-save, and commit "
            "the files it writes.",
            "  Another kind's baselines are not shared with this one: the hardware that picks the "
            "kernels differs, so its figures say nothing about this machine's.",
        ]
    )
    result.stdout.no_fnmatch_line("*--cnnperf-machine=cpu-*")


def test_naming_the_machine_gates_against_its_baselines(saved_elsewhere: pytest.Pytester) -> None:
    result = saved_elsewhere.runpytest(
        "--cnnperf", "--cnnperf-machine=gpu-runner-a", "test_bench.py::test_a"
    )
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*no baseline*")


def test_a_baseline_file_names_its_module_and_machine(saved_elsewhere: pytest.Pytester) -> None:
    data = json.loads(baseline_file(saved_elsewhere).read_text())
    assert (data["module"], data["machine"]) == ("test_bench", "gpu-runner-a")


def test_a_copied_baseline_file_compares_like_the_original(
    saved_elsewhere: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    saved_elsewhere.runpytest(
        "--cnnperf", "--cnnperf-machine=gpu-runner-a", "--cnnperf-json=run.json"
    ).assert_outcomes(passed=2)
    copy = saved_elsewhere.path / "downloads" / "published-reference.json"
    copy.parent.mkdir()
    shutil.copy(baseline_file(saved_elsewhere), copy)
    capsys.readouterr()
    assert main(["compare", str(copy), str(saved_elsewhere.path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert "1 benchmark in both: " in out  # matched; its verdict depends on the machine
    assert "only in NEW: test_b [train_step Sleepy bs=2 8x8 opt=sgd]" in out
