"""The rows every tabular report shows (terminal, Markdown, ``cnnperf show``), computed once."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..model import (
    BenchConfig,
    Comparison,
    Decision,
    Environment,
    Measurement,
    NewGraphBreaks,
    Result,
    Verdict,
    units,
)
from ..model.because import plural
from ..model.findings import graph_break_text
from . import efficiency, explain, loader

#: the order verdicts are counted in, worst first
VERDICT_ORDER = (
    Verdict.REGRESSED,
    Verdict.ERROR,
    Verdict.INCONCLUSIVE,
    Verdict.IMPROVED,
    Verdict.NEW,
    Verdict.OK,
    Verdict.SAVED,
)


@dataclass(frozen=True)
class Row:
    """One benchmark's figures as text; ``-`` where there is nothing to show."""

    verdict: str
    test: str
    benchmark: str
    throughput: str = "-"
    baseline_throughput: str = "-"
    throughput_change: str = "-"
    #: ``train_loop``: the share of a step spent waiting for the next batch
    input_wait: str = "-"
    #: ``--cnnperf-metric=instructions``: instructions per step, and their change (the
    #: figure gated: the throughput's change is then reported only)
    instructions: str = "-"
    instructions_change: str = "-"
    memory: str = "-"
    baseline_memory: str = "-"
    memory_change: str = "-"
    #: compiled benchmarks: compile time with the cache cold / warm, graph breaks, recompiles
    compile: str = "-"
    graph_breaks: str = "-"
    recompiles: str = "-"
    step: str = "-"
    phases: str = "-"
    #: achieved FLOP/s, utilisation of the device's peak, energy per item
    flops: str = "-"
    mfu: str = "-"
    energy: str = "-"
    parameters: str = "-"
    notes: tuple[str, ...] = ()
    #: which operators changed, a line each (and the trace that shows them)
    operators: tuple[str, ...] = ()


@dataclass(frozen=True)
class Column:
    field: str
    header: str
    #: a figure, aligned on the right
    figure: bool = False


COLUMNS = (
    Column("verdict", "verdict"),
    Column("test", "test"),
    Column("benchmark", "benchmark"),
    Column("throughput", "throughput", figure=True),
    Column("baseline_throughput", "baseline", figure=True),
    Column("throughput_change", "change", figure=True),
    Column("input_wait", "input wait", figure=True),
    Column("instructions", "instructions", figure=True),
    Column("instructions_change", "change", figure=True),
    Column("memory", "peak mem", figure=True),
    Column("baseline_memory", "baseline", figure=True),
    Column("memory_change", "change", figure=True),
    Column("compile", "compile cold / warm", figure=True),
    Column("graph_breaks", "breaks", figure=True),
    Column("recompiles", "recompiles", figure=True),
    Column("flops", "FLOP/s", figure=True),
    Column("mfu", "MFU", figure=True),
    Column("energy", "energy", figure=True),
    Column("parameters", "params", figure=True),
)
#: shown with ``-v`` and in ``cnnperf show``
DETAIL_COLUMNS = (
    Column("step", "step", figure=True),
    Column("phases", "fwd / bwd / opt", figure=True),
)
#: columns left out when no row has anything in them (a --cnnperf-save run has no baseline)
OPTIONAL = frozenset(
    {
        "baseline_throughput",
        "throughput_change",
        "input_wait",
        "instructions",
        "instructions_change",
        "memory",
        "baseline_memory",
        "memory_change",
        "compile",
        "graph_breaks",
        "recompiles",
        "phases",
        "flops",
        "mfu",
        "energy",
        "parameters",
    }
)


#: what the throughput change is, for a reader who checks it against the two figures
CHANGE_LEGEND = (
    "change: the gate's estimate of the throughput change over the samples of the look that "
    "decided (positive: faster), allowing for the machine's speed where a note says so"
)
#: what the instructions columns are, where a row has them
INSTRUCTIONS_LEGEND = (
    "instructions: a step's, counted under callgrind, and their change (positive: more), "
    "which gate throughput in place of the step time"
)


def legends(results: Sequence[Result]) -> list[str]:
    """The legends of the change columns the results fill."""
    decisions = [r.decision for r in results if r.decision]
    found = [CHANGE_LEGEND] if any(d.throughput for d in decisions) else []
    if any(d.instructions for d in decisions):
        found.append(INSTRUCTIONS_LEGEND)
    return found


def short_key(config: BenchConfig) -> str:
    """The configuration key without what goes without saying: ``resnet18 bs=8 64x64``
    for ``train_step resnet18 bs=8 64x64 opt=sgd``."""
    key = dataclasses.replace(
        config, optimizer=None if config.optimizer == "sgd" else config.optimizer
    ).key
    return key.removeprefix("train_step ")


def throughput(m: Measurement) -> str:
    """The median throughput and half its samples' spread: ``812 images/s ±3%``."""
    text = units.rate(m.items_per_second, m.unit)
    return text + f" ±{m.step.relative_iqr / 2:.0%}" if m.step.n > 1 else text


def baseline_rate(result: Result) -> float | None:
    """The baseline's throughput in items per second, as the gate compared it."""
    comparison = result.decision.throughput if result.decision else None
    return comparison.baseline if comparison else None


def gain(comparison: Comparison) -> str:
    """A throughput comparison's change with faster positive: ``+4.2%``."""
    return units.change(-comparison.change)


def row(result: Result) -> Row:
    m, d = result.measurement, result.decision
    verdict = str(result.verdict or "-")
    test = result.test
    benchmark = short_key(result.config)
    if m is None:
        return Row(verdict, test, benchmark, notes=(result.error,) if result.error else ())
    phases = [m.phase(name) for name in ("forward", "backward", "optimizer")]
    phase_text = (
        " / ".join(f"{p.median * 1e3:.1f}" for p in phases if p) + " ms" if all(phases) else "-"
    )
    notes = _notes(result, m, d)
    return Row(
        verdict=verdict,
        test=test,
        benchmark=benchmark,
        throughput=throughput(m),
        baseline_throughput=units.rate(baseline_rate(result), m.unit),
        throughput_change=gain(d.throughput) if d and d.throughput else "-",
        input_wait=loader.wait_cell(m),
        instructions=_instructions(m),
        instructions_change=(units.change(d.instructions.change) if d and d.instructions else "-"),
        memory=units.nbytes(m.peak_allocated_bytes),
        baseline_memory=units.nbytes(d.memory.baseline) if d and d.memory else "-",
        memory_change=units.change(d.memory.change) if d and d.memory else "-",
        **_compiled(m),
        step=units.seconds(m.step_time_s),
        phases=phase_text,
        flops=units.flops(m.achieved_flops_per_s),
        mfu=efficiency.utilisation(m),
        energy=efficiency.energy(m),
        parameters=units.count(m.parameters),
        notes=tuple(notes),
        operators=tuple(
            f"trace: {row}" if label == "trace" else row
            for label, row in (explain.operator_rows(d) if d else [])
        ),
    )


def _instructions(m: Measurement) -> str:
    """``22.8 M a step``: the counted steps' median instructions."""
    counted = m.instructions
    return f"{units.count(round(counted.per_step))} a step" if counted else "-"


def _notes(result: Result, m: Measurement, d: Decision | None) -> list[str]:
    notes = [f"environment changed: {c}" for c in d.environment_changes] if d else []
    notes.extend(explain.notes(d) if d else [])
    named = (
        {b for r in d.reasons if isinstance(r, NewGraphBreaks) for b in r.breaks} if d else set()
    )
    notes.extend(f"graph break at {graph_break_text(b)}" for b in m.graph_breaks if b not in named)
    if m.scaling_efficiency is not None:
        notes.append(
            f"{result.config.world_size} ranks, step time of the slowest; scaling efficiency "
            f"{m.scaling_efficiency:.0%} against one rank alone"
        )
    notes.extend(efficiency.notes(m))
    device = result.environment.device if result.environment else None
    input_note = loader.note(m, result.config.loader, device)
    if input_note:
        notes.append(input_note)
    return notes


def _compiled(m: Measurement) -> dict[str, str]:
    if not m.compilations:
        return {"compile": "-", "graph_breaks": "-", "recompiles": "-"}
    cold, warm = m.compile_time("cold"), m.compile_time("warm")
    recompiles = str(m.warmup_recompiles + m.recompiles)
    if m.recompiles:
        recompiles += f" ({m.recompiles} timed)"
    return {
        "compile": f"{units.seconds(cold)} / {units.seconds(warm)}",
        "graph_breaks": str(len(m.graph_breaks)),
        "recompiles": recompiles,
    }


def visible(rows: Sequence[Row], columns: Sequence[Column]) -> list[Column]:
    """The columns worth showing: optional ones only where some row has a figure."""
    return [
        c
        for c in columns
        if c.field not in OPTIONAL or any(getattr(r, c.field) != "-" for r in rows)
    ]


def cells(rows: Sequence[Row], columns: Sequence[Column]) -> list[list[str]]:
    return [[getattr(r, c.field) for c in columns] for r in rows]


def counts(results: Sequence[Result]) -> list[tuple[Verdict, int]]:
    """How many benchmarks got each verdict, worst first, leaving out the absent ones."""
    tally = Counter(r.verdict for r in results)
    return [(v, tally[v]) for v in VERDICT_ORDER if tally[v]]


def summary(results: Sequence[Result], name: Callable[[str], str] = str) -> str:
    """``7 benchmarks: 1 regressed (test_train[vgg16]), 1 inconclusive, 5 ok``, each failed
    test as ``name`` writes it."""
    parts = []
    for verdict, count in counts(results):
        part = f"{count} {verdict}"
        if verdict in (Verdict.REGRESSED, Verdict.ERROR):
            named = [name(r.test) for r in results if r.verdict is verdict]
            part += f" ({', '.join(named)})"
        parts.append(part)
    total = len(results)
    return f"{plural(total, 'benchmark')}: " + ", ".join(parts)


def compilers(results: Sequence[Result]) -> list[str]:
    """The compiler stacks of the compiled benchmarks, each once: ``compiler: g++ 12.2.0``."""
    found = [
        r.environment.compiler.describe()
        for r in results
        if r.environment is not None and r.environment.compiler is not None
    ]
    return [f"compiler: {stack}" for stack in dict.fromkeys(found)]


def environments(results: Sequence[Result]) -> list[Environment]:
    seen: dict[str, Environment] = {}
    for result in results:
        if result.environment is not None:
            seen.setdefault(result.environment.describe(), result.environment)
    return list(seen.values())


def environment_lines(results: Sequence[Result]) -> list[str]:
    return [f"environment: {e.describe()} ({e.machine})" for e in environments(results)]


def efficiency_legend(results: Sequence[Result]) -> list[str]:
    """What the efficiency columns mean and where the peaks come from (none without them)."""
    return efficiency.legend([r.measurement for r in results if r.measurement])
