"""The files and messages, derived from the dataclasses (``store.codec``): versioned, a version
this one does not read refused with the file, the version and the fix; every kind of document
round trips; bad values are refused with the file, their path and the value; and the files of
real runs (tests/data) load, compare and gate as the earlier version showed them."""

from __future__ import annotations

import dataclasses
import io
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from factories import ENV

from pytest_cnnperf.cli import main
from pytest_cnnperf.gate.decide import decide
from pytest_cnnperf.gate.policy import CPU, GateSettings
from pytest_cnnperf.history.runs import CiRun, GitState, RunInfo
from pytest_cnnperf.model import (
    Against,
    BenchConfig,
    CalibrationChanged,
    Comparison,
    Compilation,
    CompileComparison,
    CompilerStack,
    CompileSetting,
    CountedElsewhere,
    CountedOtherwise,
    CountsMoved,
    Creep,
    CudaGraphsSkipped,
    Decision,
    DeviceHealth,
    Disturbance,
    Disturbed,
    DriftUncovered,
    Energy,
    Flags,
    GraphBreak,
    ImpreciseBaseline,
    Look,
    MachineDrift,
    Measurement,
    MemoryPeak,
    NewGraphBreaks,
    NoBaseline,
    NoCounts,
    NoiseProfile,
    NoisyCalibration,
    NoProfile,
    NotAtRevision,
    NotSaved,
    OperatorCountsChanged,
    OtherKernels,
    Peak,
    ProfileFailed,
    Reason,
    Recompiled,
    Remark,
    Result,
    ResultsFile,
    Revision,
    Sample,
    SamplingChanged,
    SlowerCompile,
    SoftwareChanged,
    StepFlops,
    UnequalPairs,
    UntrustworthyGpu,
    Unvouched,
    Verdict,
)
from pytest_cnnperf.model.conditions import TwoSpeeds, Unprofiled
from pytest_cnnperf.model.findings import (
    ComputesOtherwise,
    NotCounted,
    StructureChanged,
    StructureRegressed,
)
from pytest_cnnperf.model.noise import BenchmarkNoise, NoiseProfileFile, NoiseRun
from pytest_cnnperf.model.result import Headline
from pytest_cnnperf.model.structure import CountChange, NumbersDiffer
from pytest_cnnperf.sampling import messages, xdist
from pytest_cnnperf.store import codec, results_file
from pytest_cnnperf.store import noise as noise_store
from pytest_cnnperf.store.baseline import (
    BASELINE,
    BaselineFile,
    BaselineFileError,
    BaselineStore,
)

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"
MODULE = "pytest_cnnperf/zoo/test_zoo"
BASELINE_NAME = f"baselines/cpu-amd-epyc-2t/{MODULE}.json"
BASELINE_FILE = DATA / BASELINE_NAME


# ---- a result with every field set, a reason of every kind ----

BREAK = GraphBreak("Failed to trace builtin operator", "models.py:12", "print(x.shape)")
THROUGHPUT = Comparison(
    "throughput",
    200.0,
    160.0,
    0.2,
    0.1,
    Verdict.REGRESSED,
    0.001,
    0.15,
    0.25,
    12,
    6,
    1.02,
    0.21,
    Look(2, 3, 0.01 / 3, 0.05 / 3),
)
MEMORY = Comparison("memory", 1e8, 1.1e8, 0.1, 0.05, Verdict.REGRESSED, None, None, None, 12, 6)
REASONS: tuple[Reason, ...] = (
    NoBaseline("cpu-test-2t", ("nvidia-h200",)),
    NotAtRevision("main (0123456789)", "its test is not there"),
    MachineDrift(1.06, 1.02, 1.1, allowed=False),
    DriftUncovered(1.4, 0.2, "default"),
    Unvouched(
        0.14, 0.1, 0.06, 0.03, 0.02, "runs differ by 2.0% (recorded 2026-12-04, 30 runs)", True
    ),
    Unprofiled(0.041, calibrated=True, benchmarks=3),
    TwoSpeeds(0.33, fast=7, runs=20, between=0.17),
    NoisyCalibration(0.12, 0.1),
    CalibrationChanged("cuda-mm-fp16-2048x4", "cuda-mm-fp16-4096x8"),
    SoftwareChanged(),
    Disturbed(3, 6, Disturbance.QUIET_REGRESSED),
    UnequalPairs(1, 6, Disturbance.NO_VERDICT),
    UntrustworthyGpu(("GPU clocks were throttled (HwThermalSlowdown)",)),
    SamplingChanged(baseline_in_process=False, current_in_process=True),
    NewGraphBreaks(2, 1, (BREAK,)),
    Recompiled(1, ("tensor 'x' size mismatch at index 0",), eager_frames=1),
    SlowerCompile(12.5, 10.0, 0.2, "cold"),
    CudaGraphsSkipped(2, "cuda:0"),
    Creep((THROUGHPUT, MEMORY), 5, "a1b2c3d4e5", "2026-11-29T10:00:00Z", "images"),
    NoProfile(),
    ProfileFailed("RuntimeError: the profiler could not start"),
    ImpreciseBaseline(22, 0.041, 0.025),
    StructureRegressed((CountChange("sync", "aten::_local_scalar_dense", "layer3.1", 0, 1),), 0),
    StructureChanged((CountChange("cast", "aten::_to_copy float32->float64", "fc", 1, 3),)),
    NotCounted("RuntimeError: a custom kernel without a Python binding"),
    ComputesOtherwise(
        NumbersDiffer("loss of step 1", 4.472, 4.556, 1e-3),
        strict=True,
        likely_cause="torch 2.5 -> 2.14",
    ),
    OtherKernels(("CPU capability AVX2 -> AVX512",)),
    NoCounts(),
    CountedOtherwise(("kernels avx2 -> no-fma",)),
    CountedElsewhere("cpu-amd-epyc-f25m17s1-avx512-2t"),
    CountsMoved(0.004, 0.001),
    OperatorCountsChanged((("aten::conv2d", 6_930_000, 8_460_000),)),
    NotSaved("the run was interrupted"),
    Remark("creep: worse than the best of its last 5 runs", "creep"),
)
FULL_CONFIG = BenchConfig(
    kind="train_step",
    model="resnet18",
    batch_size=8,
    image_size=(64, 64),
    amp="bf16",
    channels_last=True,
    optimizer="sgd",
    loss="cross_entropy",
    cudnn_mode="benchmark",
    world_size=2,
    unit="images",
    label="resnet18-tuned",
    compile=CompileSetting(
        "inductor", "max-autotune", True, None, (("epilogue_fusion", True), ("max_splits", 4))
    ),
    cuda_graphs=True,
)
FULL_ENVIRONMENT = dataclasses.replace(
    ENV,
    machine="nvidia-h200",
    device="cuda:0",
    device_name="NVIDIA H200",
    driver="580.65",
    cuda="13.0",
    cudnn="91002",
    flags=Flags("benchmark", True, False, "high", True, {"cuda.matmul": "tf32"}),
    compiler=CompilerStack("3.5.0", "g++", "g++ (GCC) 14.2.0"),
)
FULL_SAMPLE = Sample(
    step_time_s=0.04,
    step_times_s=(0.039, 0.04, 0.041),
    phases={"forward": (0.012, 0.013), "backward": (0.024, 0.025), "optimizer": (0.004, 0.003)},
    cold_step_s=1.5,
    warmup_steps=7,
    warmup_steady=False,
    calibration_s=0.002,
    calibration_unit="cuda-mm-fp16-4096x8",
    memory=MemoryPeak(100 << 20, 200 << 20, "cuda-caching-allocator", alloc_retries=0),
    health=DeviceHealth(
        1200,
        1980,
        3200,
        88,
        650.5,
        700.0,
        ("HwThermalSlowdown",),
        (4242,),
        ("GPU clocks were throttled (HwThermalSlowdown)",),
        {"thermal": 0.25},
    ),
    in_process=True,
    single_rank_step_s=0.035,
    cpu_contention=0.0,
    compilation=Compilation(
        compile_s=12.5,
        cache="cold",
        graphs=3,
        graph_breaks=(BREAK, GraphBreak("optimizer step", internal=True)),
        recompiles=1,
        warmup_recompiles=2,
        recompile_reasons=("tensor 'x' size mismatch at index 0",),
        eager_frames=1,
        cudagraph_skips=2,
    ),
    flops=StepFlops(
        {"forward": 10**9, "backward": 2 * 10**9, "optimizer": 0},
        {"aten.convolution": 25 * 10**8, "aten.mm": 5 * 10**8},
        8,
        "meta",
    ),
    peak=Peak("bf16", 9.89e14, "table", "NVIDIA H200's datasheet, dense bf16"),
    energy=Energy(120.5, 2.5, 800, "nvml"),
)
FULL = Result(
    config=FULL_CONFIG,
    test_id="tests/perf/test_models.py::test_resnet[64]",
    recorded="2026-11-30T06:01:33Z",
    environment=FULL_ENVIRONMENT,
    measurement=Measurement(
        16, (FULL_SAMPLE, dataclasses.replace(FULL_SAMPLE, step_time_s=0.041)), "images"
    ),
    decision=Decision(
        verdict=Verdict.REGRESSED,
        throughput=THROUGHPUT,
        memory=MEMORY,
        environment_changes=("torch 2.14.1 -> 2.15.0",),
        reasons=REASONS,
        baseline_file=f"baselines/nvidia-h200/{MODULE}.json",
        failed=True,
        compile=CompileComparison(2, 1, 1, 1, 2, "cold", 12.5, 10.0, 0.2, Verdict.REGRESSED),
        against=Against(
            Revision("main", "0123456789abcdef0123456789abcdef01234567", "Faster stem"),
            Revision("HEAD", "89abcdef0123456789abcdef0123456789abcdef", "Wider", dirty=True),
        ),
    ),
    duration_s=31.5,
)
FAILED = Result(
    config=FULL_CONFIG,
    test_id="tests/perf/test_models.py::test_resnet[128]",
    recorded="2026-11-30T06:02:00Z",
    environment=FULL_ENVIRONMENT,
    decision=Decision(Verdict.ERROR, failed=True),
    duration_s=2.0,
    error="RuntimeError: CUDA out of memory (raised at models.py:30 in forward)",
)


def test_the_full_result_holds_a_reason_of_every_kind() -> None:
    assert {type(reason) for reason in REASONS} == set(Reason.kinds())


# ---- every dataclass a file can hold has a codec ----


def reachable(root: type) -> set[type]:
    """The dataclasses a ``root`` can hold, through its fields and what it writes beside them
    (``DERIVED``), ``root`` included."""
    found: set[type] = set()

    def visit(hint: Any) -> None:
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            if hint in found:
                return
            found.add(hint)
            hints = typing.get_type_hints(hint, include_extras=True)
            for f in dataclasses.fields(hint):
                visit(hints[f.name])
            for name in getattr(hint, "DERIVED", ()):
                visit(typing.get_type_hints(getattr(hint, name).fget)["return"])
        for arg in typing.get_args(hint):
            visit(arg)
        if isinstance(hint, type) and "kinds" in vars(hint):  # a base that lists its kinds
            for kind in hint.kinds():
                visit(kind)

    visit(root)
    return found


ROOTS = [
    Result,
    ResultsFile,
    BaselineFile,
    messages.Job,
    messages.ChildReport,
    xdist.WorkerReport,
    RunInfo,
]


@pytest.mark.parametrize("root", ROOTS, ids=lambda root: root.__name__)
def test_every_dataclass_a_document_holds_has_a_codec(root: type) -> None:
    """Nothing is mapped by hand: the codec of each dataclass (and of each of its fields'
    types) is derived from its type hints, and a type it cannot write fails here, not when a
    file is written. (The round trips below cover the values; this covers every type.)"""
    classes = reachable(root)
    assert root in classes
    for cls in classes:
        hints = typing.get_type_hints(cls, include_extras=True)
        assert isinstance(codec.codec_for(cls), codec.ObjectOf)
        for f in dataclasses.fields(cls):
            assert codec.codec_for(hints[f.name]) is not None, (cls, f.name)


def test_the_walk_reaches_every_record_of_a_result() -> None:
    """(So that the test above checks them: the reasons through the union they belong to, the
    headline figures through what a result writes beside its fields.)"""
    assert {Result, Measurement, Sample, Decision, Comparison} <= reachable(ResultsFile)
    assert Result in reachable(BaselineFile)
    assert set(Reason.kinds()) | {Headline, Compilation, GraphBreak} <= reachable(Result)


# ---- versions ----


def test_files_are_versioned_and_read_at_their_version_only() -> None:
    """Results, baseline and noise profile files are at version 2, the first a release wrote
    (version 1 was written before 0.1.0 and is not read); the messages between the processes of
    one run are never read by another version either."""
    documents = (
        results_file.RESULTS,
        BASELINE,
        noise_store.NOISE,
        messages.JOB,
        messages.CHILD_REPORT,
        xdist.WORKER_REPORT,
    )
    assert {d.schema: d.version for d in documents} == {
        "pytest-cnnperf/results": 2,
        "pytest-cnnperf/baseline": 2,
        "pytest-cnnperf/noise-profile": 2,
        "pytest-cnnperf/job": 2,
        "pytest-cnnperf/sample-report": 2,
        "pytest-cnnperf/worker-report": 2,
    }
    for document in documents:
        assert document.version_problem({"schema_version": 1}), document.schema


NEWER = (
    "it was written by a newer pytest-cnnperf ({noun}schema version 3; this one reads up to 2); "
    "upgrade pytest-cnnperf"
)


#: how a results file of a version this one does not read is refused: measure again
AGAIN = "; measure it again with --cnnperf-json=PATH"


@pytest.mark.parametrize(
    ("version", "results_problem", "baseline_problem"),
    [
        (3, NEWER.format(noun="results "), NEWER.format(noun="")),
        (
            1,  # written before 0.1.0
            "its schema_version 1 is older than this pytest-cnnperf reads (results schema "
            f"version 2){AGAIN}",
            "its schema_version 1 is older than this pytest-cnnperf reads (schema version 2)",
        ),
        (
            0,
            f"its schema_version 0 was never written by pytest-cnnperf{AGAIN}",
            "its schema_version 0 was never written by pytest-cnnperf",
        ),
        (
            None,
            f"its schema_version is missing or not a number{AGAIN}",
            "its schema_version is missing or not a number",
        ),
    ],
    ids=["newer", "older", "never-written", "missing"],
)
def test_a_version_this_one_cannot_read_is_refused_naming_the_file(
    tmp_path: Path, version: int | None, results_problem: str, baseline_problem: str
) -> None:
    """The message names the file and the version found, and says what to do (the baseline
    file's message ends with the fix every unusable baseline file gets)."""
    data = json.loads((DATA / "zoo-save.json").read_text())
    data["schema_version"] = version
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    baseline = json.loads(BASELINE_FILE.read_text())
    baseline["schema_version"] = version
    baseline_path = tmp_path / BASELINE_NAME
    baseline_path.parent.mkdir(parents=True)
    baseline_path.write_text(json.dumps(baseline))
    with pytest.raises(results_file.FileProblem) as results_refused:
        results_file.load(path)
    assert str(results_refused.value) == f"{path}: {results_problem}"
    with pytest.raises(BaselineFileError) as baseline_refused:
        BaselineStore(tmp_path / "baselines").entry(
            "cpu-amd-epyc-2t", MODULE, "test_train[vgg16]", "k"
        )
    assert str(baseline_refused.value) == (
        f"baseline file {baseline_path} cannot be used: {baseline_problem}. Mend it (or delete "
        "it) and record new baselines with --cnnperf-save; it is left untouched until then."
    )


# ---- round trips: dump, JSON, load ----

JOB = messages.Job(
    site=messages.Site("tests/perf/test_models.py::test_resnet[64]", "/p/t.py", 1, FULL.key),
    replay=(FULL, FAILED),
    out="/tmp/sample-1.json",
    rank=1,
    world_size=2,
    rendezvous="/tmp/sample-1.store",
    parent_pid=42,
    memory=False,
    counted=True,
)
RUN = RunInfo(
    uid="0f8e2c",
    recorded="2026-11-30T06:03:00Z",
    machine="nvidia-h200",
    host="runner-7",
    git=GitState("a1b2c3d4e5", None, True, "2026-11-30T05:00:00+00:00"),
    ci=CiRun(
        "github",
        "123",
        "2",
        "job-4",
        "f0e1d2",
        "a1b2c3d4e5",
        "feature",
        "main",
        "17",
        "owner/project",
        "https://github.com/owner/project/actions/runs/123",
    ),
    cnnperf="1.4.0",
    accepted=True,
)

DOCUMENTS: dict[str, tuple[Any, Any]] = {
    "results": (
        results_file.RESULTS,
        ResultsFile("2026-11-30T06:03:00Z", "nvidia-h200", (FULL, FAILED)),
    ),
    "baseline": (
        BASELINE,
        BaselineFile("nvidia-h200", {"test_resnet[64]": {FULL.key: FULL.as_baseline()}}, MODULE),
    ),
    "job": (messages.JOB, JOB),
    "sample-report": (
        messages.CHILD_REPORT,
        messages.ChildReport(taken=messages.TakenSample(FULL_SAMPLE, FULL_ENVIRONMENT), rank=1),
    ),
    "sample-report-of-an-error": (
        messages.CHILD_REPORT,
        messages.ChildReport(error="RuntimeError: boom", rank=1, failed_at=1764480000.5),
    ),
    "worker-report": (
        xdist.WORKER_REPORT,
        xdist.WorkerReport(
            results=(FULL, FAILED),
            pending=(
                xdist.Pending(
                    "nvidia-h200", MODULE, {"test_resnet[64]": {FULL.key: FULL.as_baseline()}}
                ),
            ),
            collected={"tests/perf/test_models.py": ("test_resnet[64]", "test_resnet[128]")},
            uncollected={"tests/perf/test_other.py": ("test_vgg",)},
            machine="nvidia-h200",
            warnings=("2 xdist workers share this CPU's 2 cores",),
        ),
    ),
    "noise-profile": (
        noise_store.NOISE,
        NoiseProfileFile(
            "cpu-amd-epyc-f25m17s1-avx512-2t",
            NoiseProfile(
                0.08,
                0.09,
                0.02,
                0.06,
                0.2,
                30,
                3,
                "recorded",
                "2026-12-04T10:00:00Z",
                "cnnperf noise -- x",
                instances=2,
                freedom=18.5,
                modes=2,
                mode_gap=0.33,
                fast_runs=7,
            ),
            (
                (
                    "test_zoo::test_train[resnet18] [train_step resnet18 bs=8 64x64 opt=sgd]",
                    BenchmarkNoise(
                        NoiseProfile(0.08, 0.09, 0.02, 0.06, 0.2, 20, 1, "recorded"),
                        (
                            NoiseRun("vm/85b37765", 22, -2.5, 0.1, -5.2, 0.08, 0.05, "2026-12-07"),
                            NoiseRun("vm/0a1b2c3d", 11, -2.4, 0.09),
                        ),
                    ),
                ),
            ),
        ),
    ),
    "history-run": (RunInfo, RUN),
    "history-result": (Result, FULL),
}


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_every_kind_of_document_round_trips(kind: str) -> None:
    document, value = DOCUMENTS[kind]
    if isinstance(document, codec.Document):
        data = json.loads(json.dumps(document.dump(value)))
        assert (data["schema"], data["schema_version"]) == (document.schema, document.version)
        assert document.load(data) == value
    elif document is Result:  # as a history keeps a result: with its schema version
        data = json.loads(json.dumps(results_file.result_data(value)))
        assert data["schema_version"] == 2
        assert results_file.read_result(data, "row") == value
    else:
        assert codec.load(document, json.loads(json.dumps(codec.dump(value)))) == value


def test_fields_at_their_default_are_left_out() -> None:
    """A file holds what differs from the defaults (and, for a result, its key and headline
    figures, which are never read back)."""
    assert codec.dump(Result(BenchConfig("train_step", "m", 8, None))) == {
        "config": {"kind": "train_step", "model": "m", "batch_size": 8, "image_size": None},
        "key": "train_step m bs=8",
    }


def test_a_results_file_carries_each_benchmarks_headline_figures(tmp_path: Path) -> None:
    """Beside the samples, a result says its throughput, step time, peak memory and change
    against its baseline, for a reader of the file (``jq``); they are not read back."""
    gated = results_file.load(DATA / "zoo-gate.json").results
    path = tmp_path / "results.json"
    results_file.write(path, [*gated, FAILED], "cpu-amd-epyc-2t")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2
    written = data["results"]
    for result, row in zip(gated, written[:-1], strict=True):
        m, d = result.measured, result.decision
        assert d is not None
        assert d.throughput is not None
        assert d.memory is not None
        assert row["key"] == result.key
        assert row["headline"] == {
            "items_per_second": m.items_per_step / m.step_time_s,
            "step_time_s": m.step_time_s,
            "peak_allocated_bytes": m.peak_allocated_bytes,
            "throughput_change": d.throughput.change,
            "memory_change": d.memory.change,
        }
        assert len(row["measurement"]["samples"]) == len(m.samples) == 12
    vgg16 = written[1]["headline"]  # 5.72 images/s, 5.6% more than its baseline's 5.51
    assert round(vgg16["items_per_second"], 2) == 5.72
    assert round(vgg16["throughput_change"], 3) == -0.056
    assert "headline" not in written[-1]  # nothing measured
    assert results_file.load(path).results == (*gated, FAILED)


# ---- refused values: the file, the field's path, the value ----


def bad_copy(source: Path, target: Path, where: list[str | int], value: str) -> Path:
    """A copy of ``source`` with the value at ``where`` written as the raw JSON ``value``."""
    data = json.loads(source.read_text())
    holder = data
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = "@VALUE@"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data).replace('"@VALUE@"', value))
    return target


ENTRY = ["entries", "test_train[googlenet]", "train_step googlenet bs=8 64x64 opt=sgd"]
ENTRY_PATH = "file.entries['test_train[googlenet]']['train_step googlenet bs=8 64x64 opt=sgd']"


@pytest.mark.parametrize(
    ("where", "value", "problem"),
    [
        (
            [*ENTRY, "measurement", "samples", 1, "step_time_s"],
            "Infinity",
            f"{ENTRY_PATH}.measurement.samples[1].step_time_s: expected a positive number, "
            "found float inf",
        ),
        (
            [*ENTRY, "measurement", "samples"],
            "[]",
            f"{ENTRY_PATH}.measurement.samples: expected at least one value, found an empty list",
        ),
    ],
    ids=["infinite", "no-samples"],
)
def test_a_bad_value_in_a_baseline_file_is_refused_naming_the_file_the_path_and_the_value(
    tmp_path: Path, where: list[str | int], value: str, problem: str
) -> None:
    bad = bad_copy(BASELINE_FILE, tmp_path / BASELINE_NAME, where, value)
    with pytest.raises(BaselineFileError) as caught:
        BaselineStore(tmp_path / "baselines").entry(
            "cpu-amd-epyc-2t", MODULE, "test_train[googlenet]", "k"
        )
    assert str(caught.value) == (
        f"baseline file {bad} cannot be used: it is malformed: {problem}. Mend it (or delete it) "
        "and record new baselines with --cnnperf-save; it is left untouched until then."
    )


SAMPLE = ["results", 2, "measurement", "samples", 3]


@pytest.mark.parametrize(
    ("where", "value", "problem"),
    [
        (
            [*SAMPLE, "step_times_s", 0],
            "NaN",
            "file.results[2].measurement.samples[3].step_times_s[0]: expected a positive number, "
            "found float nan",
        ),
        (
            [*SAMPLE, "memory", "allocated_bytes"],
            "-1",
            "file.results[2].measurement.samples[3].memory.allocated_bytes: expected an int of at "
            "least 0, found int -1",
        ),
        (
            ["results", 0, "decision", "reasons", 0],
            '{"kind": "sunspots", "count": 3}',
            "file.results[0].decision.reasons[0].kind: 'sunspots' is not one of 'no-baseline', "
            "'not-at-revision', 'machine-drift', 'drift-uncovered', 'unvouched', 'unprofiled', "
            "'two-speeds', 'noisy-calibration', 'calibration-changed', 'software-changed', "
            "'disturbed', 'unequal-pairs', 'untrustworthy-gpu', 'sampling-changed', "
            "'other-kernels', 'imprecise-baseline', 'not-saved', 'remark', 'new-graph-breaks', "
            "'recompiled', 'slower-compile', 'cuda-graphs-skipped', 'creep', 'no-profile', "
            "'profile-failed', 'structure-regressed', 'structure-changed', 'not-counted', "
            "'computes-otherwise', 'no-counts', 'counted-otherwise', 'counted-elsewhere', "
            "'counts-moved', 'operator-counts-changed'",
        ),
        (
            ["results", 0, "decision", "verdict"],
            '"worse"',
            "file.results[0].decision.verdict: 'worse' is not one of 'ok', 'regressed', "
            "'improved', 'inconclusive', 'new', 'saved', 'error'",
        ),
    ],
    ids=["nan", "negative", "unknown-reason", "unknown-verdict"],
)
def test_a_bad_value_in_a_results_file_is_refused_naming_the_file_the_path_and_the_value(
    tmp_path: Path, where: list[str | int], value: str, problem: str
) -> None:
    bad = bad_copy(DATA / "zoo-gate.json", tmp_path / "zoo-gate.json", where, value)
    with pytest.raises(results_file.FileProblem) as caught:
        results_file.load(bad)
    assert str(caught.value) == f"{bad}: it is a malformed results file: {problem}"


def test_a_list_is_named_as_such_and_an_empty_one_where_values_are_needed() -> None:
    """A list where a number or an object belongs is ``list``; ``an empty list`` only where at
    least one value is needed."""
    with pytest.raises(codec.DataError) as number:
        codec.load(Sample, {"step_time_s": []})
    assert str(number.value) == "file.step_time_s: expected a positive number, found list"
    with pytest.raises(codec.DataError) as empty:
        codec.load(Measurement, {"items_per_step": 8, "samples": []})
    assert str(empty.value) == "file.samples: expected at least one value, found an empty list"


COMMANDS = {
    "compare-save-gate.txt": ["compare", "zoo-save.json", "zoo-gate.json"],
    "compare-baseline-gate.txt": ["compare", BASELINE_NAME, "zoo-gate.json"],
    "show-gate.txt": ["show", "zoo-gate.json"],
    "show-gate.md": ["show", "--markdown", "zoo-gate.json"],
    "show-baseline.txt": ["show", BASELINE_NAME],
    "modes.txt": ["modes", "modes.json"],
    "epoch-gate.txt": ["epoch", "zoo-gate.json"],
}


@pytest.mark.parametrize("golden", sorted(COMMANDS))
def test_the_command_shows_golden_files_as_the_earlier_version_did(
    golden: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the files of real runs, the ``cnnperf`` command's output is the earlier version's,
    byte for byte."""
    monkeypatch.chdir(DATA)
    out = io.StringIO()
    assert main(COMMANDS[golden], out=out) == 0
    assert out.getvalue() == (GOLDEN / golden).read_text()


def test_golden_runs_gate_with_the_earlier_versions_figures() -> None:
    """The gating run's samples against the golden baseline file, at the last look of the
    default design: the figures that come from the samples themselves are as the earlier version
    had them (``golden/decisions-gate.json``). Its p-values, bounds, verdicts and reasons are
    those of the earlier gate's statistics and are not compared."""
    settings = GateSettings(
        CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False
    )
    design = CPU.sampling.design(CPU.gate)
    last = design.look(len(design.looks) - 1)

    results = results_file.load(DATA / "zoo-gate.json").results
    store = BaselineStore(DATA / "baselines")
    golden = json.loads((GOLDEN / "decisions-gate.json").read_text())
    for result, earlier in zip(results, golden, strict=True):
        assert result.environment is not None
        assert result.decision is not None
        entry = store.entry(result.environment.machine, MODULE, result.test, result.key)
        decision = decide(result, entry, settings, last, result.decision.baseline_file)
        expected = codec.load(Decision, earlier["decision"])
        assert decision.memory == expected.memory
        assert decision.throughput is not None
        assert expected.throughput is not None
        for field in ("baseline", "current", "raw_change", "baseline_samples", "current_samples"):
            assert getattr(decision.throughput, field) == getattr(expected.throughput, field)
        assert decision.baseline_file == expected.baseline_file
