"""``cnnperf doctor``: is this machine fit to benchmark on? Read-only: it changes nothing.

Each finding says what was found, why it matters and the fix, as pyperf's ``system show`` does.
No torch here: :func:`session_warning` runs in the pytest process that forks the sample
processes, before any test, where initialising CUDA would break them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from .cpu import cpu_section
from .findings import Section, render, warnings
from .gpu import gpu_sections, load_nvml

__all__ = ["examine", "render", "session_warning", "warnings"]


def examine() -> list[Section]:
    """Every check, as ``cnnperf doctor`` runs them."""
    return [cpu_section(), *gpu_sections(*load_nvml())]


def session_warning(
    device_type: str,
    root: Path = Path("/"),
    nvml: tuple[Any | None, str | None] | None = None,
) -> str | None:
    """One line for the start of a benchmark session when the machine is not fit, from the
    cheap checks (a few file reads; NVML on a CUDA run), or ``None``."""
    cpu = cpu_section(root, steal_interval_s=None)
    found = [f for f in warnings([cpu]) if device_type != "cuda" or f.topic == "load"]
    if device_type == "cuda":
        module, problem = load_nvml() if nvml is None else nvml
        if module is not None:
            try:
                found += warnings(gpu_sections(module, problem))
            finally:
                if nvml is None:  # the sample processes forked later start NVML afresh
                    with contextlib.suppress(Exception):  # NVML's many error classes
                        module.nvmlShutdown()
    if not found:
        return None
    what = "; ".join(dict.fromkeys(f.brief or f"{f.topic}: {f.found}" for f in found))
    return (
        f"this machine is not fit to benchmark on: {what}; `cnnperf doctor` says why and how "
        "to fix it"
    )
