"""Command-line options, ini settings and ``@pytest.mark.cnnperf``, parsed once into dataclasses.

Every parser names the bad value, the accepted forms and an example, and raises
``argparse.ArgumentTypeError`` (options) or ``ValueError`` (ini values and marker arguments) so
that pytest reports a usage error rather than a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from .cudnn import CudnnMode, parse_modes
from .policy import Effort

T = TypeVar("T")

#: the keyword arguments ``@pytest.mark.cnnperf(...)`` accepts
MARKER_ARGUMENTS = ("threshold", "memory_threshold", "effort", "strict")
MARKER_HELP = (
    "cnnperf(threshold=None, memory_threshold=None, effort=None, strict=None): per-test "
    "settings of pytest-cnnperf: the throughput and memory thresholds (e.g. '15%'), the effort "
    "(quick, standard, thorough) and strict mode"
)


@dataclass(frozen=True)
class DeviceRequest:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N`` as the user asked for it."""

    kind: str
    index: int | None = None

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def parse_device(text: str) -> DeviceRequest:
    value = text.strip().lower()
    if value in ("auto", "cpu", "cuda"):
        return DeviceRequest(value)
    match = re.fullmatch(r"cuda:(\d+)", value)
    if match:
        return DeviceRequest("cuda", int(match.group(1)))
    raise ValueError(
        f"{text!r} is not a device; use auto, cpu, cuda or cuda:N with N a device index "
        "(e.g. --cnnperf-device=cuda:1)"
    )


def parse_fraction(text: str) -> float:
    """``10%``, ``2.5%`` or a fraction such as ``0.1``."""
    value = str(text).strip()
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number < 10:
        raise ValueError(
            f"{text!r} is not a threshold; use a percentage such as 10% or 2.5%, "
            "or a fraction such as 0.1"
        )
    return number


def parse_effort(text: str) -> Effort:
    try:
        return Effort(str(text).strip().lower())
    except ValueError:
        accepted = ", ".join(e.value for e in Effort)
        raise ValueError(f"{text!r} is not an effort level; use one of {accepted}") from None


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{text!r} is not a boolean; use true or false")


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86400:
        raise ValueError(f"{text!r} is not a duration; use seconds such as 0.5")
    return value


def parse_positive_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{text!r} is not a list of positive integers; use e.g. 32 or 32,64")
    return values


AMP_CHOICES = ("off", "fp16", "bf16")


def parse_amp(text: str) -> str | None:
    value = str(text).strip().lower()
    if value in ("off", "none", "fp32", "false"):
        return None
    if value in ("fp16", "float16", "half"):
        return "fp16"
    if value in ("bf16", "bfloat16"):
        return "bf16"
    raise ValueError(f"{text!r} is not an AMP mode; use off, fp16 or bf16")


def parse_amp_list(text: str) -> tuple[str | None, ...]:
    return tuple(dict.fromkeys(parse_amp(part) for part in text.split(",")))


MEMORY_FORMATS = ("contiguous", "channels_last")


def parse_memory_formats(text: str) -> tuple[bool, ...]:
    """``contiguous,channels_last`` -> ``(False, True)`` (is it channels_last?)."""
    flags = []
    for part in text.split(","):
        value = part.strip().lower()
        if value not in MEMORY_FORMATS:
            raise ValueError(
                f"{part.strip()!r} is not a memory format; use contiguous, channels_last or both "
                "(e.g. --cnnperf-zoo-memory-format=contiguous,channels_last)"
            )
        flags.append(value == "channels_last")
    return tuple(dict.fromkeys(flags))


def parse_names(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise ValueError(f"{text!r} names no models; use e.g. resnet18,mobilenet_v2")
    return names


def _argtype(parse: Callable[[str], T]) -> Callable[[str], T]:
    """Adapt a parser for argparse: its ``ValueError`` becomes a usage error with the message."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__.removeprefix("parse_")
    return convert


def add_options(parser: pytest.Parser) -> None:
    # Help text follows pytest's rules: capitalised; a single phrase has no period.
    group = parser.getgroup("cnnperf", "CNN training performance (pytest-cnnperf)")
    group.addoption(
        "--cnnperf",
        action="store_true",
        dest="cnnperf",
        help="Run the benchmark tests (without it they are skipped and torch is not imported)",
    )
    group.addoption(
        "--cudnn",
        dest="cnnperf_cudnn",
        metavar="MODE[,MODE...]",
        type=_argtype(parse_modes),
        help="Parametrize benchmarks over cuDNN modes: on, off, benchmark, deterministic "
        "(CUDA runs only). Default: the flags as they are",
    )
    group.addoption(
        "--cnnperf-device",
        dest="cnnperf_device",
        metavar="DEVICE",
        type=_argtype(parse_device),
        help="Device to benchmark on: auto (the first CUDA device, else the CPU), cpu, cuda or "
        "cuda:N. Default: auto",
    )
    group.addoption(
        "--cnnperf-save",
        action="store_true",
        dest="cnnperf_save",
        help="Record baselines from this run instead of gating against them",
    )
    group.addoption(
        "--cnnperf-prune",
        action="store_true",
        dest="cnnperf_prune",
        help="With --cnnperf-save, also remove the baseline entries of the test modules that ran "
        "whose tests this run did not collect",
    )
    group.addoption(
        "--cnnperf-baselines",
        dest="cnnperf_baselines",
        metavar="DIR",
        help="Directory of baseline files. Default: baselines/ under the rootdir",
    )
    group.addoption(
        "--cnnperf-machine",
        dest="cnnperf_machine",
        metavar="NAME",
        help="Name of the kind of machine whose baselines apply. Default: derived from the "
        "device, e.g. nvidia-h100-80gb-hbm3 or cpu-amd-epyc-7763-2t",
    )
    group.addoption(
        "--cnnperf-threshold",
        dest="cnnperf_threshold",
        metavar="PCT",
        type=_argtype(parse_fraction),
        help="Throughput loss that fails a benchmark, e.g. 10%%. Default: 5%% on CUDA, 10%% "
        "on the CPU",
    )
    group.addoption(
        "--cnnperf-memory-threshold",
        dest="cnnperf_memory_threshold",
        metavar="PCT",
        type=_argtype(parse_fraction),
        help="Peak-memory growth that fails a benchmark, e.g. 5%%. Default: 5%%",
    )
    group.addoption(
        "--cnnperf-strict",
        action="store_true",
        default=None,
        dest="cnnperf_strict",
        help="Fail benchmarks that have no baseline, whose verdict is inconclusive or whose "
        "environment (torch, CUDA, cuDNN, driver) differs from the baseline's",
    )
    group.addoption(
        "--cnnperf-effort",
        dest="cnnperf_effort",
        metavar="LEVEL",
        type=_argtype(parse_effort),
        help="How much to measure: quick, standard or thorough. Default: standard",
    )
    group.addoption(
        "--cnnperf-inprocess",
        action="store_true",
        default=None,
        dest="cnnperf_inprocess",
        help="Measure inside the pytest process instead of in fresh sample processes (faster, "
        "works under a debugger; the samples then share one process's noise)",
    )
    group.addoption(
        "--cnnperf-json",
        dest="cnnperf_json",
        metavar="PATH",
        help="Write every result, with its environment, samples and verdict, as JSON",
    )
    group.addoption(
        "--cnnperf-markdown",
        dest="cnnperf_markdown",
        metavar="PATH",
        help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when it is set)",
    )
    group.addoption(
        "--cnnperf-plot",
        dest="cnnperf_plot",
        metavar="PATH",
        help="Draw throughput and memory against the baselines to a PNG or SVG (needs matplotlib)",
    )
    group.addoption(
        "--cnnperf-benchmark-json",
        dest="cnnperf_benchmark_json",
        metavar="PATH",
        help="Also write the results in pytest-benchmark's JSON format, for its dashboards",
    )
    zoo = parser.getgroup("cnnperf")
    zoo.addoption(
        "--cnnperf-zoo-models",
        dest="cnnperf_zoo_models",
        metavar="NAMES",
        type=_argtype(parse_names),
        help="Models of the bundled zoo (--pyargs pytest_cnnperf.zoo), comma-separated. "
        "Default: resnet18,resnet50,vgg16,mobilenet_v2,efficientnet_b0,googlenet,inception_v3",
    )
    zoo.addoption(
        "--cnnperf-zoo-batch-size",
        dest="cnnperf_zoo_batch_size",
        metavar="N[,N...]",
        type=_argtype(parse_positive_ints),
        help="Batch sizes for the zoo. Default: each model's published size on a GPU, a small "
        "one on the CPU",
    )
    zoo.addoption(
        "--cnnperf-zoo-image-size",
        dest="cnnperf_zoo_image_size",
        metavar="PX",
        type=_argtype(lambda text: parse_positive_ints(text)[0]),
        help="Image size for the zoo. Default: each model's own (224, 299 for inception_v3) on a "
        "GPU, small on the CPU",
    )
    zoo.addoption(
        "--cnnperf-zoo-amp",
        dest="cnnperf_zoo_amp",
        metavar="MODE[,MODE...]",
        type=_argtype(parse_amp_list),
        help="Automatic mixed precision for the zoo: off, fp16, bf16, or several. Default: off",
    )
    zoo.addoption(
        "--cnnperf-zoo-memory-format",
        dest="cnnperf_zoo_memory_format",
        metavar="FORMAT[,FORMAT...]",
        type=_argtype(parse_memory_formats),
        help="Memory format for the zoo: contiguous, channels_last, or both. Default: contiguous",
    )

    parser.addini("cnnperf_cudnn", "Default cuDNN modes, as for --cudnn", default="")
    parser.addini("cnnperf_device", "Default device, as for --cnnperf-device", default="auto")
    parser.addini(
        "cnnperf_baselines", "Directory of baseline files, relative to the rootdir", default=""
    )
    parser.addini("cnnperf_machine", "Name of this kind of machine for baselines", default="")
    parser.addini("cnnperf_threshold", "Throughput loss that fails a benchmark", default="")
    parser.addini("cnnperf_memory_threshold", "Memory growth that fails a benchmark", default="")
    parser.addini("cnnperf_strict", "Strict gate (true/false)", default="")
    parser.addini("cnnperf_effort", "quick, standard or thorough", default="")
    parser.addini("cnnperf_inprocess", "Measure inside the pytest process (true/false)", default="")
    parser.addini(
        "cnnperf_samples",
        "Samples per benchmark at the first look (twice as many to re-measure or save)",
        default="",
    )
    parser.addini("cnnperf_min_time", "Seconds of timed steps per sample", default="")
    parser.addini(
        "cnnperf_sample_timeout",
        "Seconds a sample process may take before it is killed (default 1800)",
        default="",
    )
    parser.addini(
        "cnnperf_calibration",
        "Time a calibration workload in every sample and allow for the machine's speed "
        "(true/false; default true)",
        default="",
    )


@dataclass(frozen=True)
class Overrides:
    """Per-benchmark settings from one source (command line, marker or ini); ``None`` = unset."""

    threshold: float | None = None
    memory_threshold: float | None = None
    effort: Effort | None = None
    strict: bool | None = None

    def over(self, other: Overrides) -> Overrides:
        """These settings, falling back to ``other`` where unset."""
        return Overrides(
            **{
                f.name: getattr(self, f.name)
                if getattr(self, f.name) is not None
                else getattr(other, f.name)
                for f in dataclasses.fields(self)
            }
        )


def overrides_from_marker(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Overrides:
    """Validate ``@pytest.mark.cnnperf(...)``; ``ValueError`` names what is wrong."""
    if args:
        raise ValueError(
            f"@pytest.mark.cnnperf takes keyword arguments only, got {args!r}; "
            f"accepted: {', '.join(MARKER_ARGUMENTS)}"
        )
    unknown = sorted(set(kwargs) - set(MARKER_ARGUMENTS))
    if unknown:
        raise ValueError(
            f"@pytest.mark.cnnperf got unknown argument(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(MARKER_ARGUMENTS)}"
        )

    def get(name: str, parse: Callable[[Any], T]) -> T | None:
        value = kwargs.get(name)
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            raise ValueError(f"@pytest.mark.cnnperf({name}={value!r}): {exc}") from None

    return Overrides(
        threshold=get("threshold", _fraction_or_number),
        memory_threshold=get("memory_threshold", _fraction_or_number),
        effort=get("effort", parse_effort),
        strict=get("strict", parse_bool),
    )


def _fraction_or_number(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return parse_fraction(str(value))
    return parse_fraction(value)


@dataclass(frozen=True)
class ZooOptions:
    models: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    image_size: int | None = None
    amp: tuple[str | None, ...] = (None,)
    channels_last: tuple[bool, ...] = (False,)


@dataclass(frozen=True)
class ReportPaths:
    json: Path | None = None
    markdown: Path | None = None
    plot: Path | None = None
    benchmark_json: Path | None = None


@dataclass(frozen=True)
class CnnPerfConfig:
    """Everything the plugin was asked to do, parsed once at configure time."""

    enabled: bool
    cudnn_modes: tuple[CudnnMode, ...] | None
    device: DeviceRequest
    save: bool
    prune: bool
    baseline_dir: Path
    machine: str | None
    cli: Overrides
    ini: Overrides
    in_process: bool
    reports: ReportPaths
    zoo: ZooOptions
    #: ini tuning: samples at the first look, seconds of timed steps per sample
    samples: int | None = None
    min_time_s: float | None = None
    #: time the calibration workload and allow for the machine's speed
    calibration: bool = True
    sample_timeout_s: float = 1800.0

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> CnnPerfConfig:
        """Read options and ini settings; raise ``pytest.UsageError`` for a bad ini value."""
        opt = config.option
        rootdir = config.rootpath
        invocation = config.invocation_params.dir

        def ini(name: str, parse: Callable[[str], T]) -> T | None:
            raw = str(config.getini(name)).strip()
            if not raw:
                return None
            try:
                return parse(raw)
            except ValueError as exc:
                raise pytest.UsageError(f"ini setting {name} = {raw!r}: {exc}") from None

        baselines: Path
        if opt.cnnperf_baselines:
            baselines = invocation / opt.cnnperf_baselines
        else:
            baselines = rootdir / (ini("cnnperf_baselines", str) or "baselines")

        def path(value: str | None) -> Path | None:
            return invocation / value if value else None

        return cls(
            enabled=bool(opt.cnnperf),
            cudnn_modes=opt.cnnperf_cudnn or ini("cnnperf_cudnn", parse_modes),
            device=opt.cnnperf_device
            or ini("cnnperf_device", parse_device)
            or DeviceRequest("auto"),
            save=bool(opt.cnnperf_save),
            prune=bool(opt.cnnperf_prune),
            baseline_dir=baselines,
            machine=opt.cnnperf_machine or ini("cnnperf_machine", str),
            cli=Overrides(
                threshold=opt.cnnperf_threshold,
                memory_threshold=opt.cnnperf_memory_threshold,
                effort=opt.cnnperf_effort,
                strict=opt.cnnperf_strict,
            ),
            ini=Overrides(
                threshold=ini("cnnperf_threshold", parse_fraction),
                memory_threshold=ini("cnnperf_memory_threshold", parse_fraction),
                effort=ini("cnnperf_effort", parse_effort),
                strict=ini("cnnperf_strict", parse_bool),
            ),
            in_process=bool(opt.cnnperf_inprocess or ini("cnnperf_inprocess", parse_bool)),
            reports=ReportPaths(
                json=path(opt.cnnperf_json),
                markdown=path(opt.cnnperf_markdown),
                plot=path(opt.cnnperf_plot),
                benchmark_json=path(opt.cnnperf_benchmark_json),
            ),
            zoo=ZooOptions(
                models=opt.cnnperf_zoo_models,
                batch_sizes=opt.cnnperf_zoo_batch_size,
                image_size=opt.cnnperf_zoo_image_size,
                amp=opt.cnnperf_zoo_amp or (None,),
                channels_last=opt.cnnperf_zoo_memory_format or (False,),
            ),
            samples=ini("cnnperf_samples", lambda text: parse_positive_ints(text)[0]),
            min_time_s=ini("cnnperf_min_time", parse_seconds),
            calibration=ini("cnnperf_calibration", parse_bool) is not False,
            sample_timeout_s=ini("cnnperf_sample_timeout", parse_seconds) or 1800.0,
        )
