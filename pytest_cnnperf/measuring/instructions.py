"""Counting a step's instructions under callgrind: the client requests, and reading the counts.

A process under ``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no``
(``revision.counting`` starts it) dumps each counted phase under a label; a dump's ``totals:``
line is its instructions. torch exposes only the collection toggle, so the requests come from a
helper built once per machine from callgrind.h (as pytest-codspeed does); collection is per
thread, so the counted steps run on one thread.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model import Counter, Instructions, OperatorInstructions

#: the helper: each function issues one of callgrind's client requests (no-ops off Valgrind)
HELPER_SOURCE = """\
#include "callgrind.h"
int cnnperf_running(void) { return RUNNING_ON_VALGRIND; }
void cnnperf_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cnnperf_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void cnnperf_zero(void) { CALLGRIND_ZERO_STATS; }
void cnnperf_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void cnnperf_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""


class InstructionsProblem(Exception):
    """Instructions cannot be counted here; the message says why and what to do."""


def headers() -> Path:
    """The folder of the callgrind.h and valgrind.h that torch ships (their licence covers
    those files alone); Valgrind's own where torch has none."""
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        vendored = Path(spec.origin).parent / "utils/benchmark/utils/valgrind_wrapper"
        if (vendored / "callgrind.h").is_file():
            return vendored
    system = Path("/usr/include/valgrind")
    if (system / "callgrind.h").is_file():
        return system
    raise InstructionsProblem(
        "callgrind.h was found neither in torch (torch/utils/benchmark/utils/valgrind_wrapper) "
        "nor in /usr/include/valgrind; install Valgrind's headers (Debian: valgrind)"
    )


def compiler(which: Callable[[str], str | None] = shutil.which) -> str:
    """The C compiler the helper is built with: ``$CC``, else cc, gcc or clang."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and which(name):
            return name
    raise InstructionsProblem(
        "no C compiler found ($CC, cc, gcc or clang) to build the callgrind helper once; "
        "install one (Debian: gcc), or leave --cnnperf-metric at time"
    )


def helper() -> Path:
    """The built helper, built now if this machine has none for this source (atomically: two
    xdist workers may build it at once)."""
    digest = hashlib.sha256(HELPER_SOURCE.encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-cnnperf"
    target = cache / f"callgrind-requests-{digest}.so"
    if target.is_file():
        return target
    include, cc = headers(), compiler()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cnnperf-cg-", dir=target.parent) as folder:
        source, built = Path(folder) / "requests.c", Path(folder) / "requests.so"
        source.write_text(HELPER_SOURCE)
        done = subprocess.run(
            [cc, "-O1", "-shared", "-fPIC", f"-I{include}", "-o", str(built), str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise InstructionsProblem(
                f"building the callgrind helper with {cc} failed: {done.stderr.strip()[-400:]}"
            )
        os.replace(built, target)
    return target


class Requests:
    """Callgrind's client requests, through the helper."""

    def __init__(self) -> None:
        self._lib = ctypes.CDLL(str(helper()))
        self._lib.cnnperf_dump.argtypes = [ctypes.c_char_p]

    def running(self) -> bool:
        """Whether this process runs under Valgrind."""
        return bool(self._lib.cnnperf_running())

    def start(self) -> None:
        self._lib.cnnperf_start()

    def stop(self) -> None:
        self._lib.cnnperf_stop()

    def zero(self) -> None:
        self._lib.cnnperf_zero()

    def toggle(self) -> None:
        self._lib.cnnperf_toggle()

    def dump(self, label: str) -> None:
        self._lib.cnnperf_dump(label.encode())


@dataclass(frozen=True)
class Kernels:
    """The kernels the counting process pins the libraries to (``revision.counting``): its
    name, kept with the counts, and the variables that pin them."""

    name: str
    env: Mapping[str, str]


#: before Valgrind 3.23, which runs fused multiply-adds lane by lane in a helper (AVX2 kernels
#: far slower than natively): SSE and AVX without FMA (docs/instructions.md: how each says so)
NO_FMA = Kernels(
    "no-fma",
    {
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "AVX",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-FMA,-FMA4",
    },
)
#: from Valgrind 3.23 on, which translates FMA natively: AVX2 (Valgrind has no AVX-512)
AVX2 = Kernels(
    "avx2",
    {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
)
#: the first Valgrind that translates fused multiply-adds natively
NATIVE_FMA = (3, 23)


def kernels_for(version: str) -> Kernels:
    """The kernels to count under Valgrind ``version`` (``3.19.0``) with."""
    major_minor = tuple(int(part) for part in version.split(".")[:2])
    return AVX2 if major_minor >= NATIVE_FMA else NO_FMA


def valgrind_version(command: str) -> str:
    """The version of the Valgrind ``command`` runs (``3.19.0``); ``InstructionsProblem``
    where it does not say one."""
    try:
        done = subprocess.run([command, "--version"], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise InstructionsProblem(
            f"{command} --version could not run ({exc.strerror}); reinstall Valgrind (Debian "
            "and Ubuntu: apt-get install valgrind)"
        ) from None
    found = re.search(r"(\d+\.\d+(?:\.\d+)?)", done.stdout)
    if done.returncode != 0 or found is None:
        raise InstructionsProblem(
            f"{command} --version printed {done.stdout.strip()[:80]!r}, not Valgrind's version "
            "(valgrind-3.19.0); reinstall Valgrind (Debian and Ubuntu: apt-get install valgrind)"
        )
    return found.group(1)


#: the environment variable naming the folder the counting process's callgrind files are in
#: (``--callgrind-out-file=<folder>/cg.%p``: a file per process, a part per dump)
OUT_ENV = "CNNPERF_CALLGRIND_OUT"


#: the environment variables that tell the counting process what counts: Valgrind's version
#: and the kernels its libraries are pinned to (``revision.counting``)
VALGRIND_ENV, KERNELS_ENV = "CNNPERF_VALGRIND", "CNNPERF_KERNELS"


def counter() -> Counter | None:
    """What counts in this process, as the process that started it said (``None``: unsaid)."""
    valgrind, kernels = os.environ.get(VALGRIND_ENV), os.environ.get(KERNELS_ENV)
    if not valgrind or not kernels:
        return None
    return Counter(valgrind=valgrind, kernels=kernels, arch=platform.machine())


def output_file() -> Path:
    """This process's callgrind output file, as the counting process was started to write it."""
    folder = os.environ.get(OUT_ENV)
    if not folder:
        raise InstructionsProblem(
            "this process was not started to count instructions (no callgrind output folder); "
            "counts are taken by the process --cnnperf-metric=instructions starts"
        )
    return Path(folder) / f"cg.{os.getpid()}"


#: a dump's label: the step (from 0) and the phase
LABEL = "cnnperf step {step} {phase}"
_LABEL = re.compile(r"cnnperf step (\d+) (\S+)")


def count_steps(
    requests: Requests,
    phases: Sequence[tuple[str, Callable[[], None]]],
    steps: int,
) -> None:
    """Count ``steps`` steps of ``phases``: instrumentation on, one step uncounted (warm-up
    enough: later steps count alike), then each phase of each step collected alone and dumped
    under its label; instrumentation off at the end."""
    requests.start()
    try:
        for _, run in phases:
            run()
        requests.zero()
        for step in range(steps):
            for name, run in phases:
                requests.toggle()
                run()
                requests.toggle()  # collection off before the dump, as callgrind_annotate wants
                requests.dump(LABEL.format(step=step, phase=name))
    finally:
        requests.stop()


@dataclass(frozen=True)
class Dump:
    """One dump of a callgrind output file: its label's step and phase, its instructions, and
    the part of the file it was written to."""

    step: int
    phase: str
    instructions: int
    path: Path


def read_dumps(path: Path) -> list[Dump]:
    """The labelled dumps of a callgrind output file (``--callgrind-out-file``; each dump is
    written to the file's name with ``.N`` added), in the order they were written."""
    found = []
    for part in sorted(path.parent.glob(f"{path.name}.*"), key=_part_number):
        label, total = None, None
        for line in part.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger: Client Request: "):
                label = _LABEL.search(line)
            elif line.startswith("totals:"):
                total = int(line.split()[1])
        if label is not None and total is not None:
            found.append(Dump(int(label.group(1)), label.group(2), total, part))
    return found


def counted(dumps: Sequence[Dump], capability: str | None, seconds: float) -> Instructions:
    """The instructions of counted steps from their dumps, with the operators of the last."""
    phases: dict[str, list[int]] = {}
    for dump in sorted(dumps, key=lambda d: d.step):
        phases.setdefault(dump.phase, []).append(dump.instructions)
    last = max(d.step for d in dumps)
    return Instructions(
        phases={name: tuple(counts) for name, counts in phases.items()},
        capability=capability,
        operators=operators([d.path for d in dumps if d.step == last]),
        seconds=seconds,
        counter=counter(),
    )


def _part_number(path: Path) -> int:
    suffix = path.suffix.lstrip(".")
    return int(suffix) if suffix.isdigit() else -1


#: an operator's row in ``callgrind_annotate --inclusive=yes``: its count and its entry point
_OPERATOR = re.compile(r"^\s*([0-9,]+)\s.*?at::_ops::(\w+)::call\(")
#: the operators an instruction count keeps, by instructions
OPERATORS_KEPT = 40


def operators(parts: Sequence[Path]) -> tuple[OperatorInstructions, ...]:
    """The ATen operators of the dumps ``parts`` (a step's phases), by instructions with their
    callees (callgrind's inclusive cost of ``at::_ops::<op>::call``), most first; none where
    callgrind_annotate is missing or fails (the count stands without them)."""
    annotate = shutil.which("callgrind_annotate")
    totals: dict[str, int] = {}
    if annotate is None:
        return ()
    for part in parts:
        done = subprocess.run(
            [annotate, "--inclusive=yes", "--threshold=100", "--show-percs=no", str(part)],
            capture_output=True,
            text=True,
            check=False,
        )
        for line in done.stdout.splitlines():
            found = _OPERATOR.match(line)
            if found:
                name = f"aten::{found.group(2)}"
                totals[name] = totals.get(name, 0) + int(found.group(1).replace(",", ""))
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:OPERATORS_KEPT]
    return tuple(OperatorInstructions(name, count) for name, count in ranked)
