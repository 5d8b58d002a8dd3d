"""The ``cnnperf`` command on results and baseline files from real runs (tests/data): every
subcommand, its exit status and its messages. Files that cannot be used exit 2 with one line
naming the file and the problem, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import record_quiet_noise
from scripted import Scripted

from pytest_cnnperf.cli import main
from pytest_cnnperf.reports.compare import baselines_of
from pytest_cnnperf.store import results_file
from pytest_cnnperf.store.baseline import BaselineFileError, BaselineStore

DATA = Path(__file__).parent / "data"
SAVE = DATA / "zoo-save.json"
BASELINE = DATA / "baselines" / "cpu-amd-epyc-2t" / "pytest_cnnperf" / "zoo" / "test_zoo.json"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def data_of(source: Path = SAVE) -> dict[str, Any]:
    """The JSON data of the results file ``source``."""
    data: dict[str, Any] = json.loads(source.read_text())
    return data


def edited(tmp_path: Path, name: str, change: Any, source: Path = SAVE) -> Path:
    """A copy of a results file with ``change(result)`` applied to each result's data."""
    data = data_of(source)
    for result in data["results"]:
        change(result)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def slower(factor: float) -> Any:
    def change(result: dict[str, Any]) -> None:
        for sample in result["measurement"]["samples"]:
            sample["step_time_s"] *= factor

    return change


def upgraded(result: dict[str, Any]) -> None:
    result["environment"]["torch"] = "2.15.0"


@pytest.fixture
def quiet_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a folder whose baselines hold the noise profile of the files' machine, one whose
    runs barely differ: these tests are about the samples the files hold."""
    record_quiet_noise(tmp_path / "baselines", "cpu-amd-epyc-2t")
    monkeypatch.chdir(tmp_path)


# ---- compare ----


@pytest.mark.usefixtures("quiet_machine")
def test_compare_matches_benchmarks_and_shows_both_figures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new = edited(tmp_path, "new.json", slower(1 / 1.25))
    status, out, _ = run(capsys, "compare", SAVE, new)
    assert status == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("test "))
    assert lines[header].split() == [
        "test", "benchmark", "old", "new", "speedup", "old", "mem", "new", "mem", "change",
        "verdict",
    ]  # fmt: skip
    row = lines[header + 1].split()
    assert row[:4] == ["test_train[resnet18]", "resnet18", "bs=8", "64x64"]
    assert row[8] == "1.25x"
    assert row[-2:] == ["+0.0%", "improved"]
    summary = next(i for i, line in enumerate(lines) if line.startswith("3 benchmarks in both"))
    assert lines[summary : summary + 2] == [
        "3 benchmarks in both: 3 improved; geometric mean speedup 1.25x",
        "speedup: NEW throughput / OLD throughput. regressed: slower beyond 10% with 99% "
        "confidence, allowing for each run's samples and for how much runs differ on this kind "
        "of machine (runs differ by 1%, recorded over 0 runs), or peak memory grown beyond 5% in "
        "every sample",
    ]


def test_compare_shows_the_two_environments_side_by_side(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new = edited(tmp_path, "new.json", upgraded)
    _, out, _ = run(capsys, "compare", SAVE, new)
    lines = out.splitlines()
    assert lines[0].split() == ["environment", "OLD", str(SAVE), "NEW", str(new)]
    torch = next(line for line in lines if line.startswith("torch "))
    assert torch.split() == ["torch", "2.14.1+cu130", "2.15.0", "changed"]
    device = next(line for line in lines if line.startswith("device "))
    assert device.split() == ["device", "AMD", "EPYC", "AMD", "EPYC"]


def test_compare_a_results_file_with_a_baseline_file(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "compare", BASELINE, SAVE)
    assert status == 0
    assert "3 benchmarks in both" in out


@pytest.mark.usefixtures("quiet_machine")
def test_fail_on_regression_exits_1_when_a_benchmark_regressed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new = edited(tmp_path, "new.json", slower(1.3))
    status, out, _ = run(capsys, "compare", SAVE, new)
    assert status == 0  # without the flag, a report only
    assert "3 benchmarks in both: 3 regressed; geometric mean speedup 0.77x" in out
    status, out, _ = run(capsys, "compare", SAVE, new, "--fail-on-regression")
    assert status == 1
    assert "regressed: slower beyond 10%" in out


@pytest.mark.usefixtures("quiet_machine")
def test_fail_on_regression_takes_a_threshold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new = edited(tmp_path, "new.json", slower(1.3))
    status, out, _ = run(capsys, "compare", SAVE, new, "--fail-on-regression=40%")
    assert status == 0
    assert "3 benchmarks in both: 3 ok" in out
    assert "regressed: slower beyond 40%" in out


def busy(factor: float, every: int = 1) -> Any:
    """Every ``every``-th sample slowed by ``factor`` while a neighbour took a core from it."""

    def change(result: dict[str, Any]) -> None:
        for i, sample in enumerate(result["measurement"]["samples"]):
            if i % every == 0:
                sample["step_time_s"] *= factor
                sample["cpu_contention"] = 1.0
            else:
                sample["cpu_contention"] = 0.0

    return change


@pytest.mark.usefixtures("quiet_machine")
def test_compare_calls_no_regression_from_samples_a_busy_machine_slowed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Samples whose threads waited for the CPU say what the machine did, not the code: with
    every sample of NEW taken beside a neighbour, nothing is decided and the command passes; with
    some, the quiet ones decide."""
    new = edited(tmp_path, "busy.json", busy(14.0))
    status, out, _ = run(capsys, "compare", SAVE, new, "--fail-on-regression")
    assert status == 0
    assert "3 benchmarks in both: 3 inconclusive" in out
    assert (
        "NEW: the machine was busy: 12 of 12 samples had erratic step times, a slow calibration or "
        "threads kept waiting for the CPU, so none can show a regression: no throughput verdict; "
        "re-run it when the machine is quieter"
    ) in out
    both = edited(tmp_path, "slower-and-busy.json", lambda r: (slower(1.3)(r), busy(14.0, 2)(r)))
    status, out, _ = run(capsys, "compare", SAVE, both, "--fail-on-regression")
    assert status == 1
    assert (
        "NEW: 6 of 12 samples had erratic step times, a slow calibration or threads kept waiting for the CPU; the other 6 alone show the regression"
        in out
    )


def test_an_unchanged_run_passes_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, _ = run(capsys, "compare", SAVE, SAVE, "--fail-on-regression")
    assert status == 0


COMPARED = """
from models import Sleepy


def test_narrow(cnnperf):
    cnnperf.train_step(Sleepy(name="narrow"), batch_size=2, image_size=8)


def test_wide(cnnperf):
    cnnperf.train_step(Sleepy(name="wide"), batch_size=2, image_size=8)
"""


def test_compare_decides_with_what_two_unbaselined_runs_hold(
    scripted_project: pytest.Pytester, scripted: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs without baselines (three samples, one of them measuring memory, each): three
    against three cannot reach 1% by ranks, so compare decides with the kind of machine's noise
    profile (the project's, in its baselines folder): a step 14 times slower with 63% more
    memory is a regression that fails the command, two runs of unchanged code pass it."""
    scripted_project.makepyfile(test_bench=COMPARED)
    runs = []
    for name in ("old", "same", "new"):
        if name == "new":
            scripted.slow_down("test_wide", 14.0)
            scripted.grow("test_wide", scripted.script.peak_bytes * 63 // 100)
        path = scripted_project.path / f"{name}.json"
        scripted_project.runpytest("--cnnperf", f"--cnnperf-json={path}").assert_outcomes(passed=2)
        runs.append(path)
    assert [count for _, count in scripted.script.taken] == [3] * 6
    old, same, new = runs
    status, out, _ = run(capsys, "compare", old, new, "--fail-on-regression")
    assert status == 1
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines() if "images/s" in line}
    assert {t: v for t, v in rows.items() if t.startswith("test_")} == {
        "test_narrow": "ok",
        "test_wide": "regressed",
    }
    status, out, _ = run(capsys, "compare", old, same, "--fail-on-regression")
    assert status == 0


def test_compare_lists_benchmarks_in_one_run_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = data_of()
    data["results"] = data["results"][:2]
    fewer = tmp_path / "fewer.json"
    fewer.write_text(json.dumps(data))
    _, out, _ = run(capsys, "compare", fewer, SAVE)
    assert out.splitlines()[-1] == (
        "only in NEW: test_train[mobilenet_v2] [train_step mobilenet_v2 bs=8 64x64 opt=sgd]"
    )


def test_runs_that_share_no_benchmark_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def renamed(result: dict[str, Any]) -> None:
        result["test_id"] = result["test_id"].replace("test_train", "test_other")

    other = edited(tmp_path, "other.json", renamed)
    status, out, err = run(capsys, "compare", SAVE, other)
    assert status == 2
    assert out == ""
    assert err == (
        f"cnnperf compare: {SAVE} and {other} share no benchmark (matched by test and "
        "configuration): OLD has test_train[resnet18] [train_step resnet18 bs=8 64x64 opt=sgd], "
        "test_train[vgg16] [train_step vgg16 bs=2 64x64 opt=sgd] and 1 more, NEW has "
        "test_other[resnet18] [train_step resnet18 bs=8 64x64 opt=sgd], test_other[vgg16] "
        "[train_step vgg16 bs=2 64x64 opt=sgd] and 1 more; compare runs of the same tests\n"
    )


def test_threshold_given_twice_must_agree(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(
        capsys, "compare", SAVE, SAVE, "--threshold=5%", "--fail-on-regression=10%"
    )
    assert status == 2
    assert err == (
        "cnnperf compare: --threshold=5% and --fail-on-regression=10% disagree; give the "
        "threshold once\n"
    )


def test_a_bad_threshold_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(SAVE), str(SAVE), "--fail-on-regression=lots"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "cnnperf compare: error: argument --fail-on-regression: 'lots' is not a threshold; use "
        "a percentage such as 10% or 2.5%, or a fraction such as 0.1"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--threshold=150%"],
            "cnnperf compare: error: argument --threshold: '150%' cannot fail anything: a "
            "throughput loss is always below 100%; use a percentage below 100% such as 10%",
        ),
        (
            ["--fail-on-regression", "15"],
            "cnnperf compare: error: argument --fail-on-regression: '15' as a fraction is 1500%; "
            "did you mean 15%? Write a percentage such as 15%, or a fraction below 1 such as 0.1",
        ),
    ],
)
def test_a_threshold_that_switches_the_gate_off_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", *args, str(SAVE), str(SAVE)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == message


# ---- files that cannot be used ----


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        (
            "{not json",
            "it is not valid JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))",
        ),
        (
            '{"schema": "something/else"}',
            "it is not a pytest-cnnperf results or baseline file (its schema is 'something/else'); "
            'those have "schema": "pytest-cnnperf/results" or "pytest-cnnperf/baseline". Write one '
            "with --cnnperf-json=PATH, or pass a file from the baselines folder",
        ),
        (
            '{"benchmarks": [], "machine_info": {}, "commit_info": {}}',
            "it is a pytest-benchmark file, not a pytest-cnnperf results or baseline file (those "
            'have "schema": "pytest-cnnperf/results" or "pytest-cnnperf/baseline"); write one '
            "with --cnnperf-json=PATH",
        ),
        (
            '{"schema": "pytest-cnnperf/results", "schema_version": 7}',
            "it was written by a newer pytest-cnnperf (results schema version 7; this one reads "
            "up to 2); upgrade pytest-cnnperf",
        ),
        (
            '{"schema": "pytest-cnnperf/results", "schema_version": 1, "created": "x", '
            '"machine": null, "results": []}',
            "its schema_version 1 is older than this pytest-cnnperf reads (results schema "
            "version 2); measure it again with --cnnperf-json=PATH",
        ),
        (
            '{"schema": "pytest-cnnperf/results", "schema_version": 2, "created": "x", '
            '"machine": null, "results": [{"config": {"kind": "train_step", "model": "m", '
            '"batch_size": 8, "image_size": null}, "test_id": 3}]}',
            "it is a malformed results file: file.results[0].test_id: expected str, found int 3",
        ),
        (
            '{"schema": "pytest-cnnperf/results", "schema_version": 2, "created": "x", '
            '"machine": null, "results": [{"test_id": "t.py::t"}]}',
            "it is a malformed results file: file.results[0]: the field 'config' is missing",
        ),
        (
            '{"schema": "pytest-cnnperf/baseline", "schema_version": 1, "machine": "m", '
            '"entries": {}}',
            "its schema_version 1 is older than this pytest-cnnperf reads (schema version 2); "
            "record its baselines again with --cnnperf-save",
        ),
        (
            '{"schema": "pytest-cnnperf/baseline", "schema_version": 2, "machine": "m", '
            '"entries": {"t": []}}',
            "it is malformed: file.entries['t']: expected an object, found list",
        ),
        (
            '{"schema": "pytest-cnnperf/baseline", "schema_version": 2, "machine": "m", '
            '"entries": {"t": {"k": {"config": {"kind": "train_step", "model": "m", '
            '"batch_size": 8, "image_size": null}, "measurement": []}}}}',
            "it is malformed: file.entries['t']['k'].measurement: expected an object, found list",
        ),
        (
            '{"schema": "pytest-cnnperf/results", "schema_version": 2, "created": "x", '
            '"machine": null, "results": []}',
            "it holds no measured benchmark",
        ),
    ],
)
@pytest.mark.parametrize("command", ["compare", "show", "modes", "epoch", "plot"])
def test_a_file_that_cannot_be_used_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: str,
    content: str | None,
    problem: str,
) -> None:
    path = tmp_path / "file.json"
    if content is not None:
        path.write_text(content)
    args: list[str | Path] = [command, path]
    if command == "compare":
        args = [command, path, SAVE]
    elif command == "plot":
        args += ["-o", tmp_path / "plot.png"]
    if command == "show" and problem == "it holds no measured benchmark":
        problem = "it holds no benchmark results"
    status, out, err = run(capsys, *args)
    assert (status, out) == (2, "")
    assert err == f"cnnperf {command}: {path}: {problem}\n"


def test_a_directory_is_not_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run(capsys, "show", tmp_path)
    assert status == 2
    assert err == f"cnnperf show: {tmp_path}: it is a directory, not a results or baseline file\n"


def test_the_installed_command_never_shows_a_traceback(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "cnnperf"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pytest_cnnperf.cli"]
    missing = tmp_path / "missing.json"
    done = subprocess.run(
        [*command, "compare", str(missing), str(SAVE)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr == f"cnnperf compare: {missing}: no such file\n"


# ---- show ----


def test_show_a_results_file(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "show", SAVE)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"{SAVE}: results of cpu-amd-epyc-2t, 2026-11-30T06:02:43Z"
    assert lines[2] == "3 benchmarks: 3 saved"
    assert lines[4].split()[:4] == ["verdict", "test", "benchmark", "throughput"]
    assert lines[5].split()[:5] == ["saved", "test_train[resnet18]", "resnet18", "bs=8", "64x64"]
    assert lines[-1] == (
        "environment: AMD EPYC, torch 2.14.1+cu130, torchvision 0.29.1+cu130, Python 3.11.7, "
        "2 threads (cpu-amd-epyc-2t)"
    )


def test_show_a_baseline_file(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "show", BASELINE)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"{BASELINE}: baselines of cpu-amd-epyc-2t"
    assert lines[2].split() == [
        "test", "benchmark", "throughput", "step", "peak", "mem", "samples",
    ]  # fmt: skip
    assert lines[3].split()[:2] == ["test_train[googlenet]", "googlenet"]
    assert lines[3].split()[-1] == "12"


# ---- modes ----


def test_modes_of_a_run_in_one_mode_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "modes", SAVE)
    assert status == 2
    assert err == (
        f"cnnperf modes: {SAVE}: every benchmark in it ran in the same mode; a mode table needs "
        "a run over several cuDNN modes (--cudnn=off,on), AMP dtypes "
        "(--cnnperf-zoo-amp=off,bf16), memory formats "
        "(--cnnperf-zoo-memory-format=contiguous,channels_last) or compile modes "
        "(--cnnperf-zoo-compile=off,default)\n"
    )


def amp_run(tmp_path: Path) -> Path:
    """The saved run, plus the same benchmarks under bf16 at 1.6 times the speed."""
    data = data_of()
    for result in list(data["results"]):
        fast = json.loads(json.dumps(result))
        fast["config"]["amp"] = "bf16"  # its key and headline are derived when it is read
        fast["test_id"] = fast["test_id"][:-1] + "-bf16]"
        for sample in fast["measurement"]["samples"]:
            sample["step_time_s"] /= 1.6
        data["results"].append(fast)
    path = tmp_path / "amp.json"
    path.write_text(json.dumps(data))
    return path


def test_modes_table_of_a_run_over_precisions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _ = run(capsys, "modes", amp_run(tmp_path))
    assert status == 0
    lines = out.splitlines()
    assert lines[2].split() == ["benchmark", "fp32", "(reference)", "bf16"]
    assert lines[3].split()[:3] == ["resnet18", "bs=8", "64x64"]
    assert lines[3].split()[-1] == "1.60x"


def test_modes_with_an_unknown_reference_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = amp_run(tmp_path)
    status, _, err = run(capsys, "modes", path, "--reference=fp16")
    assert status == 2
    assert err == (
        f"cnnperf modes: {path}: the reference 'fp16' names no mode of this run; it has: fp32, "
        "bf16\n"
    )


# ---- epoch ----


def test_epoch_projects_imagenet_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "epoch", SAVE)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == (
        "Time per epoch of 1,281,167 images (ImageNet-1k's training set) at the measured "
        "throughput (data loading not included)"
    )
    assert lines[2].split() == ["test", "benchmark", "throughput", "epoch"]
    assert len(lines) == 6


def test_epoch_of_another_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "epoch", SAVE, "--images", "50_000")
    assert out.splitlines()[0].startswith("Time per epoch of 50,000 images at")


def test_epoch_with_a_bad_number_of_images(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["epoch", str(SAVE), "--images", "many"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "cnnperf epoch: error: argument --images: 'many' is not a number of images; use a "
        "positive whole number such as 1281167 (ImageNet-1k's training set, the default) or 50000"
    )


# ---- plot ----


def test_plot_a_results_file_against_another(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "plot.png"
    status, out, _ = run(capsys, "plot", amp_run(tmp_path), "-o", output, "--against", SAVE)
    assert status == 0
    assert out == f"wrote {output}\n"
    assert output.read_bytes().startswith(b"\x89PNG")


def test_plot_to_a_file_of_another_kind_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "plot.jpg"
    status, _, err = run(capsys, "plot", SAVE, "-o", output)
    assert status == 2
    assert err == (
        f"cnnperf plot: {output}: a plot is drawn as PNG or SVG: the file name must end in .png "
        "or .svg, not .jpg (e.g. cnnperf.png)\n"
    )


def test_plot_of_a_baseline_file_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run(capsys, "plot", BASELINE, "-o", tmp_path / "plot.png")
    assert status == 2
    assert err == (
        f"cnnperf plot: {BASELINE}: it is a baseline file; plot draws a results file "
        "(--cnnperf-json), and draws a baseline file given with --against as its baseline\n"
    )


# ---- models ----


def test_models_lists_names_and_input_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "models")
    assert status == 0
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines()[1:] if line}
    assert rows["resnet50"] == "224x224"
    assert rows["inception_v3"] == "299x299"
    assert rows["efficientnet_b7"] == "600x600"
    assert out.splitlines()[-1].endswith(
        "models from torchvision, built with random weights (nothing is downloaded); a project "
        "adds its own with the pytest_cnnperf_register_models hook"
    )


# ---- on the gated run and the run over modes (tests/data, trimmed from real runs) ----

GATE = DATA / "zoo-gate.json"
MODES = DATA / "modes.json"


def test_show_a_gated_run_explains_change_and_notes(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "show", GATE)
    lines = out.splitlines()
    assert lines[2] == "3 benchmarks: 1 inconclusive, 2 ok"
    assert lines[6].split()[:2] == ["ok", "test_train[vgg16]"]
    assert lines[6].split()[8:11] == ["5.51", "images/s", "+5.6%"]
    assert (
        "note: test_train[resnet18]: the machine ran 6% slower than when the baseline was "
        "recorded; throughput compared after allowing for it"
    ) in lines


def test_show_markdown_of_a_gated_run(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "show", GATE, "--markdown")
    lines = out.splitlines()
    assert lines[0] == "### ❔ cnnperf: no regression found; 1 of 3 benchmarks inconclusive"
    assert lines[2] == (
        "- ❔ `test_train[googlenet]` (googlenet bs=8 64x64): inconclusive at the 10% "
        "threshold (throughput -0.6%, spread ±174%); re-run it or measure more with "
        "--cnnperf-effort=thorough"
    )


def test_show_markdown_of_a_baseline_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "show", BASELINE, "--markdown")
    assert status == 2
    assert err == (
        f"cnnperf show: {BASELINE}: it is a baseline file; --markdown shows a results file "
        "(--cnnperf-json)\n"
    )


@pytest.mark.usefixtures("quiet_machine")
def test_compare_the_saving_run_with_the_gated_one(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "compare", SAVE, GATE)
    assert status == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if "images/s" in line}
    assert rows["test_train[resnet18]"][8:10] == ["0.91x", "145.2"]
    assert rows["test_train[vgg16]"][-1] == "ok"


def test_modes_of_a_real_run(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "modes", MODES)
    assert status == 0
    lines = out.splitlines()
    assert lines[2].split() == [
        "benchmark", "fp32", "contiguous", "(reference)", "fp32", "channels_last", "bf16",
        "contiguous", "bf16", "channels_last",
    ]  # fmt: skip
    assert lines[3].split() == [
        "mobilenet_v2", "bs=8", "64x64", "45.7", "ms", "36.5", "ms", "1.25x", "49.7", "ms",
        "0.92x", "47.0", "ms", "0.97x",
    ]  # fmt: skip


def test_modes_against_another_reference(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "modes", MODES, "--reference", "bf16,contiguous")
    assert out.splitlines()[2].split()[1:4] == ["bf16", "contiguous", "(reference)"]


def test_plot_finds_the_baselines_next_to_the_results(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = results_file.load(GATE).results
    found = baselines_of(results, (DATA,))
    assert sorted(key[0] for key in found) == [
        r.test_id for r in sorted(results, key=lambda r: r.test_id)
    ]
    assert all(len(baseline.measured.samples) == 12 for baseline in found.values())
    assert all(baseline.decision is None for baseline in found.values())
    output = tmp_path / "gate.svg"
    assert run(capsys, "plot", GATE, "-o", output)[0] == 0
    assert "throughput: baseline (grey) above, this run below" in output.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["--fail-on-regression", "OLD", "NEW"],
        ["OLD", "NEW", "--fail-on-regression"],
        ["--fail-on-regression", "20%", "OLD", "NEW"],
        ["OLD", "NEW", "--fail-on-regression=0.2"],
    ],
)
@pytest.mark.usefixtures("quiet_machine")
def test_fail_on_regression_alone_or_with_a_threshold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]
) -> None:
    new = edited(tmp_path, "new.json", slower(1.5))
    paths = {"OLD": str(SAVE), "NEW": str(new)}
    status, out, _ = run(capsys, "compare", *[paths.get(a, a) for a in args])
    assert status == 1
    threshold = "20%" if any("2" in a for a in args) else "10%"
    assert f"regressed: slower beyond {threshold}" in out


# ---- bad numbers: refused when read, with the file, the field and the value ----

#: a number json.loads reads but no figure can be, as written in the file
BAD_NUMBERS = {
    "Infinity": "float inf",
    "-Infinity": "float -inf",
    "NaN": "float nan",
    "1e999": "float inf",
    "0": "int 0",
    "-0.04": "float -0.04",
    "[]": "list",
    "1" + "0" * 30: "an int of 31 digits",
}


def with_number(source: Path, tmp_path: Path, path: list[str | int], number: str) -> Path:
    """A copy of ``source`` with the value at ``path`` written as ``number`` (raw JSON text:
    json.dumps cannot write NaN where we want it, and a Python float cannot be 1e999)."""
    data = json.loads(source.read_text())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "@NUMBER@"
    copy = tmp_path / source.name
    copy.write_text(json.dumps(data).replace('"@NUMBER@"', number))
    return copy


ENTRY = ["entries", "test_train[resnet18]", "train_step resnet18 bs=8 64x64 opt=sgd"]
#: a baseline entry's samples
SAMPLES = [*ENTRY, "measurement", "samples"]
SAMPLE = ["results", 0, "measurement", "samples", 0]
#: (file, where the value is, the field as messages name it, what it must be)
NUMBER_FIELDS = [
    (
        "baseline",
        [*SAMPLES, 1, "step_time_s"],
        "measurement.samples[1].step_time_s",
        "a positive number",
    ),
    (
        "baseline",
        [*ENTRY, "measurement", "items_per_step"],
        "measurement.items_per_step",
        "a positive int",
    ),
    (
        "baseline",
        [*SAMPLES, 0, "calibration_s"],
        "measurement.samples[0].calibration_s",
        "a positive number",
    ),
    (
        "baseline",
        [*SAMPLES, 2, "memory", "allocated_bytes"],
        "measurement.samples[2].memory.allocated_bytes",
        "an int of at least 0",
    ),
    (
        "baseline",
        [*SAMPLES, 0, "cold_step_s"],
        "measurement.samples[0].cold_step_s",
        "a number of at least 0",
    ),
    (
        "baseline",
        [*SAMPLES, 0, "phases", "forward", 0],
        "measurement.samples[0].phases['forward'][0]",
        "a number of at least 0",
    ),
    ("baseline", [*ENTRY, "environment", "threads"], "environment.threads", "a positive int"),
    ("baseline", [*ENTRY, "config", "batch_size"], "config.batch_size", "a positive int"),
    ("results", [*SAMPLE, "step_time_s"], "step_time_s", "a positive number"),
    ("results", [*SAMPLE, "step_times_s", 0], "step_times_s[0]", "a positive number"),
    (
        "results",
        ["results", 0, "measurement", "items_per_step"],
        "items_per_step",
        "a positive int",
    ),
    (
        "results",
        [*SAMPLE, "memory", "allocated_bytes"],
        "memory.allocated_bytes",
        "an int of at least 0",
    ),
    ("results", [*SAMPLE, "calibration_s"], "calibration_s", "a positive number"),
]
#: the file each kind of field is tried in
SOURCES = {"baseline": BASELINE, "results": SAVE}


@pytest.mark.parametrize(
    ("kind", "path", "shown", "expected", "number"),
    [
        pytest.param(*field, number, id=f"{field[0]}-{field[2]}-{number[:8]}")
        for field in NUMBER_FIELDS
        for number in BAD_NUMBERS
        if not (number == "0" and "at least 0" in field[3])  # a zero count is a count
    ],
)
def test_a_bad_number_is_refused_naming_the_file_the_field_and_the_value(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    kind: str,
    path: list[str | int],
    shown: str,
    expected: str,
    number: str,
) -> None:
    """``step_time_s`` of Infinity, 0 or [] once raised ZeroDivisionError and ValueError in the
    gate and the commands; NaN and negative values passed (-4973 images/s). Each is refused
    when the file is read: the commands exit 2 with one line, the gate fails the benchmarks
    that need the file with the same words."""
    source = SOURCES[kind]
    bad = with_number(source, tmp_path, path, number)
    problem = f".{shown}: expected {expected}, found {BAD_NUMBERS[number]}"
    for command in (["show"], ["epoch"], ["compare", str(source)]):
        status, out, err = run(capsys, *command, bad)
        assert (status, out) == (2, ""), command
        assert err.startswith(f"cnnperf {command[0]}: {bad}: it is ")
        assert problem in err
        assert len(err.splitlines()) == 1, err
    if kind == "baseline":
        with pytest.raises(BaselineFileError) as caught:
            BaselineStore(tmp_path).load(bad)
        assert str(caught.value).startswith(f"baseline file {bad} cannot be used: it is malformed")
        assert problem in str(caught.value)


def shards(tmp_path: Path) -> tuple[Path, Path]:
    """The gated zoo run's results split into two files, as two shards of a CI matrix write."""
    data = json.loads(GATE.read_text())
    paths = []
    for name, part in (("a", data["results"][:1]), ("b", data["results"][1:])):
        path = tmp_path / f"shard-{name}.json"
        path.write_text(json.dumps({**data, "results": part}))
        paths.append(path)
    return paths[0], paths[1]


def test_the_shards_of_a_run_show_as_one_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first, second = shards(tmp_path)
    _, whole, _ = run(capsys, "show", GATE, "--markdown")
    status, merged, _ = run(capsys, "show", first, second, "--markdown")
    assert status == 0
    assert merged == whole
    status, out, _ = run(capsys, "show", first, second)
    assert out.splitlines()[0] == f"results of 2 files: {first}, {second}"
    assert out.splitlines()[2] == "3 benchmarks: 1 inconclusive, 2 ok"


def test_a_benchmark_in_two_shards_is_refused_naming_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first, _ = shards(tmp_path)
    status, _, err = run(capsys, "show", first, GATE)
    assert status == 2
    test = json.loads(first.read_text())["results"][0]
    assert err == (
        f"cnnperf show: {GATE}: {test['test_id']} [{test['key']}] is in {first} too: the shards "
        "of one run must measure each benchmark once (split the tests, e.g. with -k or "
        "pytest-split)\n"
    )
    status, _, err = run(capsys, "show", first, BASELINE)
    assert status == 2
    assert err == (
        f"cnnperf show: {BASELINE}: it holds no benchmark results; give the results files "
        "(--cnnperf-json) of the shards to show as one run\n"
    )
