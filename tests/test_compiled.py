"""Compiled benchmarks: ``compile=`` and ``cuda_graphs=`` checked, compile figures in the files
and reports, the gate's rules for graph breaks, recompiles and compile time, and torch.compile
run end to end.

Only one end-to-end test compiles in CI (with the ``aot_eager`` backend: Dynamo and AOTAutograd,
the path every backend shares, in seconds); those that run inductor, whose cold compiles take
half a minute and more on a 2-core CPU, are marked slow (``pytest -m slow``)."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from factories import ENV, QUIET, one_look
from scripted import Scripted

from pytest_cnnperf import benchmark
from pytest_cnnperf.benchmark import ArgumentProblem
from pytest_cnnperf.gate.decide import decide
from pytest_cnnperf.gate.policy import CPU, GateSettings
from pytest_cnnperf.gate.throughput import throughput_at
from pytest_cnnperf.measuring.compiled import CompileFailed, _guarded, forget_stale_imports
from pytest_cnnperf.model import (
    BenchConfig,
    Compilation,
    CompilerStack,
    CompileSetting,
    Decision,
    Environment,
    GraphBreak,
    Measurement,
    MemoryPeak,
    Recompiled,
    Result,
    ResultsFile,
    Sample,
    Verdict,
)
from pytest_cnnperf.parsers import parse_compile_modes
from pytest_cnnperf.reports import explain, markdown, modes, table, terminal
from pytest_cnnperf.store import codec
from pytest_cnnperf.store.baseline import BaselineFile, parse, render
from pytest_cnnperf.store.results_file import RESULTS
from pytest_cnnperf.zoo import ZooOptions, cases

# ---- compile= and cuda_graphs= ----


@pytest.mark.parametrize(
    ("value", "setting"),
    [
        (True, CompileSetting()),
        ("default", CompileSetting()),
        ({}, CompileSetting()),
        ("max-autotune", CompileSetting(mode="max-autotune")),
        ({"mode": "reduce-overhead"}, CompileSetting(mode="reduce-overhead")),
        (
            {"backend": "aot_eager", "fullgraph": True, "dynamic": None},
            CompileSetting(backend="aot_eager", fullgraph=True, dynamic=None),
        ),
        (
            {"options": {"max_autotune": True, "epilogue_fusion": False}},
            CompileSetting(options=(("epilogue_fusion", False), ("max_autotune", True))),
        ),
    ],
)
def test_compile_settings_normalise_to_torch_compile_arguments(
    value: object, setting: CompileSetting
) -> None:
    request = benchmark.compile_request(value)
    assert request is not None
    assert request.setting == setting


@pytest.mark.parametrize("value", [None, False])
def test_no_compile_is_eager(value: object) -> None:
    assert benchmark.compile_request(value) is None


def test_a_callable_backend_is_kept_and_named() -> None:
    def my_backend(gm: Any, inputs: Any) -> Any:
        return gm

    request = benchmark.compile_request({"backend": my_backend})
    assert request is not None
    assert request.backend is my_backend
    assert request.setting.label() == "compile=my_backend"


@pytest.mark.parametrize(
    ("setting", "label"),
    [
        (CompileSetting(), "compile"),
        (CompileSetting(mode="max-autotune"), "compile=max-autotune"),
        (CompileSetting(backend="aot_eager", fullgraph=True), "compile=aot_eager,fullgraph"),
        (CompileSetting(dynamic=None), "compile=dynamic=auto"),
        (CompileSetting(options=(("max_autotune", True),)), "compile=max_autotune=True"),
    ],
)
def test_the_key_names_the_compile_setting(setting: CompileSetting, label: str) -> None:
    config = BenchConfig("train_step", "resnet18", 8, (64, 64), optimizer="sgd", compile=setting)
    assert config.key == f"train_step resnet18 bs=8 64x64 opt=sgd {label}"
    eager = dataclasses.replace(config, compile=None)
    assert eager.key == "train_step resnet18 bs=8 64x64 opt=sgd"


FORMS = (
    "use True, a mode (default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs) or a "
    "dict of torch.compile arguments (backend, mode, fullgraph, dynamic, options), e.g. "
    "compile={'mode': 'max-autotune'}"
)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fast", f"compile='fast' is not a compile mode; {FORMS}"),
        (3, f"compile=3 is not a compile setting; {FORMS}"),
        (
            {"mode": "fast"},
            "compile={'mode': 'fast'} is not a torch.compile mode; use one of default, "
            "reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
        ),
        (
            {"disable": True},
            "compile={'disable': True}: disable is not an argument it takes; use backend, mode, "
            "fullgraph, dynamic, options (the plugin sets the rest)",
        ),
        (
            {"mode": "max-autotune", "options": {"max_autotune": True}},
            "compile={'mode': 'max-autotune', 'options': {'max_autotune': True}}: torch.compile "
            "takes a mode or options, not both; put the mode's options among yours "
            "(torch._inductor.list_mode_options(mode))",
        ),
        (
            {"backend": ""},
            "compile={'backend': ''}: a backend is a name such as 'inductor' or 'aot_eager' "
            "(torch.compiler.list_backends()) or a callable",
        ),
        ({"fullgraph": "yes"}, "compile={'fullgraph': 'yes'}: use True or False"),
        ({"dynamic": 1}, "compile={'dynamic': 1}: use True or False or None"),
        (
            {"options": ["max_autotune"]},
            "compile={'options': ['max_autotune']}: options is a dict of inductor option names "
            "and values, e.g. {'max_autotune': True} (see torch._inductor.list_options())",
        ),
        (
            {"options": {"cpp.simdlen": [8]}},
            "compile={'options': {'cpp.simdlen': [8]}}: an option's value must be a bool, number "
            "or string (benchmarks record it in their baseline)",
        ),
    ],
)
def test_bad_compile_arguments_name_the_value_and_the_accepted_forms(
    value: object, message: str
) -> None:
    with pytest.raises(ArgumentProblem) as caught:
        benchmark.compile_request(value)
    assert str(caught.value) == message


def test_cuda_graphs_need_cuda_and_go_alone() -> None:
    compiled = benchmark.compile_request(True)
    assert benchmark.cuda_graphs(True, "cuda", None, "bf16") is True
    assert benchmark.cuda_graphs(False, "cpu", compiled, None) is False
    with pytest.raises(ArgumentProblem, match=r"^cuda_graphs=True and compile= both ask"):
        benchmark.cuda_graphs(True, "cuda", compiled, None)
    with pytest.raises(ArgumentProblem, match=r"^cuda_graphs=True with amp='fp16': the gradient"):
        benchmark.cuda_graphs(True, "cuda", None, "fp16")
    with pytest.raises(ArgumentProblem, match=r"^cuda_graphs='yes': use True or False$"):
        benchmark.cuda_graphs("yes", "cuda", None, None)


TINY = '''
    import torch
    from torch import nn

    PRINT = False


    class Tiny(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.head = nn.Linear(4, num_classes)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            if PRINT:
                print("features", tuple(y.shape))  # a graph break
            return self.head(y.mean(dim=(2, 3)))


    class Growing(Tiny):
        """Crops its features one pixel larger at every call: a new shape every step."""

        calls = 0

        def forward(self, x):
            self.calls += 1
            y = torch.relu(self.conv(x))[:, :, : 2 + self.calls % 30]
            return self.head(y.mean(dim=(2, 3)))
'''


@pytest.fixture(scope="module")
def dynamo() -> None:
    """Dynamo and AOTAutograd loaded into this process by compiling once: modules first
    imported inside an in-process pytester run are dropped after it, and these cannot be
    imported twice (see tests/conftest.py)."""
    import torch

    double = torch.compile(lambda x: (x * 2).sum(), backend="aot_eager")
    double(torch.ones(2, requires_grad=True)).backward()


@pytest.fixture
def models(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with tiny models; the tests that check arguments run it with scripted samples,
    and expect none taken."""
    pytester.makepyfile(models=textwrap.dedent(TINY))
    return pytester


@pytest.fixture
def tiny(models: pytest.Pytester, dynamo: None) -> pytest.Pytester:
    """A project with tiny models, measured in-process (see tests/conftest.py's ``project``):
    one sample a benchmark (two to save: the quick effort's; ``cnnperf_samples = 1`` would save
    the 99 a one-sample look needs against them) and a stated peak, as what these tests check
    is what compiling did, not the figures."""
    pytester = models
    pytester.makeini(
        """
        [pytest]
        cnnperf_inprocess = true
        cnnperf_effort = quick
        cnnperf_min_time = 0.05
        cnnperf_attribution = off
        cnnperf_calibration = false
        cnnperf_peak_tflops = 1
        cnnperf_threshold = 60%
        """
    )
    return pytester


def test_cuda_graphs_on_the_cpu_is_a_usage_error_of_the_test(models: pytest.Pytester) -> None:
    models.makepyfile(
        test_bench="""
        from models import Tiny

        def test_graphed(cnnperf):
            cnnperf.train_step(Tiny(), batch_size=2, image_size=8, cuda_graphs=True)
        """
    )
    scripted = Scripted()
    result = models.runpytest("--cnnperf", plugins=[scripted])
    result.assert_outcomes(failed=1)
    assert scripted.script.taken == []
    result.stdout.fnmatch_lines(
        [
            "cnnperf: cuda_graphs=True captures the step as a CUDA graph, which needs a CUDA "
            "device, and this run measures on the CPU; leave cuda_graphs out on the CPU, or run "
            "with --cnnperf-device=cuda"
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_bad_compile_argument_fails_its_test_without_measuring(
    models: pytest.Pytester,
) -> None:
    models.makepyfile(
        test_bench="""
        from models import Tiny

        def test_fast(cnnperf):
            cnnperf.inference(Tiny(), batch_size=2, image_size=8, compile="fast")

        def test_ddp(cnnperf):
            cnnperf.train_step(Tiny(), batch_size=2, image_size=8, compile=True, world_size=2)
        """
    )
    scripted = Scripted()
    result = models.runpytest("--cnnperf", plugins=[scripted])
    result.assert_outcomes(failed=2)
    assert scripted.script.taken == []
    result.stdout.fnmatch_lines([f"cnnperf: compile='fast' is not a compile mode; {FORMS}"])
    result.stdout.fnmatch_lines(
        [
            "cnnperf: compile= with world_size=2: compiled and graphed data-parallel steps are "
            "not measured yet; measure them with world_size=1"
        ]
    )


# ---- figures, files and reports ----

BREAK = GraphBreak(
    "Failed to trace builtin operator", "models.py:16", 'print("features", tuple(y.shape))'
)
OPTIMIZER_BREAK = GraphBreak(
    "Call to `torch._dynamo.graph_break()`",
    "torch/optim/optimizer.py:78",
    "torch._dynamo.graph_break()",
    internal=True,
)


def compiled_sample(
    step: float,
    compile_s: float,
    cache: str,
    breaks: tuple[GraphBreak, ...] = (OPTIMIZER_BREAK,),
    recompiles: int = 0,
) -> Sample:
    return Sample(
        step_time_s=step,
        step_times_s=(step,) * 6,
        phases={"forward": (step / 3,) * 6, "backward": (step / 2,) * 6, "optimizer": (0.0,) * 6},
        cold_step_s=compile_s + step,
        warmup_steps=5,
        warmup_steady=True,
        calibration_s=None,
        memory=MemoryPeak(100 << 20, None, "cpu-profiler"),
        compilation=Compilation(
            compile_s=compile_s,
            cache=cache,
            graphs=2,
            graph_breaks=breaks,
            recompiles=recompiles,
            recompile_reasons=("tensor 'x' size mismatch at index 2. expected 16, actual 20",)
            if recompiles
            else (),
        ),
    )


def compiled_measurement(
    breaks: tuple[GraphBreak, ...] = (OPTIMIZER_BREAK,), recompiles: int = 0, cold: float = 30.0
) -> Measurement:
    samples = [compiled_sample(0.05, cold, "cold", breaks, recompiles)]
    samples += [compiled_sample(0.05 * f, 3.0 * f, "warm", breaks) for f in (0.98, 1.0, 1.02)]
    return Measurement(8, tuple(samples))


SETTING = CompileSetting()
CONFIG = BenchConfig("train_step", "tiny", 8, (64, 64), optimizer="sgd", compile=SETTING)
COMPILED_ENV = dataclasses.replace(ENV, compiler=CompilerStack("3.8.0", "g++", "g++ 12.2.0"))
SETTINGS = GateSettings(CPU.gate, throughput_threshold=0.1, memory_threshold=0.05, strict=False)
LOOK = one_look(CPU.gate.alpha, CPU.gate.beta)


def entry(m: Measurement) -> Result:
    """The baseline entry that records ``m``."""
    return Result(
        CONFIG, recorded="2026-11-30T00:00:00Z", environment=COMPILED_ENV, measurement=m
    ).as_baseline()


def gated(
    m: Measurement,
    baseline: Result | None = None,
    settings: GateSettings = SETTINGS,
    *,
    config: BenchConfig = CONFIG,
    environment: Environment = COMPILED_ENV,
    baseline_file: str | None = None,
) -> Result:
    """The result of ``t.py::test_a`` measuring ``m``, with the gate's decision on it (on a
    machine whose runs barely differ: these tests are about the compiler's figures)."""
    current = Result(config, test_id="t.py::test_a", environment=environment, measurement=m)
    throughput = None
    if baseline is not None:
        throughput = throughput_at(current, baseline, settings, LOOK, QUIET)
    decision = decide(current, baseline, settings, LOOK, baseline_file, throughput=throughput)
    return dataclasses.replace(current, decision=decision)


def decision_of(result: Result) -> Decision:
    assert result.decision is not None
    return result.decision


def test_compile_figures_of_a_measurement() -> None:
    m = compiled_measurement(breaks=(BREAK, OPTIMIZER_BREAK))
    assert m.compile_time("cold") == 30.0
    assert m.compile_time("warm") == pytest.approx(3.0)
    assert m.graph_breaks == (BREAK,)  # PyTorch's own break in the optimizer is not counted
    recorded = entry(m).measured
    assert (recorded.compile_time("cold"), recorded.graph_breaks) == (30.0, (BREAK,))


def test_compiled_results_and_baselines_round_trip_through_their_files() -> None:
    m = compiled_measurement(breaks=(BREAK, OPTIMIZER_BREAK), recompiles=1)
    result = gated(m, entry(compiled_measurement()), baseline_file="b.json")
    document = ResultsFile("2026-11-30T00:00:00Z", "cpu-test-2t", (result,))
    text = json.dumps(RESULTS.dump(document))
    loaded = RESULTS.load(json.loads(text))
    assert loaded.results[0].measurement == m
    assert loaded.results[0].config == CONFIG
    assert loaded.results[0].environment == COMPILED_ENV
    assert decision_of(loaded.results[0]).compile == decision_of(result).compile
    baseline = codec.dump(entry(m))
    compilation = baseline["measurement"]["samples"][0]["compilation"]
    assert compilation["graph_breaks"][0]["location"] == "models.py:16"
    assert codec.load(Result, json.loads(json.dumps(baseline)), "entry") == entry(m)


def test_eager_entries_are_written_as_before_compiling_existed() -> None:
    samples = tuple(
        dataclasses.replace(s, compilation=None) for s in compiled_measurement().samples
    )
    eager = Result(
        dataclasses.replace(CONFIG, compile=None),
        recorded="2026-11-30T00:00:00Z",
        environment=ENV,
        measurement=Measurement(8, samples),
    ).as_baseline()
    data = codec.dump(eager)
    assert not any("compilation" in sample for sample in data["measurement"]["samples"])
    assert "compile" not in data["config"]
    assert "cuda_graphs" not in data["config"]
    assert "compiler" not in data["environment"]


def test_reports_show_compile_time_graph_breaks_and_recompiles() -> None:
    result = gated(compiled_measurement(breaks=(BREAK, OPTIMIZER_BREAK)))
    lines = terminal.lines([result])
    header = next(line for line in lines if line.startswith("verdict"))
    assert "compile cold / warm  breaks  recompiles" in header
    row = lines[lines.index(header) + 1]
    assert row.endswith("30.00 s / 3.00 s       1           0")
    assert any(
        line
        == 'note: test_a: graph break at models.py:16 `print("features", tuple(y.shape))`: Failed '
        "to trace builtin operator"
        for line in lines
    )
    assert "compiler: g++ 12.2.0, Triton 3.8.0" in lines
    assert explain.headline(result).endswith(
        "; compiled in 30.00 s cold, 3.00 s warm; 1 graph break, 0 recompiles"
    )
    text = markdown.render([result])
    assert "| compile cold / warm | breaks | recompiles |" in text
    assert "**Compiler**: g++ 12.2.0, Triton 3.8.0" in text
    assert table.row(result).compile == "30.00 s / 3.00 s"


# ---- the gate ----


def test_a_new_graph_break_fails_naming_its_reason_and_line() -> None:
    baseline = entry(compiled_measurement())
    m = compiled_measurement(breaks=(BREAK, OPTIMIZER_BREAK))
    result = gated(m, baseline, baseline_file="b.json")
    decision = decision_of(result)
    assert decision.verdict is Verdict.REGRESSED
    assert decision.failed
    assert decision.compile is not None
    assert (decision.compile.graph_breaks, decision.compile.baseline_graph_breaks) == (1, 0)
    message = explain.failure(result).splitlines()
    assert (
        message[0] == "cnnperf: train_step tiny bs=8 64x64 opt=sgd compile regressed (graph breaks)"
    )
    assert "  compile     30.00 s cold now, 30.00 s in the baseline: +0.0%" in message
    assert (
        "              1 graph break (0 in the baseline), 0 recompiles during the timed steps"
        in (message)
    )
    assert (
        '  graph breaks: 1 now, 0 in the baseline; new: models.py:16 `print("features", '
        "tuple(y.shape))`: Failed to trace builtin operator"
    ) in message


def test_the_same_graph_breaks_as_the_baseline_pass() -> None:
    m = compiled_measurement(breaks=(BREAK,))
    decision = decision_of(gated(m, entry(m), baseline_file="b.json"))
    assert decision.verdict is Verdict.OK
    assert not decision.failed


def test_a_recompile_while_timed_fails_even_without_a_baseline() -> None:
    result = gated(compiled_measurement(recompiles=2))
    decision = decision_of(result)
    assert decision.verdict is Verdict.NEW
    assert decision.failed
    [recompiled] = [r for r in decision.reasons if isinstance(r, Recompiled)]
    assert str(recompiled) == (
        "recompiles: torch.compile recompiled 2 times during the timed steps (tensor 'x' size "
        "mismatch at index 2. expected 16, actual 20): the steady figure is not the compiled "
        "step's; keep the shapes and the Python values the model branches on the same from step "
        "to step"
    )
    message = explain.failure(result).splitlines()
    assert message[0] == "cnnperf: train_step tiny bs=8 64x64 opt=sgd compile failed (recompiles)"
    assert message[-1] == (
        "  No baseline is recorded while it recompiles: its steady figure would include compiling."
    )


@pytest.mark.parametrize(
    ("threshold", "failed"), [(None, False), (0.5, False), (0.2, True)], ids=["off", "50%", "20%"]
)
def test_compile_time_fails_only_past_its_own_threshold(
    threshold: float | None, failed: bool
) -> None:
    baseline = entry(compiled_measurement(cold=30.0))
    settings = dataclasses.replace(SETTINGS, compile_time_threshold=threshold)
    decision = decision_of(gated(compiled_measurement(cold=40.0), baseline, settings))
    assert decision.failed is failed
    assert decision.compile is not None
    assert decision.compile.compile_change == pytest.approx(1 / 3)
    texts = [str(r) for r in decision.reasons]
    slower = (
        "compile time: 40.00 s now, 30.00 s in the baseline (cold cache): +33.3% (fails above +20%)"
    )
    assert (slower in texts) is failed


def test_cuda_graph_modes_on_the_cpu_say_they_ran_without_them() -> None:
    m = compiled_measurement()
    samples = tuple(
        dataclasses.replace(s, compilation=dataclasses.replace(s.compilation, cudagraph_skips=2))
        for s in m.samples
        if s.compilation
    )
    decision = decision_of(gated(dataclasses.replace(m, samples=samples)))
    assert explain.notes(decision) == [
        "2 compiled graphs ran without CUDA graphs: there are none on the CPU, so this mode "
        "measured the same code as mode='default'"
    ]


def test_a_compiler_change_is_an_environment_change() -> None:
    newer = dataclasses.replace(COMPILED_ENV, compiler=CompilerStack("3.8.0", "g++", "g++ 13.1.0"))
    assert newer.changes_from(COMPILED_ENV) == (
        "compiler g++ 12.2.0, Triton 3.8.0 -> g++ 13.1.0, Triton 3.8.0",
    )


# ---- modes and the zoo ----


def test_modes_show_eager_against_compiled_speedups() -> None:
    results = []
    for model, eager_step, compiled_step in (("resnet18", 0.10, 0.08), ("small", 0.02, 0.025)):
        for setting, step in ((None, eager_step), (SETTING, compiled_step)):
            config = dataclasses.replace(CONFIG, model=model, compile=setting)
            m = Measurement(8, (compiled_sample(step, 1.0, "cold"),))
            results.append(gated(m, config=config, environment=ENV))
    mode_table = modes.build(results)
    assert mode_table is not None
    assert mode_table.dimensions == ("compile",)
    assert [mode_table.label(m) for m in mode_table.modes] == ["eager", "compile"]
    lines = modes.lines(mode_table)
    assert lines[0].startswith(
        "Step time per mode; speedup = step time in the reference mode (eager)"
    )
    assert lines[3].split() == ["resnet18", "bs=8", "64x64", "100.0", "ms", "80.0", "ms", "1.25x"]
    assert lines[4].split() == ["small", "bs=8", "64x64", "20.0", "ms", "25.0", "ms", "0.80x"]
    reference = modes.build(results, reference="compile")
    assert reference is not None
    assert reference.label(reference.reference) == "compile"


def test_the_zoo_is_parametrized_over_compile_modes() -> None:
    options = ZooOptions(
        models=("resnet18",), compile=parse_compile_modes("off,default,max-autotune")
    )
    zoo = cases(options, on_gpu=False)
    assert [case.id(False) for case in zoo] == [
        "resnet18",
        "resnet18-compile",
        "resnet18-compile_max-autotune",
    ]
    with pytest.raises(ValueError) as caught:
        parse_compile_modes("off,fast")
    assert str(caught.value) == (
        "'fast' is not a compile mode; use off (eager) or default, reduce-overhead, max-autotune, "
        "max-autotune-no-cudagraphs, several joined with commas (e.g. --cnnperf-zoo-compile=off,default)"
    )


# ---- end to end ----


def _results(pytester: pytest.Pytester, name: str = "results.json") -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((pytester.path / name).read_text())["results"]
    return data


def test_a_graph_break_is_reported_and_a_new_one_fails_the_gate(tiny: pytest.Pytester) -> None:
    """aot_eager runs Dynamo and AOTAutograd as every backend does, without inductor's C++."""
    tiny.makepyfile(
        test_bench="""
        import models

        def test_tiny(cnnperf):
            cnnperf.train_step(
                models.Tiny(), batch_size=2, image_size=8, compile={"backend": "aot_eager"}
            )
        """
    )
    saved = tiny.runpytest("--cnnperf", "--cnnperf-save", "--cnnperf-json=saved.json")
    saved.assert_outcomes(passed=1)
    saved.stdout.fnmatch_lines(["saved *test_tiny*Tiny bs=2 8x8 compile=aot_eager*  0  *0*"])
    [recorded] = _results(tiny, "saved.json")
    compilation = recorded["measurement"]["samples"][0]["compilation"]
    assert compilation["compile_s"] > 0
    assert compilation["graphs"] >= 1
    assert compilation["cache"] == "none"  # aot_eager keeps no compiler cache
    # fields at their defaults are left out of the file: no breaks, a break not internal
    breaks = compilation.get("graph_breaks", [])
    assert [b for b in breaks if not b.get("internal", False)] == []

    (tiny.path / "conftest.py").write_text("import models\nmodels.PRINT = True\n")
    gated = tiny.runpytest("--cnnperf", "--cnnperf-json=gated.json")
    gated.assert_outcomes(failed=1)
    gated.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Tiny bs=2 8x8 opt=sgd compile=aot_eager regressed (graph breaks)",
            "*  compile     * cold now, * in the baseline: *",
            "*1 graph break (0 in the baseline), 0 recompiles during the timed steps",
            "*  graph breaks: 1 now, 0 in the baseline; new: models.py:16 "
            '`print("features", tuple(y.shape))  # a graph break`: *',
        ]
    )
    [gated_result] = _results(tiny, "gated.json")
    # the reason is Dynamo's own words, which differ by release ("Failed to trace builtin
    # operator" on torch 2.14, "builtin: print [...]" on 2.5): the message says what it recorded
    gated_breaks = gated_result["measurement"]["samples"][0]["compilation"]["graph_breaks"]
    [new_break] = [b for b in gated_breaks if not b.get("internal", False)]
    assert new_break["location"] == "models.py:16"
    assert f"# a graph break`: {new_break['reason']}" in gated.stdout.str()
    assert gated_result["decision"]["compile"]["graph_breaks"] == 1
    assert gated_result["decision"]["verdict"] == "regressed"


def test_an_error_dynamo_raises_as_it_is_while_compiling_is_the_benchmarks_message() -> None:
    """Dynamo lets some errors of its own through as raised, with the user's stack appended to
    the message (torch 2.5's AssertionError on a graph break in a nested module): raised through
    its frame compiler, such an error is a compile failure worded like the others, and the
    same error raised by the compiled code as it runs is the step's own."""
    import traceback

    import torch
    from torch._dynamo import convert_frame

    error = AssertionError(
        '\n\nfrom user code:\n   File "models.py", line 15, in forward\n'
        "    y = torch.relu(self.conv(x))\n\n"
        'Set TORCH_LOGS="+dynamo" and TORCHDYNAMO_VERBOSE=1 for more information\n'
    )
    error.real_stack = traceback.StackSummary.from_list(  # type: ignore[attr-defined]
        [("models.py", 15, "forward", "y = torch.relu(self.conv(x))")]
    )
    # a function whose code says it is Dynamo's frame compiler's, raising as Dynamo re-raises
    code = compile("def compile_frame():\n    raise error\n", convert_frame.__file__, "exec")
    namespace: dict[str, Any] = {"error": error}
    exec(code, namespace)
    with pytest.raises(CompileFailed) as raised:
        _guarded(namespace["compile_frame"])()
    assert str(raised.value) == (
        "torch.compile failed: AssertionError: (no message)\n"
        "  at models.py:15: y = torch.relu(self.conv(x))\n"
        f"  raised inside torch.compile (torch {torch.__version__}) as it compiled the step; if "
        "the step runs eagerly (compile= left out), the error is torch.compile's: a newer torch "
        "may compile it"
    )

    def running() -> None:
        raise AssertionError("the model's own check")

    with pytest.raises(AssertionError, match=r"^the model's own check$"):
        _guarded(running)()


def test_dynamos_aliases_of_a_module_imported_anew_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Dynamo keeps the modules compiled code refers to as ``__import_NAME`` in the compiled
    frame's globals; torch 2.5 asserted that one is the module imported now, and failed the
    next compile of a model whose module was imported again (the graph-break test's second
    run did): a stale alias goes, the current one and ``builtins.__import__`` stay."""
    import builtins
    import types

    old, new = types.ModuleType("cnnperf_models"), types.ModuleType("cnnperf_models")
    holder = types.ModuleType("cnnperf_holder")
    holder.__import_cnnperf_models = old  # type: ignore[attr-defined]
    holder.__import_types = types  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cnnperf_models", new)
    monkeypatch.setitem(sys.modules, "cnnperf_holder", holder)
    forget_stale_imports()
    assert "__import_cnnperf_models" not in vars(holder)
    assert vars(holder)["__import_types"] is types
    assert callable(builtins.__import__)


@pytest.mark.slow
def test_recompiles_are_reported_and_fail(tiny: pytest.Pytester) -> None:
    tiny.makepyfile(
        test_bench="""
        from models import Growing

        def test_growing(cnnperf):
            cnnperf.train_step(
                Growing(), batch_size=2, image_size=40, compile={"backend": "aot_eager"}
            )
        """
    )
    result = tiny.runpytest("--cnnperf", "--cnnperf-json=results.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*compile=aot_eager failed (recompiles)",
            "*  recompiles: *model.calls == * at models.py:*(torch.compile considers integer "
            "attributes of the nn.Module to be static.)*",
        ]
    )
    [measured] = _results(tiny)
    first = measured["measurement"]["samples"][0]["compilation"]
    counts = {k: first.get(k, 0) for k in ("warmup_recompiles", "recompiles", "eager_frames")}
    assert counts["warmup_recompiles"] + counts["recompiles"] >= 1
    assert counts["recompiles"] + counts["eager_frames"] >= 1


@pytest.mark.slow
def test_a_compile_error_fails_only_its_own_test_with_the_compilers_words(
    tiny: pytest.Pytester,
) -> None:
    tiny.makepyfile(
        test_bench="""
        import models

        def broken(gm, example_inputs):
            raise RuntimeError("boom from the backend")

        def test_fullgraph(cnnperf):
            models.PRINT = True
            try:
                cnnperf.train_step(
                    models.Tiny(),
                    batch_size=2,
                    image_size=8,
                    compile={"backend": "aot_eager", "fullgraph": True},
                )
            finally:
                models.PRINT = False

        def test_broken_backend(cnnperf):
            cnnperf.train_step(models.Tiny(), batch_size=2, image_size=8, compile={"backend": broken})

        def test_eager(cnnperf):
            cnnperf.train_step(models.Tiny(), batch_size=2, image_size=8)
        """
    )
    result = tiny.runpytest("--cnnperf")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "cnnperf: measuring train_step Tiny bs=2 8x8 opt=sgd compile=aot_eager,fullgraph on "
            "cpu failed: torch.compile failed: Unsupported: Failed to trace builtin operator",
            "*at models.py:16: print(*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "cnnperf: measuring train_step Tiny bs=2 8x8 opt=sgd compile=broken on cpu failed: "
            "torch.compile failed: BackendCompilerFailed (RuntimeError): boom from the backend"
        ]
    )
    assert "Set TORCHDYNAMO_VERBOSE" not in result.stdout.str()


@pytest.mark.slow
def test_without_a_cpp_compiler_only_the_compiled_benchmark_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inductor builds C++ on the CPU: ``CXX`` set to a missing program, in fresh sample
    processes; the eager benchmark beside it measures normally and no process is left."""
    pytester.makepyfile(models=textwrap.dedent(TINY))
    pytester.makeini(
        "[pytest]\ncnnperf_samples = 2\ncnnperf_min_time = 0.05\ncnnperf_attribution = off\n"
    )
    pytester.makepyfile(
        test_bench="""
        from models import Tiny

        def test_compiled(cnnperf):
            cnnperf.train_step(Tiny(), batch_size=2, image_size=8, compile=True)

        def test_eager(cnnperf):
            cnnperf.train_step(Tiny(), batch_size=2, image_size=8)
        """
    )
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    result = pytester.runpytest_subprocess("--cnnperf", timeout=600)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "cnnperf: measuring train_step Tiny bs=2 8x8 opt=sgd compile on cpu failed: "
            "torch.compile failed: InductorError (InvalidCxxCompiler): No working C++ compiler "
            "found in torch._inductor.config.cpp.cxx: (None, '/nonexistent/g++')",
            "  inductor compiles C++ on the CPU: install a C++ compiler (g++ or clang++), or "
            "point $CXX at one",
        ]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_sample_processes_share_a_cache_the_first_compiles_cold(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """inductor in fresh sample processes: one cold compile a benchmark, warm ones after it, a
    compiler stack in the environment, and the session's caches gone at its end."""
    pytester.makepyfile(models=textwrap.dedent(TINY))
    pytester.makeini(
        """
        [pytest]
        cnnperf_samples = 2
        cnnperf_min_time = 0.05
        cnnperf_attribution = off
        """
    )
    pytester.makepyfile(
        test_bench="""
        from models import Tiny

        def test_compiled(cnnperf):
            cnnperf.train_step(Tiny(), batch_size=2, image_size=8, compile=True)
            cnnperf.inference(Tiny(), batch_size=2, image_size=8, compile=True)
        """
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))  # where the session keeps its caches
    result = pytester.runpytest_subprocess(
        "--cnnperf", "--cnnperf-save", "--cnnperf-json=results.json"
    )
    result.assert_outcomes(passed=1)
    for measured in _results(pytester):
        caches = [s["compilation"]["cache"] for s in measured["measurement"]["samples"]]
        assert caches == ["cold"] + ["warm"] * (len(caches) - 1)
        assert measured["environment"]["compiler"]["cxx_version"]
    assert list(temporary.glob("pytest-cnnperf-compile-*")) == []
    path = next((pytester.path / "baselines").glob("*/test_bench.json"))
    baseline = parse(path.read_text(), path)
    train, inference = baseline.entries["test_compiled"].values()
    for recorded in (train, inference):
        m = recorded.measured
        cold, warm = m.compile_time("cold"), m.compile_time("warm")
        assert cold is not None
        assert warm is not None
        assert cold > warm > 0
        assert recorded.config.compile is not None
        assert recorded.config.compile.backend == "inductor"


def test_cnnperf_show_of_a_baseline_file_has_the_compile_figures(tmp_path: Path) -> None:
    from pytest_cnnperf.cli import main

    compiled = entry(compiled_measurement(breaks=(BREAK,)))
    eager_samples = tuple(
        dataclasses.replace(s, compilation=None) for s in compiled.measured.samples
    )
    eager = dataclasses.replace(
        compiled,
        config=dataclasses.replace(CONFIG, compile=None),
        measurement=Measurement(8, eager_samples),
    )
    document = BaselineFile("cpu-test-2t", {"test_a": {CONFIG.key: compiled, eager.key: eager}})
    path = tmp_path / "baselines" / "cpu-test-2t" / "test_perf.json"
    path.parent.mkdir(parents=True)
    path.write_text(render(document))
    out = io.StringIO()
    assert main(["show", str(path)], out=out) == 0
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("test "))
    assert header.split("  ")[-1].strip() == "samples"
    assert "compile cold / warm  breaks" in header
    compiled_row, eager_row = sorted(
        (line for line in lines if line.startswith("test_a ")),
        key=lambda line: "compile" not in line,
    )
    assert " 30.00 s / 3.00 s       1 " in compiled_row
    assert "  -       - " in eager_row


def test_markdown_of_a_new_benchmark_that_recompiles_says_it_failed() -> None:
    text = markdown.render([gated(compiled_measurement(recompiles=1))])
    assert text.startswith("### ❌ cnnperf: 1 of 1 benchmark failed (recompiles)\n")
    assert (
        "- ❌ `test_a` (tiny bs=8 64x64 compile): recompiles: torch.compile recompiled 1 time"
        in (text)
    )


def test_junit_properties_carry_the_compile_figures() -> None:
    from pytest_cnnperf.reports import junit

    result = gated(compiled_measurement(breaks=(BREAK,)), environment=ENV)
    props = dict(junit.properties(result))
    assert props["cnnperf.compile_cold_s"] == "30"
    assert props["cnnperf.compile_warm_s"] == "3"
    assert (props["cnnperf.graph_breaks"], props["cnnperf.recompiles"]) == ("1", "0")
