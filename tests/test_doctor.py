"""``cnnperf doctor`` on fake ``/proc`` and ``/sys`` trees and a fake NVML: each finding, its
level, why it matters and its fix; the session's one-line warning; the command."""

from __future__ import annotations

import io
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_cnnperf import doctor
from pytest_cnnperf.cli import main
from pytest_cnnperf.doctor import cpu, gpu
from pytest_cnnperf.doctor.findings import Finding, Level, Section

QUIET_STAT = "cpu  1000 0 500 8000 10 0 5 0 0 0\ncpu0 500 0 250 4000 5 0 2 0 0 0\n"


def machine(root: Path, files: dict[str, str]) -> Path:
    """A fake machine: ``files`` maps absolute paths to their text."""
    defaults = {
        "/sys/devices/system/cpu/online": "0-3",
        "/proc/cpuinfo": "processor\t: 0\nmodel name\t: Test CPU 3000\nflags\t\t: fpu sse avx\n",
        "/proc/loadavg": "0.10 0.20 0.30 1/100 1234",
        "/proc/pressure/cpu": "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0",
        "/proc/stat": QUIET_STAT,
        "/proc/self/cgroup": "0::/user.slice\n",
        "/proc/self/mountinfo": "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
    }
    for path, text in {**defaults, **files}.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n")
    return root


def findings(root: Path, **options: Any) -> dict[str, Finding]:
    options.setdefault("affinity", [0, 1, 2, 3])
    options.setdefault("steal_interval_s", None)
    section = cpu.cpu_section(root, **options)
    return {f.topic: f for f in section.findings}


def test_a_quiet_machine_is_fit(tmp_path: Path) -> None:
    found = findings(machine(tmp_path, {}))
    assert found["load"] == Finding(
        "load",
        Level.OK,
        "0.03 runnable tasks per CPU over the last minute (load average 0.10 on 4 CPUs); some "
        "task waited for a CPU 0.0% of the last 10 s",
    )
    assert found["cgroup quota"].level is Level.OK
    # steal watched over its usual interval, on a fake /proc/stat that needs no waiting
    whole = cpu.cpu_section(tmp_path, affinity=[0, 1, 2, 3], sleep=lambda seconds: None)
    assert doctor.warnings([whole]) == []


def test_a_busy_machine_is_a_warning_with_why_and_fix(tmp_path: Path) -> None:
    root = machine(
        tmp_path,
        {
            "/proc/loadavg": "6.64 4.74 2.59 6/132 17579",
            "/proc/pressure/cpu": "some avg10=94.50 avg60=89.91 avg300=71.83 total=465263595",
        },
    )
    load = findings(root)["load"]
    assert load.level is Level.WARN
    assert load.found.startswith("1.66 runnable tasks per CPU over the last minute")
    assert load.why.startswith("torch's threads share the cores with other processes")
    assert load.fix == (
        "stop the other jobs (top -o %CPU lists them), or benchmark when the machine is quiet"
    )
    assert load.brief == "load 1.7 per CPU, CPU pressure 94%"


def test_steal_is_watched_over_an_interval(tmp_path: Path) -> None:
    root = machine(tmp_path, {})

    def steal(seconds: float) -> None:  # the hypervisor took 10 of 100 ticks meanwhile
        (root / "proc/stat").write_text("cpu  1060 0 520 8010 10 0 5 10 0 0\n")

    found = findings(root, steal_interval_s=1.0, sleep=steal)["steal"]
    assert found.level is Level.WARN
    assert found.found == (
        "10.0% of the CPUs' time went to other guests of the hypervisor (over 1 s)"
    )
    assert found.fix == "benchmark on a dedicated or larger instance, or at a quieter time"


def test_the_governor_and_turbo(tmp_path: Path) -> None:
    files = {
        f"/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor": "powersave" for i in range(3)
    }
    files["/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"] = "performance"
    files["/sys/devices/system/cpu/intel_pstate/no_turbo"] = "0"
    found = findings(machine(tmp_path, files))
    governor = found["governor"]
    assert governor.level is Level.WARN
    assert governor.found == "powersave on CPUs 0-2; performance on CPUs 3"
    assert governor.fix.startswith("sudo cpupower frequency-set -g performance")
    turbo = found["turbo"]
    assert (turbo.level, turbo.found) == (Level.NOTE, "on (intel_pstate)")
    assert turbo.fix == (
        "to turn it off: echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"
    )


def test_a_virtual_machine_without_cpufreq(tmp_path: Path) -> None:
    info = "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu hypervisor avx512f\n"
    found = findings(
        machine(
            tmp_path,
            {
                "/proc/cpuinfo": info,
                "/sys/devices/system/cpu/smt/active": "0",
                "/sys/devices/system/cpu/smt/control": "notsupported",
                "/sys/devices/system/cpu/cpufreq/boost": "0",
            },
        )
    )
    assert found["governor"] == Finding(
        "governor",
        Level.OK,
        "no CPU frequency scaling visible (a virtual machine: the host sets the clocks)",
    )
    assert found["virtual CPU"].level is Level.NOTE
    assert found["SMT"] == Finding("SMT", Level.OK, "off (not supported)")
    assert found["turbo"] == Finding("turbo", Level.OK, "off (cpufreq boost)")
    assert cpu.cpu_section(tmp_path, affinity=[0, 1, 2, 3], steal_interval_s=None).title == (
        "CPU: Intel(R) Xeon(R) Processor, 4 online (0-3), all usable by this process"
    )


def test_smt_on_is_a_note(tmp_path: Path) -> None:
    found = findings(machine(tmp_path, {"/sys/devices/system/cpu/smt/active": "1"}))["SMT"]
    assert found.level is Level.NOTE
    assert found.fix.startswith("echo off | sudo tee /sys/devices/system/cpu/smt/control")


def test_a_cgroup_v2_quota_is_found_through_mountinfo_at_any_mount_point(tmp_path: Path) -> None:
    """The v2 hierarchy is mounted at /sys/fs/cgroup/unified on some machines; a parent's
    limit applies to its children."""
    root = machine(
        tmp_path,
        {
            "/proc/self/mountinfo": "25 1 0:22 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
            "31 25 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw",
            "/proc/self/cgroup": "1:cpu:/\n0::/ci/job-7",
            "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1",
            "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000",
            "/sys/fs/cgroup/unified/ci/job-7/cpu.max": "max 100000",
            "/sys/fs/cgroup/unified/ci/cpu.max": "150000 100000",
            "/sys/fs/cgroup/unified/ci/cpu.stat": "usage_usec 5\nnr_periods 50\nnr_throttled 12",
        },
    )
    found = findings(root)["cgroup quota"]
    assert found.level is Level.WARN
    assert (
        found.found
        == "1.5 CPUs' worth of time per period for 4 usable CPUs; throttled 12 times so far"
    )
    assert found.fix.endswith("or give torch 1 thread(s) (OMP_NUM_THREADS=1)")
    assert found.brief == "CPU quota 1.5 for 4 CPUs"


def test_a_cgroup_v1_quota_within_a_containers_mount(tmp_path: Path) -> None:
    root = machine(
        tmp_path,
        {
            "/proc/self/mountinfo": "40 30 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - "
            "cgroup cgroup rw,cpu,cpuacct",
            "/proc/self/cgroup": "4:cpu,cpuacct:/docker/abc",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "400000",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000",
        },
    )
    found = findings(root)["cgroup quota"]
    assert (found.level, found.found) == (
        Level.OK,
        "4 CPUs' worth of time per period for 4 usable CPUs",
    )
    assert findings(root, affinity=[0, 1, 2, 3, 4, 5])["cgroup quota"].level is Level.WARN


def test_power_on_battery(tmp_path: Path) -> None:
    root = machine(
        tmp_path,
        {
            "/sys/class/power_supply/AC/type": "Mains",
            "/sys/class/power_supply/AC/online": "0",
            "/sys/class/power_supply/BAT0/type": "Battery",
        },
    )
    assert findings(root)["power"].level is Level.WARN
    (root / "sys/class/power_supply/AC/online").write_text("1\n")
    assert findings(root)["power"] == Finding("power", Level.OK, "on mains power")


def test_rapl_counters(tmp_path: Path) -> None:
    root = machine(tmp_path, {})
    assert findings(root)["energy"].found.startswith("no RAPL energy counters")
    zone = root / "sys/class/powercap/intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "energy_uj").mkdir()  # a read fails, as a root-only file's would
    unreadable = findings(root)["energy"]
    assert unreadable.level is Level.NOTE
    assert unreadable.fix.startswith("sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj")
    (zone / "energy_uj").rmdir()
    (zone / "energy_uj").write_text("123\n")
    assert findings(root)["energy"] == Finding(
        "energy", Level.OK, "RAPL energy counters of 1 zone(s) readable"
    )


def test_this_machines_own_files_are_read_without_error() -> None:
    section = cpu.cpu_section(steal_interval_s=0.05)
    assert section.title.startswith("CPU: ")
    assert {"load", "governor", "cgroup quota", "energy"} <= {f.topic for f in section.findings}


# ---- the GPU, through a fake NVML ----


class FakeNvml:
    """The NVML functions the doctor calls, answering as a healthy H100 would unless told."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0

    def __init__(self, count: int = 1, **answers: Any) -> None:
        self.count = count
        self.answers = {
            "name": "NVIDIA H100 80GB HBM3",
            "persistence": 1,
            "reasons": 0x2,
            "clock": 1980,
            "max_clock": 1980,
            "temperature": 45,
            "power_limit": 700_000,
            "default_limit": 700_000,
            "processes": [],
            "ecc": (1, 1),
            "ecc_errors": 0,
            "rows": (0, 0, 0, 0),
            "pcie": (5, 16, 5, 16, 5),
            "mig": (0, 0),
            "energy": 123_456,
            "cores": 16896,
            **answers,
        }

    def _answer(self, key: str) -> Any:
        value = self.answers[key]
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-{handle}aaa-bbb"

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return str(self._answer("name")).encode()

    def nvmlDeviceGetPersistenceMode(self, handle: int) -> int:
        return int(self._answer("persistence"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return int(self._answer("reasons"))

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        return int(self._answer("clock"))

    def nvmlDeviceGetMaxClockInfo(self, handle: int, kind: int) -> int:
        return int(self._answer("max_clock"))

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return int(self._answer("temperature"))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return int(self._answer("power_limit"))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: int) -> int:
        return int(self._answer("default_limit"))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        return [SimpleNamespace(pid=pid) for pid in self._answer("processes")]

    def nvmlDeviceGetEccMode(self, handle: int) -> tuple[int, int]:
        value: tuple[int, int] = self._answer("ecc")
        return value

    def nvmlDeviceGetTotalEccErrors(self, handle: int, kind: int, counter: int) -> int:
        return int(self._answer("ecc_errors"))

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        value: tuple[int, int, int, int] = self._answer("rows")
        return value

    def _pcie(self, i: int) -> int:
        return int(self._answer("pcie")[i])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return self._pcie(0)

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return self._pcie(1)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return self._pcie(2)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return self._pcie(3)

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle: int) -> int:
        return self._pcie(4)

    def nvmlDeviceGetMigMode(self, handle: int) -> tuple[int, int]:
        value: tuple[int, int] = self._answer("mig")
        return value

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return int(self._answer("energy"))

    def nvmlDeviceGetNumGpuCores(self, handle: int) -> int:
        return int(self._answer("cores"))


def gpu_findings(nvml: FakeNvml, **options: Any) -> dict[str, Finding]:
    options.setdefault("environ", {})
    (section,) = gpu.gpu_sections(nvml, **options)
    found: dict[str, Finding] = {}
    for f in section.findings:
        found.setdefault(f.topic, f)
    return found


def test_a_healthy_gpu_with_locked_clocks_is_fit() -> None:
    (section,) = gpu.gpu_sections(FakeNvml(), environ={})
    assert section.title == "GPU 0: NVIDIA H100 80GB HBM3"
    assert [f for f in section.findings if f.level is not Level.OK] == []
    found = {f.topic: f for f in section.findings}
    assert found["clocks"].found == "set by the user (locked or application clocks)"
    assert found["PCIe link"].found == ("Gen5 x16 at most; now Gen5 x16 (links slow down at idle)")
    assert found["peak"].found == (
        "NVIDIA H100 SXM5 in the table (dense: tf32 494.5, bf16 989.5, fp32 67.0 TFLOP/s); "
        "NVML: 16896 cores x 2 x 1980 MHz = 66.9 TFLOP/s fp32"
    )


def test_floating_clocks_and_persistence_off_are_notes_with_their_commands() -> None:
    found = gpu_findings(FakeNvml(reasons=0x1, persistence=0))
    assert found["clocks"].level is Level.NOTE
    assert found["clocks"].fix.startswith("sudo nvidia-smi -i 0 --lock-gpu-clocks=1980,1980")
    assert found["persistence mode"].level is Level.NOTE
    assert found["persistence mode"].fix == (
        "sudo nvidia-smi -i 0 -pm 1 (or run nvidia-persistenced)"
    )


def test_what_makes_a_gpu_unfit_is_a_warning(tmp_path: Path) -> None:
    nvml = FakeNvml(
        reasons=0x20 | 0x80,
        temperature=91,
        power_limit=400_000,
        processes=[4242, os.getpid()],
        ecc_errors=3,
        pcie=(1, 8, 3, 8, 5),
    )
    (section,) = gpu.gpu_sections(nvml, environ={})
    warned = {f.topic: f for f in section.findings if f.level is Level.WARN}
    assert set(warned) == {
        "clock events",
        "temperature",
        "power limit",
        "other processes",
        "ECC errors",
        "PCIe link",
    }
    assert warned["clock events"].found == (
        "slowed down now: SwThermalSlowdown, HwPowerBrakeSlowdown (SM clock 1980 of 1980 MHz)"
    )
    assert warned["power limit"].fix == "sudo nvidia-smi -i 0 -pl 700"
    assert warned["other processes"].found == "1 process(es) use the GPU (pids 4242)"
    assert warned["PCIe link"].found == (
        "Gen3 x8 at most; now Gen1 x8 (links slow down at idle); the GPU supports Gen5"
    )
    line = doctor.session_warning("cuda", machine(tmp_path, {}), (nvml, None))
    assert line is not None
    assert "GPU 0 SwThermalSlowdown, HwPowerBrakeSlowdown" in line
    assert "GPU 0 shared with 1 process(es)" in line


def test_unknown_gpus_mig_and_no_energy_counter_are_notes() -> None:
    found = gpu_findings(
        FakeNvml(name="NVIDIA A10G", mig=(1, 1), energy=RuntimeError("NotSupported"))
    )
    assert found["peak"].found == "unknown: NVIDIA A10G is not in pytest-cnnperf's table of peaks"
    assert found["peak"].fix.startswith("state it in the ini file: cnnperf_peak_tflops = ")
    assert found["MIG"].level is Level.NOTE
    assert found["energy counter"].level is Level.NOTE


def test_a_peak_that_disagrees_with_the_gpus_own_cores_and_clock_is_a_note() -> None:
    found = gpu_findings(FakeNvml(max_clock=1400, reasons=0x2))
    assert found["peak"].level is Level.NOTE
    assert "disagree by more than 10%" in found["peak"].why


@pytest.mark.parametrize(
    ("visible", "indices"),
    [(None, [0, 1, 2]), ("2,0", [2, 0]), ("GPU-1aaa", [1]), ("1,bad,2", [1]), ("", [])],
)
def test_only_the_gpus_cuda_sees_are_checked(visible: str | None, indices: list[int]) -> None:
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    sections = gpu.gpu_sections(FakeNvml(count=3), environ=environ)
    if not indices:
        assert [s.title for s in sections] == ["GPU: none visible to CUDA"]
    else:
        assert [s.title.split(":")[0] for s in sections] == [f"GPU {i}" for i in indices]


def test_without_nvml_the_gpu_is_not_checked_and_says_why() -> None:
    (section,) = gpu.gpu_sections(None, "nvidia-ml-py (the pynvml module) is not installed")
    assert section.title == ("GPU: not checked: nvidia-ml-py (the pynvml module) is not installed")


# ---- what the command and the session say ----


def test_render_says_why_and_fix_for_what_is_not_ok_and_the_verdict_last() -> None:
    sections = [
        Section(
            "CPU: Test",
            (
                Finding("load", Level.WARN, "busy", why="it slows", fix="wait"),
                Finding("SMT", Level.OK, "off", why="unused", fix="unused"),
            ),
        )
    ]
    assert doctor.render(sections) == [
        "CPU: Test",
        "  warn  load: busy",
        "        why: it slows",
        "        fix: wait",
        "  ok    SMT: off",
        "",
        "not fit to benchmark on: 1 warning (load)",
    ]
    assert doctor.render([])[-1] == "fit to benchmark on: no warnings (the notes are worth knowing)"


def test_the_session_warning_is_one_line_or_none(tmp_path: Path) -> None:
    quiet = machine(tmp_path / "quiet", {})
    assert doctor.session_warning("cpu", quiet) is None
    busy = machine(
        tmp_path / "busy",
        {
            "/proc/loadavg": "6.64 4.74 2.59 6/132 17579",
            "/proc/pressure/cpu": "some avg10=94.50 avg60=89.91 avg300=71.83 total=465263595",
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "powersave",
        },
    )
    assert doctor.session_warning("cpu", busy) == (
        "this machine is not fit to benchmark on: load 1.7 per CPU, CPU pressure 94%; CPU "
        "governor powersave; `cnnperf doctor` says why and how to fix it"
    )
    # a GPU run cares about the CPU's load, not its governor
    assert doctor.session_warning("cuda", busy, (None, "no NVML")) == (
        "this machine is not fit to benchmark on: load 1.7 per CPU, CPU pressure 94%; "
        "`cnnperf doctor` says why and how to fix it"
    )


def test_a_load_average_left_by_a_job_that_ended_is_no_warning(tmp_path: Path) -> None:
    """The load average lags a minute behind: right after an install it is still high while
    nothing waits for a CPU any more (seen at the start of the README's first command)."""
    after_install = machine(
        tmp_path / "after",
        {
            "/proc/loadavg": "1.40 0.90 0.50 1/132 17579",
            "/proc/pressure/cpu": "some avg10=0.00 avg60=31.20 avg300=9.80 total=465263595",
        },
    )
    assert doctor.session_warning("cpu", after_install) is None
    no_psi = machine(tmp_path / "no-psi", {"/proc/loadavg": "2.80 0.90 0.50 1/132 17579"})
    no_psi.joinpath("proc/pressure/cpu").unlink(missing_ok=True)
    assert doctor.session_warning("cpu", no_psi) == (
        "this machine is not fit to benchmark on: load 0.7 per CPU; "
        "`cnnperf doctor` says why and how to fix it"
    )


def test_the_command_prints_the_findings_and_exits_1_when_unfit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unfit = [Section("CPU: Test", (Finding("load", Level.WARN, "busy", fix="wait"),))]
    monkeypatch.setattr(doctor, "examine", lambda: unfit)
    out = io.StringIO()
    assert main(["doctor"], out=out) == 1
    assert (
        out.getvalue()
        == "CPU: Test\n  warn  load: busy\n        fix: wait\n\nnot fit to benchmark on: 1 warning (load)\n"
    )
    monkeypatch.setattr(doctor, "examine", lambda: [Section("CPU: Test", ())])
    assert main(["doctor"], out=io.StringIO()) == 0


def test_a_session_starts_with_the_warning_in_its_header(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "session_warning", lambda device_type: "load 9 per CPU")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--cnnperf")
    result.stdout.fnmatch_lines(
        ["cnnperf: cpu, measured in fresh sample processes; *", "cnnperf: warning: load 9 per CPU"]
    )
    monkeypatch.setattr(doctor, "session_warning", lambda device_type: None)
    assert "cnnperf: warning" not in pytester.runpytest("--cnnperf").stdout.str()
