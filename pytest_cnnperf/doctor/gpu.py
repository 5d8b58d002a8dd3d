"""The GPUs' checks of ``cnnperf doctor``, through NVML (``pynvml`` from nvidia-ml-py, or a
fake with the same functions in tests): persistence mode, clocks and clock events, power
limit, other processes, ECC, PCIe link, MIG, the energy counter and the peak table."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..measuring.nvml import SLOWDOWN_REASONS
from ..measuring.peak_table import lookup
from .findings import Finding, Level, Section

HOT_C = 85
#: NVML's clock-event reason bit for clocks set by the user (locked or application clocks)
USER_CLOCKS = 0x2


def _call(n: Any, function: str, *args: Any) -> Any:
    """``n.function(*args)``, or ``None`` where NVML lacks it or it fails."""
    try:
        return getattr(n, function)(*args)
    except Exception:  # NVML raises many error classes; any of them means "not available"
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_nvml() -> tuple[Any | None, str | None]:
    """The ``pynvml`` module, initialised, or why it cannot be used."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py (the pynvml module) is not installed: pip install nvidia-ml-py"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"NVML cannot start ({type(exc).__name__}): no NVIDIA driver here"
    return pynvml, None


def _clocks(n: Any, h: Any, index: int) -> list[Finding]:
    reasons = _call(n, "nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None:
        reasons = _call(n, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    reasons = int(reasons or 0)
    sm = _call(n, "nvmlDeviceGetClockInfo", h, n.NVML_CLOCK_SM)
    top = _call(n, "nvmlDeviceGetMaxClockInfo", h, n.NVML_CLOCK_SM)
    now = f"SM clock {sm} of {top} MHz" if sm is not None and top else "SM clock unknown"
    findings = []
    slow = [name for bit, name in SLOWDOWN_REASONS.items() if reasons & bit]
    if slow:
        findings.append(
            Finding(
                "clock events",
                Level.WARN,
                f"slowed down now: {', '.join(slow)} ({now})",
                why="the GPU runs below its clocks for heat or power: figures taken now are slow",
                fix=f"cool the GPU or wait for it; nvidia-smi -i {index} -q -d "
                "PERFORMANCE,TEMPERATURE says why",
                brief=f"GPU {index} {', '.join(slow)}",
            )
        )
    else:
        findings.append(Finding("clock events", Level.OK, f"no slowdown now ({now})"))
    if reasons & USER_CLOCKS:
        findings.append(
            Finding("clocks", Level.OK, "set by the user (locked or application clocks)")
        )
    else:
        findings.append(
            Finding(
                "clocks",
                Level.NOTE,
                f"floating: the boost clock goes up to {top} MHz as temperature and power allow",
                why="figures vary with the GPU's temperature and power draw, between runs and "
                "between machines of the same model",
                fix=f"sudo nvidia-smi -i {index} --lock-gpu-clocks={top},{top} (undo: "
                f"--reset-gpu-clocks; supported clocks: nvidia-smi -i {index} -q -d "
                "SUPPORTED_CLOCKS)",
            )
        )
    temperature = _call(n, "nvmlDeviceGetTemperature", h, n.NVML_TEMPERATURE_GPU)
    if temperature is not None and temperature >= HOT_C:
        findings.append(
            Finding(
                "temperature",
                Level.WARN,
                f"{temperature} C",
                why="a hot GPU lowers its clocks",
                fix="check the cooling and the airflow",
                brief=f"GPU {index} at {temperature} C",
            )
        )
    return findings


def _power_limit(n: Any, h: Any, index: int) -> Finding | None:
    enforced = _call(n, "nvmlDeviceGetEnforcedPowerLimit", h)
    default = _call(n, "nvmlDeviceGetPowerManagementDefaultLimit", h)
    if not enforced or not default:
        return None
    found = f"{enforced / 1000:.0f} W of the default {default / 1000:.0f} W"
    if enforced >= default * 0.98:
        return Finding("power limit", Level.OK, found)
    return Finding(
        "power limit",
        Level.WARN,
        found,
        why="a lowered power cap lowers the clocks under load, and the peak the GPU reaches",
        fix=f"sudo nvidia-smi -i {index} -pl {default / 1000:.0f}",
        brief=f"GPU {index} power capped",
    )


def _processes(n: Any, h: Any, index: int) -> Finding:
    pids: set[int] = set()
    for call in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        running = _call(n, call, h)
        pids.update(p.pid for p in running or () if p.pid != os.getpid())
    if not pids:
        return Finding("other processes", Level.OK, "none")
    listed = ", ".join(map(str, sorted(pids)))
    return Finding(
        "other processes",
        Level.WARN,
        f"{len(pids)} process(es) use the GPU (pids {listed})",
        why="they share its SMs and memory bandwidth: figures come out slower and erratic",
        fix=f"stop them; nvidia-smi -i {index} --query-compute-apps=pid,name,used_memory "
        "--format=csv lists them",
        brief=f"GPU {index} shared with {len(pids)} process(es)",
    )


def _ecc(n: Any, h: Any, index: int) -> list[Finding]:
    mode = _call(n, "nvmlDeviceGetEccMode", h)
    if mode is None:
        return [Finding("ECC", Level.OK, "not supported by this GPU")]
    current, pending = (int(v) for v in mode)
    findings = [Finding("ECC", Level.OK, "on" if current else "off")]
    if current != pending:
        findings.append(
            Finding(
                "ECC",
                Level.NOTE,
                f"changes to {'on' if pending else 'off'} at the next reboot",
                why="ECC costs memory bandwidth on some boards; baselines need the same setting",
                fix="reboot, or undo the change: sudo nvidia-smi -i "
                f"{index} -e {1 if current else 0}",
            )
        )
    uncorrected = (n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC)
    errors = _call(n, "nvmlDeviceGetTotalEccErrors", h, *uncorrected)
    rows = _call(n, "nvmlDeviceGetRemappedRows", h)
    pending_rows = bool(rows and (rows[2] or rows[3]))
    if errors or pending_rows:
        what = f"{errors} uncorrected error(s) since the driver loaded" if errors else ""
        if pending_rows:
            what += ("; " if what else "") + "row remapping pending or failed"
        findings.append(
            Finding(
                "ECC errors",
                Level.WARN,
                what,
                why="the memory has faults: results and speed may be wrong",
                fix=f"reset or reboot the GPU; nvidia-smi -i {index} -q -d ECC,ROW_REMAPPER "
                "shows them",
                brief=f"GPU {index} memory errors",
            )
        )
    return findings


def _pcie(n: Any, h: Any, index: int) -> Finding | None:
    gen = _call(n, "nvmlDeviceGetCurrPcieLinkGeneration", h)
    width = _call(n, "nvmlDeviceGetCurrPcieLinkWidth", h)
    link_gen = _call(n, "nvmlDeviceGetMaxPcieLinkGeneration", h)
    link_width = _call(n, "nvmlDeviceGetMaxPcieLinkWidth", h)
    gpu_gen = _call(n, "nvmlDeviceGetGpuMaxPcieLinkGeneration", h)
    if link_gen is None or link_width is None:
        return None
    found = f"Gen{link_gen} x{link_width} at most; now Gen{gen} x{width} (links slow down at idle)"
    if gpu_gen is not None and gpu_gen > link_gen:
        return Finding(
            "PCIe link",
            Level.WARN,
            f"{found}; the GPU supports Gen{gpu_gen}",
            why="the slot, riser or BIOS limits the link: copies to and from the GPU are slower",
            fix="move the card to a full-speed slot, reseat it, or check the BIOS link speed; "
            f"nvidia-smi -i {index} --query-gpu=pcie.link.gen.max,pcie.link.width.max "
            "--format=csv",
            brief=f"GPU {index} PCIe below its speed",
        )
    return Finding("PCIe link", Level.OK, found)


def _peak(n: Any, h: Any, name: str) -> Finding:
    found = lookup(name, None)
    if found.row is None:
        return Finding(
            "peak",
            Level.NOTE,
            f"unknown: {found.problem}",
            why="utilisation (MFU) needs the GPU's dense peak for each precision",
            fix="state it in the ini file: cnnperf_peak_tflops = bf16=...,tf32=...,fp32=...",
        )
    row = found.row
    text = f"{row.name} in the table (dense: tf32 {row.tf32}, bf16 {row.bf16}, fp32 {row.fp32} "
    text += "TFLOP/s" + ("" if row.verified else "; figures unverified") + ")"
    cores = _call(n, "nvmlDeviceGetNumGpuCores", h)
    top = _call(n, "nvmlDeviceGetMaxClockInfo", h, n.NVML_CLOCK_SM)
    if cores and top:
        fp32 = cores * 2 * top / 1e6
        text += f"; NVML: {cores} cores x 2 x {top} MHz = {fp32:.1f} TFLOP/s fp32"
        if abs(fp32 / row.fp32 - 1) > 0.1:
            return Finding(
                "peak",
                Level.NOTE,
                text,
                why="the table's fp32 figure and the GPU's own cores and clock disagree by more "
                "than 10%: a variant or a lowered clock",
                fix="state the peak in the ini file: cnnperf_peak_tflops = bf16=...,tf32=...",
            )
    return Finding("peak", Level.OK, text)


def _visible(n: Any, environ: Mapping[str, str]) -> list[int]:
    """NVML's indices of the GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible (all when unset).
    Entries are UUIDs (or their prefixes) or indices, which follow the PCI order that NVML uses
    (CUDA's default order differs only between unlike GPUs)."""
    count = int(n.nvmlDeviceGetCount())
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(range(count))
    uuids = [
        _text(_call(n, "nvmlDeviceGetUUID", n.nvmlDeviceGetHandleByIndex(i))) for i in range(count)
    ]
    chosen: list[int] = []
    for entry in (e.strip() for e in value.split(",")):
        if entry.isdigit() and int(entry) < count:
            chosen.append(int(entry))
        elif entry.startswith(("GPU-", "MIG-")):
            chosen += [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)][:1]
        else:  # CUDA stops at the first entry it cannot use
            break
    return chosen


def gpu_sections(
    nvml: Any | None,
    problem: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> list[Section]:
    """A section per GPU that CUDA would see. ``nvml``: the initialised ``pynvml`` module (or
    a fake); ``None`` with ``problem`` saying why there is none."""
    if nvml is None:
        return [Section(f"GPU: not checked: {problem}", ())]
    indices = _visible(nvml, os.environ if environ is None else environ)
    if not indices:
        return [Section("GPU: none visible to CUDA", ())]
    return [_device(nvml, index) for index in indices]


def _device(n: Any, index: int) -> Section:
    h = n.nvmlDeviceGetHandleByIndex(index)
    name = _text(_call(n, "nvmlDeviceGetName", h) or "unknown GPU")
    findings: list[Finding | None] = []
    persistence = _call(n, "nvmlDeviceGetPersistenceMode", h)
    if persistence is not None:
        findings.append(
            Finding("persistence mode", Level.OK, "on")
            if persistence
            else Finding(
                "persistence mode",
                Level.NOTE,
                "off",
                why="the driver lets the GPU go when no process holds it: each sample process "
                "starts it again, slower, and its clocks and settings reset",
                fix=f"sudo nvidia-smi -i {index} -pm 1 (or run nvidia-persistenced)",
            )
        )
    findings += _clocks(n, h, index)
    findings.append(_power_limit(n, h, index))
    findings.append(_processes(n, h, index))
    findings += _ecc(n, h, index)
    findings.append(_pcie(n, h, index))
    mig = _call(n, "nvmlDeviceGetMigMode", h)
    if mig is not None and int(mig[0]):
        findings.append(
            Finding(
                "MIG",
                Level.NOTE,
                "on: CUDA sees slices of this GPU",
                why="a slice has a share of the SMs: the table's peak is the whole GPU's",
                fix=f"sudo nvidia-smi -i {index} -mig 0 (for whole-GPU benchmarks)",
            )
        )
    energy = _call(n, "nvmlDeviceGetTotalEnergyConsumption", h)
    findings.append(
        Finding("energy counter", Level.OK, "readable: energy per image is measured")
        if energy is not None
        else Finding(
            "energy counter",
            Level.NOTE,
            "not readable: no energy per image on this GPU",
            why="NVML's total-energy counter needs a Volta or newer GPU",
        )
    )
    findings.append(_peak(n, h, name))
    return Section(f"GPU {index}: {name}", tuple(f for f in findings if f))
