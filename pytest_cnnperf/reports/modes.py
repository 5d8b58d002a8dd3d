"""Mode tables: one run over several cuDNN modes, AMP dtypes, memory formats or compile modes,
each model's time per mode and its speedup against a reference mode, as the published comparisons
show it (cuDNN off against on, fp32 against AMP, contiguous against channels_last, eager against
compiled).

Benchmarks are grouped by their configuration without the mode (model, batch, image size, ...);
within a group, the speedup of a mode is the reference mode's step time over its own.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import BenchConfig, Result, units
from . import table, text

CUDNN_ORDER = ("off", "on", "benchmark", "deterministic")
AMP_ORDER = (None, "fp16", "bf16")
#: what a reference names: a cuDNN mode, a precision or a memory format
REFERENCE_FORMS = (
    "cudnn=on|off|benchmark|deterministic (or just on, off, ...), fp32|fp16|bf16 (or "
    "amp=off|fp16|bf16), "
    "contiguous|channels_last, eager|compile|compile=MODE|cuda_graphs, several joined with "
    "commas, e.g. 'cudnn=off' or 'fp32,contiguous'"
)


def compile_mode(config: BenchConfig) -> str | None:
    """How a benchmark was compiled, as a mode: ``None`` (eager), ``compile``,
    ``compile=max-autotune``, ``cuda_graphs``."""
    if config.compile is not None:
        return config.compile.label()
    return "cuda_graphs" if config.cuda_graphs else None


@dataclass(frozen=True)
class Mode:
    """The settings that a mode table compares; the rest of a configuration stays fixed."""

    cudnn_mode: str | None
    amp: str | None
    channels_last: bool
    #: ``None``: eager; else as :func:`compile_mode` says
    compile: str | None = None

    @classmethod
    def of(cls, config: BenchConfig) -> Mode:
        return cls(config.cudnn_mode, config.amp, config.channels_last, compile_mode(config))

    def order(self) -> tuple[int, int, int, int, str]:
        cudnn = CUDNN_ORDER.index(self.cudnn_mode) if self.cudnn_mode in CUDNN_ORDER else -1
        amp = AMP_ORDER.index(self.amp) if self.amp in AMP_ORDER else len(AMP_ORDER)
        compiled = 0 if self.compile is None else 1 if self.compile.startswith("compile") else 2
        return (cudnn, amp, int(self.channels_last), compiled, self.compile or "")

    def label(self, dimensions: Sequence[str]) -> str:
        """``cudnn=on bf16 channels_last``, naming only the dimensions the run varies."""
        parts = []
        if "cudnn" in dimensions:
            parts.append(f"cudnn={self.cudnn_mode or 'default'}")
        if "amp" in dimensions:
            parts.append(self.amp or "fp32")
        if "memory format" in dimensions:
            parts.append("channels_last" if self.channels_last else "contiguous")
        if "compile" in dimensions:
            parts.append(self.compile or "eager")
        return " ".join(parts) or "default"


def group_key(config: BenchConfig) -> str:
    """The configuration without its mode: what a row of the table holds fixed."""
    base = dataclasses.replace(
        config, cudnn_mode=None, amp=None, channels_last=False, compile=None, cuda_graphs=False
    )
    return table.short_key(base)


@dataclass(frozen=True)
class Cell:
    step_time_s: float
    items_per_second: float
    unit: str
    #: the reference mode's step time over this one's; ``None`` where the row lacks the reference
    speedup: float | None
    #: achieved FLOP/s, where the results file has the step's FLOPs
    flops_per_s: float | None = None


@dataclass(frozen=True)
class Row:
    label: str
    cells: dict[Mode, Cell]


@dataclass(frozen=True)
class ModeTable:
    dimensions: tuple[str, ...]
    modes: tuple[Mode, ...]
    reference: Mode
    rows: tuple[Row, ...]

    def label(self, mode: Mode) -> str:
        return mode.label(self.dimensions)


class BadReference(ValueError):
    """A reference that names no mode of the run, or cannot be read."""


def _parse_reference(spec: str) -> dict[str, object]:
    wanted: dict[str, object] = {}
    for raw in spec.replace(" ", ",").split(","):
        token = raw.strip().lower()
        if not token:
            continue
        name, _, value = token.partition("=")
        if not value:
            name, value = "", token
        if name in ("cudnn", "") and value in CUDNN_ORDER:
            wanted["cudnn"] = value
        elif (name == "amp" and value in ("off", "fp32", "fp16", "bf16")) or (
            name == "" and value in ("fp32", "fp16", "bf16")
        ):
            wanted["amp"] = None if value in ("fp32", "off") else value
        elif name in ("memory_format", "format", "") and value in ("contiguous", "channels_last"):
            wanted["channels_last"] = value == "channels_last"
        elif token in ("eager", "compile=off", "compile=eager"):
            wanted["compile"] = None
        elif token in ("compile", "compile=default", "compile=on", "cuda_graphs"):
            wanted["compile"] = "compile" if token.startswith("compile") else token
        elif name == "compile":
            wanted["compile"] = token
        else:
            raise BadReference(
                f"{raw.strip()!r} in the reference {spec!r} is not a mode; use {REFERENCE_FORMS}"
            )
    return wanted


def _default(values: Sequence[object], preferred: object) -> object:
    return preferred if preferred in values else values[0]


def choose_reference(modes: Sequence[Mode], spec: str | None) -> Mode:
    """The mode named by ``spec``; unnamed settings (and no spec) default to cuDNN off, fp32,
    contiguous and eager where the run has them, so that speedups read as what a feature buys.
    Without a spec, a run that lacks the defaults' combination gets the first mode nearest it."""
    wanted = _parse_reference(spec) if spec else {}
    cudnn = wanted.get("cudnn", _default([m.cudnn_mode for m in modes], "off"))
    amp = wanted.get("amp", _default([m.amp for m in modes], None))
    channels_last = wanted.get("channels_last", _default([m.channels_last for m in modes], False))
    compiled = wanted.get("compile", _default([m.compile for m in modes], None))
    named = (cudnn, amp, channels_last, compiled)

    def shared(mode: Mode) -> int:
        settings = (mode.cudnn_mode, mode.amp, mode.channels_last, mode.compile)
        return sum(a == b for a, b in zip(settings, named, strict=True))

    nearest = max(modes, key=shared)
    if shared(nearest) == len(named) or not spec:
        return nearest
    dimensions = _dimensions(modes)
    every = ("cudnn", "amp", "memory format", "compile")
    run = ", ".join(m.label(dimensions or every) for m in modes)
    raise BadReference(f"the reference {spec!r} names no mode of this run; it has: {run}")


def _dimensions(modes: Sequence[Mode]) -> tuple[str, ...]:
    dims = []
    if len({m.cudnn_mode for m in modes}) > 1:
        dims.append("cudnn")
    if len({m.amp for m in modes}) > 1:
        dims.append("amp")
    if len({m.channels_last for m in modes}) > 1:
        dims.append("memory format")
    if len({m.compile for m in modes}) > 1:
        dims.append("compile")
    return tuple(dims)


def _groups(results: Sequence[Result]) -> dict[str, list[Result]]:
    """Results by configuration without the mode; a group whose mode repeats (two tests that
    measure the same thing) is split by test."""
    groups: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        groups[group_key(result.config)].append(result)
    grouped: dict[str, list[Result]] = {}
    for key, members in groups.items():
        if len({Mode.of(r.config) for r in members}) == len(members):
            grouped[key] = members
            continue
        for result in members:
            grouped.setdefault(f"{result.test} {key}", []).append(result)
    return grouped


def build(results: Sequence[Result], reference: str | None = None) -> ModeTable | None:
    """The mode table of a run's measured results, or ``None`` when it covers a single mode."""
    modes = sorted({Mode.of(r.config) for r in results}, key=Mode.order)
    dimensions = _dimensions(modes)
    if not dimensions:
        return None
    ref = choose_reference(modes, reference)
    modes = [ref, *(m for m in modes if m != ref)]
    rows = []
    for label, members in _groups(results).items():
        by_mode = {Mode.of(r.config): r.measured for r in members}
        base = by_mode.get(ref)
        cells = {
            mode: Cell(
                step_time_s=m.step_time_s,
                items_per_second=m.items_per_second,
                unit=m.unit,
                speedup=base.step_time_s / m.step_time_s if base else None,
                flops_per_s=m.achieved_flops_per_s,
            )
            for mode, m in by_mode.items()
        }
        rows.append(Row(label, cells))
    return ModeTable(tuple(dimensions), tuple(modes), ref, tuple(rows))


def lines(mode_table: ModeTable) -> list[str]:
    """Step time per mode and speedup against the reference, one row per configuration."""
    modes = mode_table.modes
    headers = ["benchmark"] + [
        mode_table.label(m) + (" (reference)" if m == mode_table.reference else "") for m in modes
    ]
    flops = any(c.flops_per_s is not None for row in mode_table.rows for c in row.cells.values())
    body = []
    for row in mode_table.rows:
        cells = [row.label]
        for mode in modes:
            cell = row.cells.get(mode)
            if cell is None:
                cells.append("-")
                continue
            figures = [units.seconds(cell.step_time_s)]
            if mode != mode_table.reference and cell.speedup is not None:
                figures.append(f"{cell.speedup:.2f}x")
            if flops:
                figures.append(units.flops(cell.flops_per_s))
            cells.append("  ".join(figures))
        body.append(cells)
    reference = mode_table.label(mode_table.reference)
    head = [
        f"Step time per mode; speedup = step time in the reference mode ({reference}) / "
        "step time in the mode"
        + ("; FLOP/s: the step's counted FLOPs over its step time" if flops else ""),
        "",
    ]
    return head + text.columns(headers, body, right=range(1, len(headers)))
