"""Each benchmark's figures as test properties, which ``--junitxml`` writes as ``<property>``.

A test contributes one group of properties per benchmark it measured, each group opening with
``cnnperf.benchmark`` (its configuration key).
"""

from __future__ import annotations

from ..count_kinds import KINDS, UNGATEABLE
from ..model import Measurement, Result, units
from . import explain, table

PREFIX = "cnnperf."


def _number(value: float) -> str:
    return f"{value:.6g}"


def properties(result: Result) -> list[tuple[str, str]]:
    """``(name, value)`` pairs of one benchmark, in reading order."""
    d, m = result.decision, result.measurement
    props = [
        ("benchmark", result.key),
        ("verdict", str(result.verdict)),
        ("headline", explain.headline(result)),
    ]
    if m is not None:
        props += [
            ("throughput", f"{_number(m.items_per_second)} {m.unit}/s"),
            ("step_time_s", _number(m.step_time_s)),
            ("samples", str(len(m.samples))),
        ]
        if d is not None and d.throughput is not None:
            props += [
                ("baseline_throughput", f"{_number(d.throughput.baseline)} {m.unit}/s"),
                ("throughput_change", table.gain(d.throughput)),
            ]
        if m.peak_allocated_bytes is not None:
            props.append(("peak_memory_bytes", str(m.peak_allocated_bytes)))
        if d is not None and d.memory is not None:
            props += [
                ("baseline_peak_memory_bytes", str(int(d.memory.baseline))),
                ("memory_change", units.change(d.memory.change)),
            ]
        if m.compilations:
            for cache in ("cold", "warm"):
                seconds = m.compile_time(cache)
                if seconds is not None:
                    props.append((f"compile_{cache}_s", _number(seconds)))
            props += [
                ("graph_breaks", str(len(m.graph_breaks))),
                ("recompiles", str(m.recompiles)),
            ]
        props += _efficiency(m)
        props += _structure(m)
    if d is not None and d.baseline_file:
        props.append(("baseline_file", d.baseline_file))
    if d is not None and d.against:
        props += [
            ("against", d.against.base.name),
            ("against_sha", d.against.base.sha),
            (
                "head_sha",
                d.against.head.sha + (" with local changes" if d.against.head.dirty else ""),
            ),
        ]
    if result.error:
        props.append(("error", result.error))
    return [(PREFIX + name, value) for name, value in props]


def _efficiency(m: Measurement) -> list[tuple[str, str]]:
    props = []
    if m.flops_per_step is not None and m.achieved_flops_per_s is not None:
        props += [
            ("flops_per_step", _number(m.flops_per_step)),
            ("achieved_flops_per_s", _number(m.achieved_flops_per_s)),
        ]
    if m.utilisation is not None and m.peak is not None and m.peak.flops_per_s:
        props += [
            ("peak_flops_per_s", _number(m.peak.flops_per_s)),
            ("mfu", f"{m.utilisation:.4f}"),
        ]
    energy = m.energy
    if energy is not None and energy.long_enough:
        props += [
            ("joules_per_item", _number(energy.joules_per_item)),
            ("mean_power_w", _number(energy.mean_power_w)),
        ]
    return props


def _structure(m: Measurement) -> list[tuple[str, str]]:
    """Each kind of exact count per step (``syncs_per_step``), where the step was counted."""
    structure = m.structure
    if structure is None:
        return []
    cuda = "cuda" in structure.source  # the only device that launches kernels we count
    return [
        (f"{word}_per_step", str(structure.per_step(kind)))
        for kind, (word, _) in KINDS.items()
        if kind not in UNGATEABLE or cuda
    ]
