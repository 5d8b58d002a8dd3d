"""The environment a measurement belongs to, and the name of the kind of machine it ran on.

Baselines are kept per kind of machine, named after what picks the kernels a step runs: the GPU
model (``nvidia-h100-80gb-hbm3``), or the CPU model (with family, model and stepping where a VM
masks it), its kernels' instruction set and the thread count (``cpu-amd-epyc-7763-avx2-2t``).
Library versions stay out: a torch upgrade is a change against the same baselines.
"""

from __future__ import annotations

import importlib.util
import platform
import re
import sys
from pathlib import Path
from typing import Any

from ..model import Environment, Flags


def slug(text: str) -> str:
    """``Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz`` -> ``intel-xeon-gold-6130``."""
    text = re.sub(r"\((R|TM|C)\)", " ", text, flags=re.IGNORECASE)
    text = re.sub(r"@.*$", " ", text)
    text = re.sub(r"\b(CPU|Processor|\d+-Core)\b", " ", text, flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def cpuinfo(path: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The first processor's fields in ``/proc/cpuinfo`` (empty where there is none); the
    doctor reads it under its root."""
    fields: dict[str, str] = {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return fields
    for line in text.split("\n\n", 1)[0].splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def cpu_model() -> str:
    return (
        cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    )


def cpu_id() -> str | None:
    """``family 25 model 17 stepping 1`` on x86 (``None`` where the CPU does not say)."""
    info = cpuinfo()
    parts = [(word, info.get(key)) for word, key in _ID_FIELDS]
    if not all(value for _, value in parts):
        return None
    return " ".join(f"{word} {value}" for word, value in parts)


_ID_FIELDS = (("family", "cpu family"), ("model", "model"), ("stepping", "stepping"))


def cpu_capability() -> str | None:
    """The instruction set torch dispatches its CPU kernels to (``ATEN_CPU_CAPABILITY`` lowers
    it); ``None`` for a torch too old to say."""
    import torch

    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return None


def masked(model: str) -> bool:
    """Whether a CPU's name hides its model number (``AMD EPYC``, ``Intel Xeon Processor``), as
    virtual machines often report it."""
    return not any(ch.isdigit() for ch in slug(model))


def cpu_kind(model: str, ident: str | None, capability: str | None, threads: int) -> str:
    """``cpu-amd-epyc-f25m17s1-avx512-2t``: the name of a kind of CPU machine."""
    parts = ["cpu", slug(model)]
    if ident and masked(model):
        numbers = dict(zip(ident.split()[::2], ident.split()[1::2], strict=False))
        parts.append("f{family}m{model}s{stepping}".format_map(numbers))
    if capability:
        parts.append(slug(capability))
    return "-".join([*parts, f"{threads}t"])


def machine_name(device: Any, threads: int) -> str:
    """The baseline partition this device belongs to."""
    import torch

    if device.type == "cuda":
        return slug(torch.cuda.get_device_name(device))
    return cpu_kind(cpu_model(), cpu_id(), cpu_capability(), threads)


def cudnn_version() -> str | None:
    import torch

    version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if not version:
        return None
    if version >= 90000:  # cuDNN 9: major * 10000 + minor * 100 + patch
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def current_flags(device: Any) -> Flags:
    """The switches in force. The TF32 flags are read through torch >= 2.9's ``fp32_precision``
    where it exists: its legacy getters raise once a benchmark used the new API."""
    import torch

    from .cudnn import current_mode
    from .torchstate import capture_precision, effective_tf32

    cuda = device.type == "cuda"
    conv_tf32, matmul_tf32 = effective_tf32(torch)
    precision = capture_precision(torch)
    return Flags(
        cudnn_mode=current_mode().value if cuda else None,
        cudnn_tf32=conv_tf32 if cuda else None,
        matmul_tf32=matmul_tf32 if cuda else None,
        matmul_precision=str(precision.pop("matmul_precision") or "mixed"),
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        fp32_precision={
            name: value
            for name, value in precision.items()
            if isinstance(value, str) and value != "none"
        },
    )


def torchvision_version() -> str | None:
    """``torchvision.__version__`` (``0.29.1+cu130``, which the distribution's metadata shortens),
    read from its ``version.py`` without importing it: the import is slow under Valgrind."""
    module = sys.modules.get("torchvision")
    if module is not None:
        return str(module.__version__)
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    try:
        text = Path(spec.origin).with_name("version.py").read_text()
    except OSError:
        return None
    found = re.search(r"^__version__ = ['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return found.group(1) if found else None


def capture(device: Any, machine: str | None, driver: str | None) -> Environment:
    """Describe the environment of a measurement on ``device`` (called in the measuring process)."""
    import torch

    threads = torch.get_num_threads()
    cuda = device.type == "cuda"
    return Environment(
        machine=machine or machine_name(device, threads),
        device=str(device),
        device_name=torch.cuda.get_device_name(device) if cuda else cpu_model(),
        driver=driver if cuda else None,
        cuda=torch.version.cuda if cuda else None,
        cudnn=cudnn_version() if cuda else None,
        torch=torch.__version__,
        torchvision=torchvision_version(),
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        cpu=cpu_model(),
        threads=threads,
        interop_threads=torch.get_num_interop_threads(),
        flags=current_flags(device),
        cpu_capability=cpu_capability(),
        cpu_id=cpu_id(),
    )
