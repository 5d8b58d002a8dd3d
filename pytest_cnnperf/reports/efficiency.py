"""Efficiency figures as reports show them: achieved FLOP/s, utilisation (MFU) against the
device's peak, and energy per item, with the lines that say what they mean and where the peaks
come from. A figure that was not measured shows as ``-``; the tables leave out a column that
has nothing to show."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Energy, Measurement, Peak, units

#: what the FLOP/s and MFU columns mean
FLOPS_LEGEND = (
    "FLOP/s: the step's FLOPs as torch.utils.flop_counter counts them (convolutions and matrix "
    "products, 2 per multiply-add; the optimizer counts 0) over its step time; MFU: FLOP/s over "
    "the device's dense peak for the precision used"
)
ENERGY_SOURCES = {
    "nvml": "NVML's energy counter of the GPU board (other processes on the GPU count too)",
    "rapl": "RAPL's energy counters of the CPU packages (other processes count too)",
}
#: how often each counter advances, for the note on a window too short
COUNTER_PERIODS = {"nvml": "every 20 to 100 ms", "rapl": "about every millisecond"}


def utilisation(m: Measurement) -> str:
    value = m.utilisation
    if value is None:
        return "-"
    if value >= 0.001:
        return f"{value:.1%}"
    return f"{value:.2%}" if value >= 0.0001 else "<0.01%"


def shown_energy(m: Measurement) -> Energy | None:
    """The benchmark's energy, where its window is long enough to show."""
    energy = m.energy
    return energy if energy and energy.long_enough else None


def energy(m: Measurement) -> str:
    used = shown_energy(m)
    if used is None:
        return "-"
    return f"{units.joules(used.joules_per_item)}/{_singular(m.unit)} at {used.mean_power_w:.0f} W"


def _singular(unit: str) -> str:
    return unit[:-1] if unit.endswith("s") else unit


def notes(m: Measurement) -> list[str]:
    """What a benchmark's efficiency figures leave out, and why."""
    out = []
    used = m.energy
    if used is not None and not used.long_enough:
        out.append(
            f"energy not shown: the timed steps lasted {used.seconds:.2f} s in all, under the "
            f"{used.min_window_s:g} s the {used.source.upper()} energy counter needs (it "
            f"advances {COUNTER_PERIODS.get(used.source, 'in steps')}); give each sample more "
            "time with cnnperf_min_time"
        )
    return out


def _peak_key(peak: Peak) -> tuple[str, str]:
    if peak.source == "measured":
        return peak.source, str(peak.precision)
    return peak.source, f"{peak.precision} {peak.flops_per_s} {peak.detail}"


def peak_lines(measurements: Sequence[Measurement]) -> list[str]:
    """One line per distinct peak the run's utilisations are measured against."""
    groups: dict[tuple[str, str], list[Peak]] = {}
    for m in measurements:
        if m.flops is not None and m.peak is not None:
            groups.setdefault(_peak_key(m.peak), []).append(m.peak)
    lines = []
    for peaks in groups.values():
        first = peaks[0]
        precision = first.precision or "precision unknown"
        if first.flops_per_s is None:
            where = f" ({first.precision})" if first.precision else ""
            lines.append(f"peak unknown{where}: {first.detail}; state it with cnnperf_peak_tflops")
        elif first.source == "measured":
            values = sorted(p.flops_per_s or 0.0 for p in peaks)
            figure = units.flops(values[0])
            if len(values) > 1 and values[-1] != values[0]:
                figure = f"{figure} to {units.flops(values[-1])}"
            lines.append(f"peak ({precision}): {figure}, {first.detail}")
        else:
            lines.append(f"peak ({precision}): {units.flops(first.flops_per_s)}, {first.detail}")
    return lines


def legend(measurements: Sequence[Measurement]) -> list[str]:
    """The lines under a table with efficiency columns: what they mean, the peaks, and the
    energy counters."""
    lines = []
    if any(m.flops is not None for m in measurements):
        lines.append(FLOPS_LEGEND)
        lines += peak_lines(measurements)
    shown = [m for m in measurements if shown_energy(m)]
    items = sorted({_singular(m.unit) for m in shown})
    for source in sorted({e.source for m in shown if (e := m.energy)}):
        lines.append(
            f"energy: per {' or '.join(items)} over the timed steps, and mean power, from "
            f"{ENERGY_SOURCES.get(source, source)}"
        )
    return lines
