"""The manual's generated references: the options, ini settings and marker keys from the settings
table, the ``cnnperf`` command's help from its parser, and the fields of the results and baseline
files from the dataclasses. They are made from the code at build time, so they cannot drift from it.

The functions below return MyST Markdown and need no Sphinx (``tests/test_docs.py`` calls them).
A page asks for a reference with a block that :func:`setup` replaces as Sphinx reads the page::

    ```{cnnperf-reference} options
    ```

Arguments: ``options``, ``marker``, ``cli`` (the whole command), ``cli COMMAND`` (one
subcommand), ``format results``, ``format baseline``, ``format reasons``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import inspect
import json
import os
import re
import textwrap
import types
import typing
from collections.abc import Iterator
from typing import Any

#: a block a page writes where a generated reference goes
BLOCK = re.compile(r"^```\{cnnperf-reference\}[ \t]+([^\n`]+?)[ \t]*\n```[ \t]*$", re.MULTILINE)


# ---- text ----


def md(text: str) -> str:
    """Plain text as Markdown that shows it as it is (in a paragraph or a table cell)."""
    return re.sub(r"([\\`*_\[\]<>|#$])", r"\\\1", text)


def code(text: str) -> str:
    return f"`{text}`"


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


# ---- settings: options, ini settings, marker keys ----


def settings_table() -> tuple[Any, ...]:
    """Every setting: the plugin's, then the zoo's (``pytest --help`` lists them so)."""
    from pytest_cnnperf import settings, zoo

    return (*settings.SETTINGS, *zoo.SETTINGS)


def zoo_settings() -> tuple[Any, ...]:
    from pytest_cnnperf import zoo

    return tuple(zoo.SETTINGS)


class MissingHelp(ValueError):
    """A setting has no help text: the reference would have nothing to say about it."""


def check_help(table: tuple[Any, ...]) -> None:
    missing = [s.name for s in table if not str(s.help or "").strip()]
    if missing:
        raise MissingHelp(f"settings without help text: {', '.join(missing)}")


def spelled(setting: Any) -> str:
    """How the reference names a setting: its option with its value, else its ini name."""
    if setting.flag is None:
        return setting.ini_name
    return setting.flag if setting.switch else f"{setting.flag}={setting.metavar or 'VALUE'}"


def anchor(setting: Any) -> str:
    return "setting-" + setting.name.replace("_", "-")


def _help_and_default(setting: Any) -> tuple[str, str | None]:
    """The help's description, and the default it spells out itself (``Default: ...``)."""
    text, _, default = setting.help.partition(". Default: ")
    return text, (default or None)


def default_on(setting: Any, device_type: str) -> str:
    """The default in force on ``cpu`` or ``cuda``, as a reader would write it."""
    _, written = _help_and_default(setting)
    value = setting.default_for(device_type)
    if setting.show is not None and value is not None:
        return str(setting.show(value))
    if written:
        return written
    if setting.switch:
        return "off"
    return "not set"


def options_markdown() -> str:
    """Every option, ini setting and marker key, with its default on each kind of device."""
    table = settings_table()
    check_help(table)
    zoo = set(zoo_settings())
    lines = ["| setting | ini file | marker |", "| --- | --- | --- |"]
    for s in table:
        name = s.flag or s.ini_name
        lines.append(
            f"| [{code(name)}](#{anchor(s)}) | {code(s.ini_name) if s.ini else ''} "
            f"| {code(s.name) if s.marker else ''} |"
        )
    sections = [
        ("settings-plugin", "The plugin's settings", [s for s in table if s not in zoo]),
        ("settings-zoo", "The zoo's settings", [s for s in table if s in zoo]),
    ]
    for label, title, rows in sections:
        lines += ["", f"({label})=", f"## {title}"]
        for s in rows:
            lines += ["", *_setting_section(s)]
    return "\n".join(lines) + "\n"


def _setting_section(s: Any) -> list[str]:
    description, _ = _help_and_default(s)
    cpu, cuda = default_on(s, "cpu"), default_on(s, "cuda")
    rows = [("command line", code(spelled(s)) if s.flag else "none (ini file only)")]
    rows.append(("ini file", code(f"{s.ini_name} = ...") if s.ini else "none"))
    rows.append(("marker", code(f"@pytest.mark.cnnperf({s.name}=...)") if s.marker else "none"))
    if cpu == cuda:
        rows.append(("default", md(cpu)))
    else:
        rows += [("default on the CPU", md(cpu)), ("default on CUDA", md(cuda))]
    if s.path:
        rows.append(
            (
                "paths",
                "relative to the folder pytest was started in (command line), "
                "to the rootdir (ini file and default)",
            )
        )
    out = [f"({anchor(s)})=", f"### {code(spelled(s))}", "", md(_sentence(description)), ""]
    out += ["| | |", "| --- | --- |"]
    out += [f"| {name} | {value} |" for name, value in rows]
    return out


def marker_markdown() -> str:
    """The marker's keys."""
    from pytest_cnnperf import settings

    rows = ["| key | what it sets | e.g. |", "| --- | --- | --- |"]
    examples = {
        "threshold": '"15%"',
        "memory_threshold": '"10%"',
        "compile_time_threshold": '"50%"',
        "effort": '"thorough"',
        "strict": "True",
        "attribution": '"always"',
    }
    for s in settings.MARKER_SETTINGS:
        description, _ = _help_and_default(s)
        example = f"{s.name}={examples.get(s.name, '...')}"
        text = md(_sentence(description))
        rows.append(f"| [{code(s.name)}](#{anchor(s)}) | {text} | {code(example)} |")
    return "\n".join(rows) + "\n"


def option_flags() -> list[str]:
    """The command-line options the reference names."""
    return [s.flag for s in settings_table() if s.flag]


# ---- the cnnperf command ----


@contextlib.contextmanager
def _plain_terminal(columns: int = 90) -> Iterator[None]:
    """argparse wraps help to the terminal's width (and colours it on Python 3.14): a fixed
    width and no colour make the reference the same wherever it is built."""
    saved = {name: os.environ.get(name) for name in ("COLUMNS", "NO_COLOR", "FORCE_COLOR")}
    os.environ.update(COLUMNS=str(columns), NO_COLOR="1")
    os.environ.pop("FORCE_COLOR", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _subparsers(main: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in main._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def subcommands() -> list[str]:
    """The ``cnnperf`` subcommands, in the order ``cnnperf --help`` lists them."""
    from pytest_cnnperf import cli

    return list(_subparsers(cli.parser()))


def command_help(name: str | None = None) -> str:
    """``cnnperf --help``, or ``cnnperf NAME --help``, as the command prints it."""
    from pytest_cnnperf import cli

    with _plain_terminal():
        main = cli.parser()
        parser = main if name is None else _subparsers(main)[name]
        return parser.format_help().rstrip() + "\n"


def cli_markdown(name: str | None = None) -> str:
    """The help of the whole command, or of one subcommand, as a literal block."""
    text = command_help(name)
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}{fence}\n"


# ---- file formats: the dataclasses' fields ----

#: what a field holds, where its ``#:`` comment in the code does not say it (or says it for a
#: group of fields); ``Class.field``
FIELD_NOTES: dict[str, str] = {
    # the results file
    "ResultsFile.created": "When the file was written, UTC, ISO 8601.",
    "ResultsFile.machine": "The kind of machine the run measured on: its baselines' folder "
    "(`cpu-amd-epyc-2t`, `nvidia-h100-80gb-hbm3`).",
    "ResultsFile.results": "One result per benchmark, in the order they ran.",
    # a result
    "Result.config": "What the benchmark is.",
    "Result.environment": "What the numbers belong to (`null` when measuring failed before "
    "it was read).",
    "Result.duration_s": "Wall time the benchmark took, its samples included.",
    "Result.error": "Why a benchmark that failed to run failed (`measurement` is then `null`).",
    "Headline.items_per_second": "Throughput: `items_per_step` over the median step time.",
    "Headline.step_time_s": "The median of the samples' step times.",
    "Headline.peak_allocated_bytes": "The median peak of the samples that measured memory.",
    "Headline.throughput_change": "Against the baseline, positive is worse: throughput lost "
    "(the decision's `throughput.change`).",
    "Headline.memory_change": "Memory grown (the decision's `memory.change`).",
    # a benchmark's configuration
    "BenchConfig.kind": "`train_step`, `inference` or `measure`.",
    "BenchConfig.model": "The model's name (`model_factory`'s, else its class name).",
    "BenchConfig.batch_size": "Items per step, of all ranks together.",
    "BenchConfig.image_size": "`[height, width]` of the synthetic images; `null` for `measure()`.",
    "BenchConfig.amp": "`fp16` or `bf16` under autocast; `null`: fp32.",
    "BenchConfig.channels_last": "The model and batch in the channels_last memory format.",
    "BenchConfig.optimizer": "`sgd`, `adam`, `adamw`, or the name of a callable that builds one.",
    "BenchConfig.loss": "The name of a loss callable; `null`: cross-entropy.",
    "BenchConfig.cudnn_mode": "`on`, `off`, `benchmark` or `deterministic` (`--cudnn`); `null`: "
    "the flags as they were.",
    "BenchConfig.world_size": "Data-parallel ranks.",
    "BenchConfig.unit": "What a step processes (`images`, or `measure()`'s `unit`).",
    "BenchConfig.label": "The `name=` that tells apart two benchmarks of one model in a test.",
    "CompileSetting.backend": "`torch.compile`'s backend (`inductor`, `aot_eager`, ...).",
    "CompileSetting.fullgraph": "`torch.compile(fullgraph=...)`.",
    "CompileSetting.dynamic": "`torch.compile(dynamic=...)`; `false` unless the test says "
    "otherwise.",
    # the environment
    "Environment.machine": "The kind of machine: the folder of its baselines.",
    "Environment.device": "`cpu`, `cuda:0`, ...",
    "Environment.device_name": "The GPU's name (`torch.cuda.get_device_name()`), or the CPU model.",
    "Environment.driver": "The NVIDIA driver's version (CUDA runs).",
    "Environment.cuda": "The CUDA version torch was built with.",
    "Environment.cudnn": "cuDNN's version.",
    "Environment.torch": "torch's version.",
    "Environment.torchvision": "torchvision's version, where installed.",
    "Environment.python": "Python's version.",
    "Environment.platform": "Operating system and architecture (`Linux x86_64`).",
    "Environment.cpu": "The CPU model.",
    "Environment.threads": "`torch.get_num_threads()`.",
    "Environment.interop_threads": "`torch.get_num_interop_threads()`.",
    "Environment.flags": "The switches that change how fast the same code runs.",
    "Flags.cudnn_mode": "The cuDNN mode in force.",
    "Flags.matmul_tf32": "Whether cuBLAS matrix products may use TF32 (CUDA runs).",
    "Flags.deterministic_algorithms": "`torch.are_deterministic_algorithms_enabled()`.",
    "CompilerStack.triton": "Triton's version, where installed.",
    "CompilerStack.cxx_version": "The first line of the C++ compiler's `--version`.",
    # a measurement and its samples
    "Measurement.items_per_step": "Items one step processes (all ranks). Throughput is "
    "`items_per_step` over the median of the samples' `step_time_s`.",
    "Measurement.samples": "One per independent sample (a fresh process).",
    "Measurement.unit": "What an item is (`images`).",
    "Sample.step_time_s": "The sample's figure, which the gate compares: the median of its "
    "step times on the CPU; on CUDA its timed block's synchronised wall time over its steps.",
    "Sample.step_times_s": "Every timed step (left out of baselines).",
    "Sample.phases": "Per-step seconds of `forward` (with the loss), `backward` and "
    "`optimizer`; `step` for `measure()` and CUDA graphs. A baseline keeps each phase's median.",
    "Sample.cold_step_s": "The first step of the process, cold: lazy initialisation, cuDNN "
    "autotuning, allocator growth (a compiled benchmark's: compiling included).",
    "Sample.warmup_steps": "Steps run before the timed block.",
    "Sample.warmup_steady": "Whether the warm-up steadied before its budget ran out.",
    "Sample.calibration_unit": "Which calibration workload ran (`cpu-convnet-v1`, "
    "`cuda-mm-fp16-4096x8`, ...): times of different workloads are never compared.",
    "Sample.memory": "Peak memory, measured in the first three samples of a benchmark.",
    "Sample.health": "The GPU's state around the timed steps, from NVML (GPU runs).",
    "Sample.in_process": "Taken inside the pytest process (`--cnnperf-inprocess`), not in a "
    "fresh process.",
    "Sample.profile_error": "Why profiling the operators failed (the sample is kept).",
    "MemoryPeak.allocated_bytes": "The peak: on CUDA the caching allocator's peak of allocated "
    "bytes in a steady step; on the CPU the peak of tensor bytes alive, as PyTorch's profiler "
    "sees every allocation.",
    "MemoryPeak.reserved_bytes": "On CUDA the allocator's peak reserved bytes; on the CPU the "
    "process's peak resident set size.",
    "MemoryPeak.source": "How it was measured: `cuda-allocator`, `cpu-profiler`.",
    "MemoryPeak.alloc_retries": "CUDA: allocations the caching allocator retried after "
    "freeing its cache (a sign of memory pressure).",
    "MemoryPeak.parameters_bytes": "What the peak holds for certain: the weights; their "
    "gradients and the optimizer's state below (`null` where the step has no model or optimizer "
    "of ours).",
    "MemoryPeak.gradients_bytes": "The gradients' bytes.",
    "MemoryPeak.optimizer_bytes": "The optimizer state's bytes (momentum buffers, Adam's moments).",
    "DeviceHealth.sm_clock_mhz": "SM clock after the timed steps.",
    "DeviceHealth.max_sm_clock_mhz": "The GPU's maximum SM clock.",
    "DeviceHealth.memory_clock_mhz": "Memory clock.",
    "DeviceHealth.temperature_c": "GPU temperature, degrees Celsius.",
    "DeviceHealth.power_w": "Power draw, watts.",
    "DeviceHealth.power_limit_w": "The enforced power limit, watts.",
    "DeviceHealth.clock_event_reasons": "NVML's current clock-event (throttle) reasons.",
    "DeviceHealth.problems": "What makes the sample untrustworthy (thermal or hardware "
    "throttling, hotter than 85 C, another process on the GPU); a result with any cannot be a "
    "regression.",
    "Compilation.graph_breaks": "Each graph break: its reason, line and code.",
    "Compilation.warmup_recompiles": "Frames compiled again during the warm-up (reported, not "
    "failed).",
    "Peak.flops_per_s": "The peak in FLOP/s; `null`: unknown (`detail` says why).",
    "Energy.joules": "Energy the device used over the sample's timed steps.",
    # operator profiles and attribution
    "Profile.steps": "Steps profiled.",
    "Profile.operators": "The operators that together take at least 95% of the profiled "
    "time, and those that allocate most.",
    "Profile.rest": "The names of the operators below the cut.",
    "OperatorTime.calls": "Calls per step.",
    "OperatorChange.name": "The operator (`aten::addmm`).",
    "OperatorChange.after_s": "Its time per step now (`null`: it did not run).",
    "OperatorChange.gone": "It ran in the baseline's profile and not in this one.",
    "OperatorChange.module": "The module that ran most of it, where known.",
    "OperatorChange.after_bytes": "The bytes it allocates per step now.",
    # the decision
    "Decision.verdict": "The outcome.",
    "Decision.throughput": "Throughput against the baseline (`null`: nothing to compare).",
    "Decision.memory": "Peak memory against the baseline.",
    "Decision.environment_changes": "What changed since the baseline was recorded "
    "(`torch 2.5.1 -> 2.6.0`).",
    "Decision.reasons": "Why the gate decided as it did: each a reason object (below), which "
    "reports word as a sentence.",
    "Decision.baseline_file": "The baseline file compared against.",
    "Decision.failed": "Whether the test failed on this benchmark.",
    "Decision.against": "Gated against a git revision measured in the same run "
    "(`--cnnperf-against`): that revision and the code under test (`null`: against a stored "
    "baseline).",
    "Decision.reference": "With `against`: the revision's samples the verdict compared with.",
    "Against.base": "The revision gated against.",
    "Against.head": "The code under test: its commit, and whether its tracked files had local "
    "changes.",
    "Revision.name": "The revision as given (`main`, `HEAD~1`; `HEAD` for the code under test).",
    "Revision.sha": "The commit git resolved it to.",
    "Revision.subject": "The commit's subject line.",
    "Revision.dirty": "The checkout's tracked files differed from the commit.",
    "Comparison.metric": "`throughput` or `memory`.",
    "Comparison.baseline": "The baseline's figure: items per second, or peak bytes (medians).",
    "Comparison.current": "This run's figure.",
    "Comparison.change": "Signed so that positive is worse: the fractional throughput loss "
    "(after allowing for the machine's speed where `machine_factor` is not 1), or the "
    "fractional memory growth.",
    "Comparison.threshold": "The change that fails.",
    "Comparison.verdict": "This metric's verdict.",
    "Comparison.p_value": 'The exact one-sided Mann-Whitney test\'s p-value for "worse".',
    "Comparison.look": "Throughput: the look of the sequential comparison that decided it.",
    "Look.number": "Which look decided (from 1).",
    "Look.of": "The looks the design planned.",
    "Look.alpha": "The share of the false-alarm rate this look spent: a regression needs "
    "`p_value` at most this.",
    "Look.beta": "The share of the rate of calling a slowdown of the threshold ok that this "
    "look spent: ok needs `high` below the threshold at `1 - beta`.",
    "Look.test": "The statistical rule: `mann-whitney` (exact, with Hodges-Lehmann bounds).",
    "Look.spending": "How the rates are split over the looks: `bonferroni` (equally).",
    "Comparison.low": "Lower confidence bound of `change`.",
    "Comparison.high": "Upper confidence bound of `change`.",
    "Comparison.baseline_samples": "Samples on the baseline's side.",
    "Comparison.current_samples": "Samples on this run's side.",
    "Comparison.raw_change": "`change` before allowing for the machine's speed.",
    "CompileComparison.graph_breaks": "Graph breaks in the benchmark's code now.",
    "CompileComparison.baseline_graph_breaks": "And in the baseline.",
    "CompileComparison.eager_frames": "Frames run eagerly after too many recompiles.",
    "CompileComparison.compile_s": "Compile time now (of the cache state in `cache`).",
    "CompileComparison.baseline_compile_s": "And in the baseline.",
    "CompileComparison.verdict": "The compile figures' verdict.",
    # reasons
    "MachineDrift.low": "The calibration ratio's lower confidence bound (90%, two-sided).",
    "MachineDrift.high": "Its upper bound.",
    "NoisyCalibration.spread": "Half the width of the calibration ratio's bounds, as a fraction: "
    "larger than the threshold, no change can be shown.",
    "NoisyCalibration.threshold": "The throughput threshold it was held against.",
    "ImpreciseBaseline.samples": "The samples the save took (its most).",
    "ImpreciseBaseline.spread": "Half the width of the median step time's 90% confidence "
    "interval, as a fraction of the median.",
    "ImpreciseBaseline.wanted": "The spread the save stops at (a quarter of the threshold).",
    "CalibrationChanged.baseline_unit": "The baseline's calibration workload.",
    "CalibrationChanged.current_unit": "This run's.",
    "NotAtRevision.revision": "The revision gated against.",
    "NotAtRevision.why": "Why the benchmark is not there: its test file or test is missing, "
    "or the test makes other benchmark calls.",
    "UnequalPairs.count": "Pairs of samples (one of each side, taken one after the other) "
    "disturbed unequally.",
    "UnequalPairs.total": "All pairs.",
    "UnequalPairs.effect": "What they did to the verdict: `left-out` (the pairs disturbed alike "
    "decided), `no-verdict` (every pair was disturbed unequally).",
    "Disturbed.count": "Disturbed samples.",
    "Disturbed.total": "All samples.",
    "Disturbed.effect": "What they did to the verdict: `noted`, `quiet-regressed` (the "
    "undisturbed samples alone show the regression), `no-verdict`, `recorded` (a saved "
    "baseline's); `left-out` is the pairs' only.",
    "UntrustworthyGpu.problems": "What NVML reported.",
    "SamplingChanged.baseline_in_process": "The baseline's samples were taken in-process.",
    "SamplingChanged.current_in_process": "This run's were.",
    "NewGraphBreaks.count": "Graph breaks now.",
    "NewGraphBreaks.baseline_count": "Graph breaks in the baseline.",
    "Recompiled.recompiles": "Recompiles during the timed steps.",
    "Recompiled.reasons": "Why (Dynamo's guard failures, first lines).",
    "Recompiled.eager_frames": "Frames given up on and run eagerly.",
    "SlowerCompile.current_s": "Compile time now.",
    "SlowerCompile.baseline_s": "And in the baseline.",
    "SlowerCompile.threshold": "The growth that fails (`compile_time_threshold`).",
    "SlowerCompile.cache": "Which compile times were compared: `cold` or `warm`.",
    "CudaGraphsSkipped.count": "Compiled graphs run without CUDA graphs.",
    "CudaGraphsSkipped.device": "The device (`cpu`, `cuda:0`).",
    "Creep.best_recorded": "When that run was recorded.",
    "Creep.unit": "What an item is.",
    "ProfileFailed.error": "The profiler's error.",
    "NotSaved.why": "Why the baseline was not written.",
    "Remark.text": "The reason, as a sentence.",
    "Remark.role": "What it stood for where that matters: `creep`, `no-baseline`, or what "
    "failed a compiled benchmark (`graph breaks`, `recompiles`, `compile time`).",
    # baseline files
    "BaselineFile.machine": "The kind of machine the baselines belong to.",
    "BaselineFile.entries": "Test name -> benchmark key -> entry: a result without its "
    "decision and test id, each sample without its per-step lists.",
}


#: what a derived figure (``DERIVED``) holds
DERIVED_NOTES = {
    "Result.key": "The benchmark's key, made from `config`: `train_step resnet18 bs=8 64x64 "
    "opt=sgd`.",
    "Result.headline": "The main figures, computed from the measurement and the decision.",
}


def _comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment written right above each field of a dataclass."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    names = {f.name for f in dataclasses.fields(cls)}
    found: dict[str, str] = {}
    pending: list[str] = []
    for line in source.splitlines()[1:]:
        if not line.startswith("    ") or line.startswith("     "):
            continue  # not a statement of the class body itself
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        name = stripped.split(":", 1)[0].strip()
        if name in names and pending:
            found[name] = " ".join(pending)
        pending = []
    return found


def describe_field(cls: type, name: str) -> str | None:
    """What a field holds: the manual's note, else the code's ``#:`` comment."""
    note = FIELD_NOTES.get(f"{cls.__name__}.{name}")
    if note:
        return note
    comment = _comments(cls).get(name)
    return _sentence(_code_spans(comment[0].upper() + comment[1:])) if comment else None


def _code_spans(text: str) -> str:
    """A comment's ``literal`` (reST) as `literal` (Markdown), Python's constants as JSON's."""
    text = text.replace("``", "`")
    for python, data in (("None", "null"), ("True", "true"), ("False", "false")):
        text = text.replace(f"`{python}`", f"`{data}`")
    return text


def _is_dataclass(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def reachable(root: type) -> list[type]:
    """Every dataclass a document of ``root`` holds, in the order a reader meets them."""
    seen: list[type] = []

    def walk(tp: Any) -> None:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            walk(args[0])
        elif args:
            for arg in args:
                if arg is not Ellipsis:
                    walk(arg)
        elif isinstance(tp, type) and "kinds" in vars(tp):  # a base that lists its kinds
            for kind in tp.kinds():
                walk(kind)
        elif _is_dataclass(tp) and tp not in seen:
            seen.append(tp)
            hints = typing.get_type_hints(tp, include_extras=True)
            for f in dataclasses.fields(tp):
                walk(hints[f.name])
            for derived in getattr(tp, "DERIVED", ()):
                hint = typing.get_type_hints(getattr(tp, derived).fget).get("return")
                if hint is not None:
                    walk(hint)

    walk(root)
    return seen


def reasons() -> tuple[type, ...]:
    from pytest_cnnperf.model import Reason

    return Reason.kinds()


def _format_anchor(cls: type) -> str:
    return "format-" + re.sub(r"(?<!^)(?=[A-Z])", "-", cls.__name__).lower()


def _link(cls: type) -> str:
    return f"{{ref}}`{cls.__name__} <{_format_anchor(cls)}>`"


def json_type(tp: Any) -> str:
    """A field's type as it appears in the file."""
    from pytest_cnnperf.model import values

    nbsp = "\u00a0"  # "number > 0" is read as one word: never broken across lines
    checks = {
        id(values.POSITIVE): f"number{nbsp}>{nbsp}0",
        id(values.AT_LEAST_ZERO): f"number{nbsp}≥{nbsp}0",
        id(values.POSITIVE_INT): f"integer{nbsp}>{nbsp}0",
        id(values.COUNT): f"integer{nbsp}≥{nbsp}0",
    }
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        check = next((m for m in tp.__metadata__ if isinstance(m, values.Check)), None)
        if check is values.NONEMPTY:
            return json_type(args[0]) + " (at least one)"
        if check is not None and id(check) in checks:
            return checks[id(check)]
        return json_type(args[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        if members and all(_is_dataclass(m) for m in members) and len(members) > 1:
            text = "a {ref}`reason <format-reasons>` object"
        elif all(m in (bool, int, float, str) for m in members) and len(members) > 1:
            text = "true/false, number or string"
        else:
            text = " or ".join(json_type(m) for m in members)
        return f"{text} or null" if nullable else text
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            inner = args[0]
            if typing.get_origin(inner) is tuple and typing.get_args(inner)[:1] == (str,):
                return "object: name → " + json_type(typing.get_args(inner)[1])
            return "list of " + json_type(inner)
        if len(set(args)) == 1:
            return f"list of {len(args)}: " + json_type(args[0])
        return "[" + ", ".join(json_type(a) for a in args) + "]"
    if origin is dict:
        return "object: name → " + json_type(args[1])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(code(json.dumps(m.value)) for m in tp)
    if _is_dataclass(tp):
        return _link(tp)
    return {str: "string", bool: "true/false", int: "integer", float: "number"}.get(tp, str(tp))


def _default(f: dataclasses.Field[Any], hint: Any) -> str:
    from pytest_cnnperf.store.codec import codec_for

    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    return code(json.dumps(codec_for(hint).dump(value)))


class UndocumentedField(ValueError):
    """A field of a file format has no description."""


def undocumented(classes: list[type]) -> list[str]:
    """``Class.field`` of each field that neither the manual nor the code describes."""
    return [
        f"{cls.__name__}.{f.name}"
        for cls in classes
        for f in dataclasses.fields(cls)
        if not describe_field(cls, f.name)
    ]


def _class_markdown(cls: type, level: str = "###") -> list[str]:
    hints = typing.get_type_hints(cls, include_extras=True)
    doc = inspect.getdoc(cls) or ""
    intro = _code_spans(" ".join(doc.split("\n\n")[0].split()))
    out = [f"({_format_anchor(cls)})=", f"{level} {cls.__name__}", ""]
    kind = getattr(cls, "kind", None)
    if isinstance(kind, str):
        out += [f"`kind`: {code(json.dumps(kind))}. {intro}", ""]
    elif intro:
        out += [intro, ""]
    fields = dataclasses.fields(cls)
    derived = getattr(cls, "DERIVED", ())
    if not fields and not derived:
        return [*out, "No other field.", ""]
    out += ["| field | type | default | what it holds |", "| --- | --- | --- | --- |"]
    for f in fields:
        text = describe_field(cls, f.name)
        if text is None:
            raise UndocumentedField(f"{cls.__name__}.{f.name} has no description")
        out.append(
            f"| `{f.name}` | {json_type(hints[f.name])} | {_default(f, hints[f.name])} | {text} |"
        )
    for name in derived:
        prop = getattr(cls, name)
        hint = typing.get_type_hints(prop.fget).get("return")
        what = DERIVED_NOTES.get(f"{cls.__name__}.{name}") or _code_spans(
            " ".join((inspect.getdoc(prop) or "").split())
        )
        out.append(
            f"| `{name}` | {json_type(hint)} | written, never read | {what} "
            "Derived from the fields above, for a reader of the file. |"
        )
    return [*out, ""]


def format_markdown(which: str) -> str:
    """The field tables of a document: ``results``, ``baseline`` or ``reasons``."""
    from pytest_cnnperf.model import Result, ResultsFile
    from pytest_cnnperf.store.baseline import BaselineFile

    reason_classes = set(reasons())
    if which == "results":
        classes = [c for c in reachable(ResultsFile) if c not in reason_classes]
    elif which == "baseline":
        classes = [BaselineFile]
    elif which == "reasons":
        classes = list(reasons())
    else:
        raise ValueError(f"no format {which!r}; use results, baseline or reasons")
    assert Result in reachable(ResultsFile)
    missing = undocumented(classes)
    if missing:
        raise UndocumentedField(f"fields without a description: {', '.join(missing)}")
    lines: list[str] = []
    for cls in classes:
        lines += _class_markdown(cls, "####" if which == "reasons" else "###")
    return "\n".join(lines)


# ---- the blocks of a page ----


def render(argument: str) -> str:
    """The Markdown a ``{cnnperf-reference}`` block stands for."""
    words = argument.split()
    if words == ["options"]:
        return options_markdown()
    if words == ["marker"]:
        return marker_markdown()
    if words and words[0] == "cli" and len(words) <= 2:
        return cli_markdown(words[1] if len(words) == 2 else None)
    if len(words) == 2 and words[0] == "format":
        return format_markdown(words[1])
    raise ValueError(f"{{cnnperf-reference}} {argument}: no such reference")


def expand(source: str) -> str:
    """A page's text with each reference block replaced by what it stands for."""
    return BLOCK.sub(lambda m: render(m.group(1)), source)


def setup(app: Any) -> dict[str, Any]:
    from sphinx.util.docutils import SphinxDirective

    def source_read(app: Any, docname: str, source: list[str]) -> None:
        expanded = expand(source[0])
        if expanded != source[0]:
            generated = getattr(app.env, "cnnperf_generated", set())
            generated.add(docname)
            app.env.cnnperf_generated = generated
        source[0] = expanded

    def outdated(app: Any, env: Any, added: Any, changed: Any, removed: Any) -> list[str]:
        """Pages with a generated reference are read again on every build: the code they are
        made from may have changed while the page did not."""
        return sorted(getattr(env, "cnnperf_generated", set()) - set(removed))

    class Unexpanded(SphinxDirective):
        """A reference block that was not replaced (a typo in its argument fails the build
        in :func:`render` first; this catches a block inside another construct)."""

        optional_arguments = 3
        final_argument_whitespace = True

        def run(self) -> list[Any]:
            raise self.error(f"cnnperf-reference {self.arguments} was not expanded")

    app.connect("source-read", source_read)
    app.connect("env-get-outdated", outdated)
    app.add_directive("cnnperf-reference", Unexpanded)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
