"""The CPU's checks of ``cnnperf doctor``: load, steal, governor, turbo, SMT, cgroup quota,
power supply, virtualisation and RAPL energy counters. Every reader takes a root folder, so
tests run them on fake ``/proc`` and ``/sys`` trees."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..measuring.environment import cpuinfo
from .findings import Finding, Level, Section

#: 1-minute load average per online CPU above which the machine is busy
BUSY_LOAD = 0.5
#: share of the last 10 s in which some task waited for a CPU (PSI) above which it is busy
BUSY_PRESSURE = 10.0
#: share of CPU time the hypervisor gave to other guests above which a neighbour is noisy
NOISY_STEAL = 0.02


class Files:
    """Reads the files of a machine under ``root`` (``/``, or a fake tree in tests)."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        return self.root / name.lstrip("/")

    def text(self, name: str) -> str | None:
        return _read(self.path(name))

    def glob(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(pattern.lstrip("/")))


def _read(path: Path) -> str | None:
    """A file's text, ``None`` where it is missing or cannot be read."""
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def cpu_list(text: str | None) -> list[int]:
    """``0-3,8`` -> ``[0, 1, 2, 3, 8]``."""
    cpus: list[int] = []
    for part in (text or "").split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit():
            cpus += range(int(first), int(last or first) + 1)
    return cpus


def cpu_ranges(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``0-3,8``."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _load(files: Files, cpus: int) -> Finding | None:
    text = files.text("/proc/loadavg")
    if not text:
        return None
    load = float(text.split()[0])
    per_cpu = load / max(cpus, 1)
    pressure = None
    for line in (files.text("/proc/pressure/cpu") or "").splitlines():
        if line.startswith("some"):
            match = re.search(r"avg10=([\d.]+)", line)
            pressure = float(match.group(1)) if match else None
    found = (
        f"{per_cpu:.2f} runnable tasks per CPU over the last minute (load average {load:.2f} "
        f"on {cpus} CPU{'' if cpus == 1 else 's'})"
    )
    if pressure is not None:
        found += f"; some task waited for a CPU {pressure:.1f}% of the last 10 s"
    # the pressure is of the last 10 s; the load average lags a minute behind (a build or an
    # install that just ended still shows), so it decides only where the kernel has no PSI
    busy = pressure > BUSY_PRESSURE if pressure is not None else per_cpu > BUSY_LOAD
    if not busy:
        return Finding("load", Level.OK, found)
    brief = f"load {per_cpu:.1f} per CPU" + (
        f", CPU pressure {pressure:.0f}%" if pressure is not None else ""
    )
    return Finding(
        "load",
        Level.WARN,
        found,
        why="torch's threads share the cores with other processes: a step waits for a core, "
        "runs up to twice as slow or slower, and erratically",
        fix="stop the other jobs (top -o %CPU lists them), or benchmark when the machine is quiet",
        brief=brief,
    )


def _stat_times(files: Files) -> list[int] | None:
    text = files.text("/proc/stat")
    if not text or not text.startswith("cpu "):
        return None
    return [int(v) for v in text.splitlines()[0].split()[1:]]


def _steal(files: Files, interval_s: float, sleep: Callable[[float], None]) -> Finding | None:
    before = _stat_times(files)
    sleep(interval_s)
    after = _stat_times(files)
    if not before or not after or len(before) < 8 or len(after) < 8:
        return None
    delta = [b - a for a, b in zip(before, after, strict=False)]
    total = sum(delta[:8])  # user .. steal; guest time is already inside user
    if total <= 0:
        return None
    share = delta[7] / total
    found = (
        f"{share:.1%} of the CPUs' time went to other guests of the hypervisor "
        f"(over {interval_s:g} s)"
    )
    if share <= NOISY_STEAL:
        return Finding("steal", Level.OK, found)
    return Finding(
        "steal",
        Level.WARN,
        found,
        why="a neighbour on the host takes this machine's CPUs: time the benchmark loses and "
        "nothing here can see or control",
        fix="benchmark on a dedicated or larger instance, or at a quieter time",
        brief=f"steal {share:.0%}",
    )


def _governor(files: Files, virtual: bool) -> Finding:
    governors: dict[str, list[int]] = {}
    for path in files.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"):
        cpu = int(path.parent.parent.name.removeprefix("cpu"))
        governors.setdefault(_read(path) or "unreadable", []).append(cpu)
    if not governors:
        where = "a virtual machine: the host sets the clocks" if virtual else "no cpufreq driver"
        return Finding("governor", Level.OK, f"no CPU frequency scaling visible ({where})")
    found = "; ".join(f"{name} on CPUs {cpu_ranges(cpus)}" for name, cpus in governors.items())
    if set(governors) == {"performance"}:
        return Finding("governor", Level.OK, found)
    others = ", ".join(sorted(set(governors) - {"performance"}))
    return Finding(
        "governor",
        Level.WARN,
        found,
        why="the clock follows the load, so the first steps and light phases run slower and "
        "figures drift with what else runs",
        fix="sudo cpupower frequency-set -g performance (or: echo performance | sudo tee "
        "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)",
        brief=f"CPU governor {others}",
    )


def _turbo(files: Files) -> Finding | None:
    no_turbo = files.text("/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = files.text("/sys/devices/system/cpu/cpufreq/boost")
    if no_turbo is not None:
        on, fix = no_turbo == "0", "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"
        driver = "intel_pstate"
    elif boost is not None:
        on, fix = boost == "1", "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost"
        driver = "cpufreq boost"
    else:
        return None
    if not on:
        return Finding("turbo", Level.OK, f"off ({driver})")
    return Finding(
        "turbo",
        Level.NOTE,
        f"on ({driver})",
        why="the clock depends on temperature and on how many cores are busy, so figures vary "
        "with the room and the neighbours; baselines need the same setting",
        fix=f"to turn it off: {fix}",
    )


def _smt(files: Files) -> Finding | None:
    active = files.text("/sys/devices/system/cpu/smt/active")
    control = files.text("/sys/devices/system/cpu/smt/control")
    if active is None:
        return None
    if active != "1":
        how = " (not supported)" if control == "notsupported" else ""
        return Finding("SMT", Level.OK, f"off{how}")
    return Finding(
        "SMT",
        Level.NOTE,
        "on: two logical CPUs share each core",
        why="torch starts a thread per logical CPU, so two of them may share a core's vector "
        "units; figures depend on how threads land",
        fix="echo off | sudo tee /sys/devices/system/cpu/smt/control, or set the threads to the "
        "physical cores (OMP_NUM_THREADS=N)",
    )


def _mounts(files: Files) -> list[tuple[str, str, str, str]]:
    """``(root, mount point, fs type, super options)`` of each mount of this process."""
    mounts = []
    for line in (files.text("/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3:
            mounts.append((fields[3], fields[4], tail[0], tail[2]))
    return mounts


def _cgroup_dirs(files: Files) -> list[tuple[str, Path]]:
    """The folders of this process's CPU cgroup and its ancestors, innermost first, with the
    cgroup version (``v2``: ``cpu.max``; ``v1``: ``cpu.cfs_quota_us``). The cgroup v2
    hierarchy is found through ``/proc/self/mountinfo``: it is not always at /sys/fs/cgroup."""
    found: list[tuple[str, Path]] = []
    groups = {}
    for line in (files.text("/proc/self/cgroup") or "").splitlines():
        number, controllers, path = [*line.split(":", 2), "", ""][:3]
        groups[number if number == "0" else controllers] = path
    for root, point, fstype, options in _mounts(files):
        if fstype == "cgroup2" and "0" in groups:
            path = groups["0"]
        elif fstype == "cgroup" and "cpu" in options.split(","):
            path = next((p for c, p in groups.items() if "cpu" in c.split(",")), "")
            if not path:
                continue
        else:
            continue
        relative = path[len(root) :] if root != "/" and path.startswith(root) else path
        folder = files.path(point) / relative.lstrip("/")
        top = files.path(point)
        version = "v2" if fstype == "cgroup2" else "v1"
        while True:
            found.append((version, folder))
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent
    return found


def _quota(version: str, folder: Path) -> float | None:
    """CPUs' worth of quota a cgroup folder sets, ``None`` for none."""
    try:
        if version == "v2":
            limit, every = (folder / "cpu.max").read_text().split()[:2]
            return None if limit == "max" else int(limit) / int(every)
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 else None
    except (OSError, ValueError):
        return None


def _throttled(folder: Path) -> int | None:
    try:
        for line in (folder / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "nr_throttled":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _cgroup(files: Files, usable: int) -> Finding:
    limits = [
        (quota, folder)
        for version, folder in _cgroup_dirs(files)
        if (quota := _quota(version, folder))
    ]
    if not limits:
        return Finding("cgroup quota", Level.OK, "no CPU quota on this process's cgroup")
    quota, folder = min(limits, key=lambda limit: limit[0])
    throttled = _throttled(folder)
    found = f"{quota:g} CPUs' worth of time per period for {usable} usable CPUs"
    if throttled:
        found += f"; throttled {throttled} times so far"
    if quota >= usable:
        return Finding("cgroup quota", Level.OK, found)
    return Finding(
        "cgroup quota",
        Level.WARN,
        found,
        why="torch starts a thread per usable CPU, and once they spend the quota the kernel "
        "stops them all until the next period: steps stall",
        fix="raise the limit (docker run --cpus, Kubernetes limits.cpu, systemd CPUQuota=) or "
        f"give torch {int(quota) or 1} thread(s) (OMP_NUM_THREADS={int(quota) or 1})",
        brief=f"CPU quota {quota:g} for {usable} CPUs",
    )


def _power(files: Files) -> Finding | None:
    on_battery = False
    for supply in files.glob("/sys/class/power_supply/*"):
        kind, online = _read(supply / "type"), _read(supply / "online")
        if kind == "Mains":
            if online == "1":
                return Finding("power", Level.OK, "on mains power")
            on_battery = True
    if not on_battery:
        return None
    return Finding(
        "power",
        Level.WARN,
        "on battery",
        why="laptops lower their clocks on battery",
        fix="plug the power cable in",
        brief="on battery",
    )


def _rapl(files: Files) -> Finding:
    zones = [
        p
        for p in files.glob("/sys/class/powercap/intel-rapl:*")
        if re.fullmatch(r"intel-rapl:\d+", p.name)
    ]
    if not zones:
        return Finding(
            "energy",
            Level.NOTE,
            "no RAPL energy counters (/sys/class/powercap/intel-rapl:*): no energy per image "
            "on this CPU",
            why="the kernel exposes none here (usual in virtual machines and off x86)",
        )
    if all(_read(zone / "energy_uj") is not None for zone in zones):
        return Finding("energy", Level.OK, f"RAPL energy counters of {len(zones)} zone(s) readable")
    return Finding(
        "energy",
        Level.NOTE,
        "the RAPL energy counters are readable by root only: no energy per image on this CPU",
        why="since CVE-2020-8694 the kernel makes them root-only unless an administrator "
        "grants access",
        fix="sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj (until the next boot; "
        "sysfsutils or a udev rule keeps it)",
    )


def _valgrind(which: Callable[[str], str | None] = shutil.which) -> Finding:
    """Whether ``--cnnperf-metric=instructions`` can count here: Valgrind and a C compiler
    (the callgrind helper is built once with it)."""
    from ..measuring import instructions

    missing = [name for name in ("valgrind", "callgrind_annotate") if which(name) is None]
    try:
        instructions.compiler(which)
    except instructions.InstructionsProblem:
        missing.append("a C compiler (cc, gcc or clang)")
    if missing:
        return Finding(
            "instructions",
            Level.NOTE,
            f"--cnnperf-metric=instructions cannot count here: no {', no '.join(missing)}",
            why="instruction counts have no noise on a shared machine; they need Valgrind's "
            "callgrind, and a C compiler to build its client requests once",
            fix="apt-get install valgrind gcc (Debian and Ubuntu), dnf install valgrind gcc "
            "(Fedora)",
        )
    command = which("valgrind")
    assert command is not None
    try:
        version = instructions.valgrind_version(command)
    except instructions.InstructionsProblem as exc:
        return Finding(
            "instructions", Level.NOTE, f"--cnnperf-metric=instructions cannot count here: {exc}"
        )
    kernels = instructions.kernels_for(version)
    return Finding(
        "instructions",
        Level.OK,
        f"Valgrind {version} and a C compiler found: --cnnperf-metric=instructions counts "
        f"here, with the {KERNELS[kernels.name]}",
    )


#: the kernels a count is taken with, as the doctor says it
KERNELS = {
    "no-fma": "kernels without FMA (Valgrind before 3.23 runs FMA lane by lane, a hundred "
    "times slower)",
    "avx2": "AVX2 kernels (Valgrind 3.23 and later run FMA natively)",
}


def cpu_section(
    root: Path = Path("/"),
    *,
    affinity: Sequence[int] | None = None,
    steal_interval_s: float | None = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Section:
    """The CPU's findings. ``affinity``: the CPUs this process may run on (default: its own,
    read from the kernel); ``steal_interval_s``: how long to watch the hypervisor's steal
    (``None``: not watched)."""
    files = Files(root)
    online = cpu_list(files.text("/sys/devices/system/cpu/online")) or list(
        range(os.cpu_count() or 1)
    )
    if affinity is None:
        affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else online
    fields = cpuinfo(files.path("/proc/cpuinfo"))
    model = fields.get("model name", "unknown CPU")
    virtual = "hypervisor" in fields.get("flags", "").split()
    usable = len(affinity)
    title = f"CPU: {model}, {len(online)} online ({cpu_ranges(online)})"
    title += (
        ", all usable by this process"
        if set(online) <= set(affinity)
        else f", {usable} usable by this process ({cpu_ranges(affinity)})"
    )
    findings: list[Finding | None] = [_load(files, len(online))]
    if steal_interval_s is not None:
        findings.append(_steal(files, steal_interval_s, sleep))
    findings += [
        _governor(files, virtual),
        _turbo(files),
        _smt(files),
        _cgroup(files, usable),
        _power(files),
    ]
    if virtual:
        findings.append(
            Finding(
                "virtual CPU",
                Level.NOTE,
                "running under a hypervisor",
                why="frequency, turbo and energy counters belong to the host and are not "
                "visible here, and other guests can take the CPUs (steal)",
            )
        )
    findings.append(_rapl(files))
    findings.append(_valgrind())
    return Section(title, tuple(f for f in findings if f is not None))
