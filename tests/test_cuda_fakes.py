"""The CUDA path on fakes, where no GPU is needed: which device's stream events go on, the
calibration's size, NVML's processes and throttling counters, counting and pinning GPUs, the
fork probe. ``tests/test_cuda.py`` runs the same path on a real GPU."""

from __future__ import annotations

import itertools
import os
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_cnnperf.gate.policy import TimingPolicy
from pytest_cnnperf.measuring import calibration
from pytest_cnnperf.measuring.timing import CudaClock, time_steps

DEVICE = torch.device("cuda", 1)
POLICY = TimingPolicy(
    warmup_min_steps=3,
    warmup_max_steps=10,
    warmup_max_s=100.0,
    warmup_tolerance=0.5,
    warmup_window=3,
    min_steps=5,
    max_steps=5,
    min_time_s=0.0,
)


class FakeCuda:
    """``torch`` as far as the CUDA clock and the calibration use it: every event records the
    stream it was recorded on, and every call that names a device is logged."""

    def __init__(self, multiprocessors: int = 132) -> None:
        self.created = 0
        self.log: list[tuple[str, Any]] = []
        self.products = 0
        fake = self
        clock = itertools.count()

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                fake.created += 1
                self.streams: list[Any] = []
                self.at = 0.0

            def record(self, stream: Any = None) -> None:
                self.streams.append(stream)
                self.at = float(next(clock))

            def elapsed_time(self, end: Any) -> float:
                return end.at - self.at

        self.Event = Event
        self.events: list[Any] = []
        self.cuda = SimpleNamespace(
            Event=self._event,
            current_stream=lambda device=None: ("stream", device),
            synchronize=lambda device=None: self.log.append(("synchronize", device)),
            get_device_properties=lambda device: SimpleNamespace(
                multi_processor_count=multiprocessors
            ),
        )
        self.float16 = "float16"

    def _event(self, enable_timing: bool = False) -> Any:
        event = self.Event(enable_timing)
        self.events.append(event)
        return event

    # the calibration's needs
    def Generator(self, device: Any) -> Any:
        self.log.append(("generator", device))
        return SimpleNamespace(manual_seed=lambda seed: None)

    def randn(self, shape: Any, **kwargs: Any) -> Any:
        self.log.append(("randn", kwargs["device"]))
        return SimpleNamespace(shape=shape)

    def empty_like(self, tensor: Any) -> Any:
        return tensor

    def mm(self, a: Any, b: Any, out: Any = None) -> Any:
        assert out is not None  # nothing allocated inside the unit
        self.products += 1
        return out

    def no_grad(self) -> Any:
        return torch.no_grad()

    def get_rng_state(self) -> Any:
        return None

    def set_rng_state(self, state: Any) -> None:
        pass


def test_events_go_on_the_measured_devices_stream_and_none_is_created_in_the_timed_block() -> None:
    """``--cnnperf-device=cuda:1``: the current device is 0, so an event recorded without a
    stream would time GPU 0's idle stream; and torch creates an event at its first record,
    which must not happen inside the timed steps."""
    fake = FakeCuda()
    clock = CudaClock(DEVICE, torch_module=fake)
    created_at_each_step: list[int] = []
    phases = [
        ("forward", lambda: created_at_each_step.append(fake.created)),
        ("backward", lambda: None),
    ]
    timed = time_steps(phases, clock, POLICY, per_step_wall=False)
    steps = len(timed.step_times_s)
    assert steps == POLICY.min_steps
    # the timed block's steps: no event created while they ran
    assert len(set(created_at_each_step[-steps:])) == 1
    recorded = {stream for event in fake.events for stream in event.streams}
    assert recorded == {("stream", DEVICE)}
    assert {device for name, device in fake.log if name == "synchronize"} == {DEVICE}
    assert set(timed.phases) == {"forward", "backward"}


@pytest.mark.parametrize(
    ("multiprocessors", "products"),
    [(132, 8), (108, 6), (40, 2), (16, 1), (4, 1), (1000, 16)],
)
def test_the_cuda_calibration_is_sized_to_the_device(multiprocessors: int, products: int) -> None:
    """H100/H200 (132 SMs): 8 products of 4096², about 1.1 TFLOP or 1.5-2 ms of real work, where
    the old unit (four of 2048²) was 0.1 ms, mostly kernel launches; a T4 (40 SMs) 2; a small
    MIG slice 1. Random inputs on the measured device; timed on its stream."""
    fake = FakeCuda(multiprocessors)
    clock = CudaClock(DEVICE, torch_module=fake)
    seconds, unit = calibration.calibrate(DEVICE, clock, torch_module=fake)
    assert unit == f"cuda-mm-fp16-4096x{products}"
    # whole units only, warmed up at least WARMUP times (and for WARMUP_S) before the repeats
    assert fake.products % products == 0
    assert fake.products >= products * (calibration.WARMUP + calibration.REPEATS)
    assert seconds > 0
    assert {device for name, device in fake.log if name in ("randn", "generator")} == {DEVICE}
    assert {s for event in fake.events for s in event.streams} == {("stream", DEVICE)}


def test_the_cpu_calibration_is_a_unit_of_its_own_not_the_unstamped_baselines() -> None:
    """The CPU unit became matrix products, timed before the first step: baselines recorded
    with the old small conv net (unstamped, or stamped cpu-convnet-v1) are compared as
    measured, with a note, until they are recorded again."""
    from pytest_cnnperf.measuring.timing import CpuClock
    from pytest_cnnperf.model.config import UNSTAMPED_CALIBRATION_UNITS

    state = torch.get_rng_state()
    seconds, unit = calibration.calibrate(torch.device("cpu"), CpuClock())
    assert seconds > 0
    assert unit == "cpu-mm-fp32-384x8"
    assert unit != UNSTAMPED_CALIBRATION_UNITS["cpu"]
    assert torch.equal(torch.get_rng_state(), state)  # its random inputs have their own generator


# ---- NVML: processes, throttling counters, the driver ----


def fake_nvml(pids: list[int], violations: dict[int, int] | None = None) -> Any:
    """``pynvml`` as far as a reading uses it: a process list, violation counters (ns) by policy,
    and nothing else (every other call raises, as on a restricted driver)."""

    def missing(*args: Any) -> Any:
        raise RuntimeError("NVMLError_NotSupported")

    def violation(handle: Any, policy: int) -> Any:
        if violations is None or policy not in violations:
            raise RuntimeError("NVMLError_NotSupported")
        return SimpleNamespace(referenceTime=0, violationTime=violations[policy])

    return SimpleNamespace(
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=p) for p in pids],
        nvmlDeviceGetViolationStatus=violation,
        NVML_PERF_POLICY_POWER=0,
        NVML_PERF_POLICY_THERMAL=1,
        NVML_CLOCK_SM=0,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetCurrentClocksEventReasons=missing,
        nvmlDeviceGetCurrentClocksThrottleReasons=missing,
        nvmlDeviceGetPowerUsage=missing,
        nvmlDeviceGetEnforcedPowerLimit=missing,
        nvmlDeviceGetClockInfo=missing,
        nvmlDeviceGetMaxClockInfo=missing,
        nvmlDeviceGetTemperature=missing,
        nvmlSystemGetDriverVersion=missing,
    )


def test_our_own_processes_are_not_others_on_the_gpu() -> None:
    """The pytest process that asked for the sample and the other ranks of a data-parallel step
    hold contexts too; only a stranger is a problem."""

    from pytest_cnnperf.measuring import nvml

    ours = frozenset({11, 12, 13})  # the pytest process and two sibling ranks
    monitor = nvml.GpuMonitor(fake_nvml([os.getpid(), 11, 12, 13]), "handle", ours)
    health = nvml.assess([monitor.read(), monitor.read()])
    assert health is not None
    assert health.other_processes == ()
    assert health.problems == ()
    stranger = nvml.GpuMonitor(fake_nvml([os.getpid(), 11, 4242]), "handle", ours)
    health = nvml.assess([stranger.read()])
    assert health is not None
    assert health.other_processes == (4242,)
    assert health.problems == ("1 other process(es) used the GPU (pids 4242)",)


def test_in_a_pid_namespace_other_processes_are_unknown_not_a_false_alarm() -> None:
    """In a container NVML lists host pids: this process's own pid is not among them, so none
    of them can be told apart from ours."""
    from pytest_cnnperf.measuring import nvml

    monitor = nvml.GpuMonitor(fake_nvml([981234, 981240]), "handle", frozenset({1}))
    health = nvml.assess([monitor.read(), monitor.read()])
    assert health is not None
    assert health.other_processes is None
    assert health.problems == ()


def test_throttling_comes_from_the_cumulative_counters_over_the_whole_window() -> None:
    """Thermal violations for 0.2 s of a 1 s window: a problem, whatever the instant reason
    bits said at either end; at the power cap for half of it: reported, normal under load."""
    from pytest_cnnperf.measuring import nvml
    from pytest_cnnperf.model import DeviceHealth

    def reading(at: float, power_ns: int, thermal_ns: int) -> nvml.Reading:
        health = DeviceHealth(None, None, None, None, None, None, (), (), ())
        return nvml.Reading(0, health, {"power": power_ns, "thermal": thermal_ns}, at)

    health = nvml.assess(
        [reading(10.0, 5_000_000_000, 7), reading(11.0, 5_500_000_000, 200_000_007)]
    )
    assert health is not None
    assert health.throttled == pytest.approx({"power": 0.5, "thermal": 0.2})
    assert health.problems == (
        "GPU clocks were held back for part of the measurement (thermal 20%)",
    )
    quiet = nvml.assess([reading(10.0, 0, 0), reading(11.0, 900_000_000, 0)])
    assert quiet is not None
    assert quiet.problems == ()


def test_a_driver_without_violation_counters_gives_no_throttling_figures() -> None:
    from pytest_cnnperf.measuring import nvml

    monitor = nvml.GpuMonitor(fake_nvml([os.getpid()], violations=None), "handle")
    assert monitor.counters() == {}
    counted = nvml.GpuMonitor(fake_nvml([os.getpid()], violations={0: 5, 1: 6}), "handle")
    assert counted.counters() == {"power": 5, "thermal": 6}
    health = nvml.assess([monitor.read(), monitor.read()])
    assert health is not None
    assert health.throttled == {}
    assert health.problems == ()


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
            "550.54.15",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release Build\n",
            "580.159.03",
        ),
        ("something else\n", None),
    ],
)
def test_without_nvml_the_driver_comes_from_the_kernel_module(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, text: str, version: str | None
) -> None:
    from pytest_cnnperf.measuring import nvml

    path = tmp_path / "version"
    path.write_text(text)
    monkeypatch.setattr(nvml, "DRIVER_VERSION_FILE", path)
    assert nvml.driver_version(None) == version
    monkeypatch.setattr(nvml, "DRIVER_VERSION_FILE", tmp_path / "missing")
    assert nvml.driver_version(None) is None


def test_a_mig_instance_is_found_by_its_mig_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch gives a device's uuid without a prefix; NVML knows a MIG instance as MIG-<uuid>."""
    import sys

    from pytest_cnnperf.measuring import nvml

    known = {"MIG-1234": "mig handle"}

    def by_uuid(name: str) -> str:
        if name not in known:
            raise RuntimeError("NVMLError_NotFound")
        return known[name]

    fake = SimpleNamespace(nvmlInit=lambda: None, nvmlDeviceGetHandleByUUID=by_uuid)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index: SimpleNamespace(uuid="1234")
    )
    monitor = nvml.GpuMonitor.open(0)
    assert monitor is not None
    assert monitor.handle == "mig handle"
    known.clear()
    assert nvml.GpuMonitor.open(0) is None


# ---- counting and pinning GPUs ----


def test_gpus_are_counted_through_nvml_without_starting_cuda(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``torch.cuda.device_count()`` starts the driver when NVML cannot tell (which poisons
    every process forked afterwards); the count never goes that way."""
    from pytest_cnnperf.measuring import device

    def forbidden() -> int:
        raise AssertionError("cudaGetDeviceCount would initialise the driver")

    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", forbidden)
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", forbidden, raising=False)
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: 3)
    assert device.cuda_device_count() == 3
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: -1)
    monkeypatch.setattr(device, "_driver_present", lambda: False)
    assert device.cuda_device_count() == 0


def test_where_nvml_cannot_tell_a_throw_away_process_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_cnnperf.measuring import device

    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: -1)
    monkeypatch.setattr(device, "_driver_present", lambda: True)
    ran: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> Any:
        ran.append(command)
        return SimpleNamespace(stdout="some warning\n2\n")

    monkeypatch.setattr(device.subprocess, "run", run)
    assert device.cuda_device_count() == 2
    assert len(ran) == 1
    assert "torch.cuda.device_count()" in ran[0][-1]


def test_an_xdist_worker_pins_its_gpu_before_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count sees the pinned list (and the driver reads it only then); on a machine without
    a GPU the variable is left as it was."""
    from pytest_cnnperf.sampling import xdist

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    seen: list[str | None] = []

    def count() -> int:
        seen.append(os.environ.get("CUDA_VISIBLE_DEVICES"))
        return 1

    assert xdist.pin_worker_gpu(1, count) == 1
    assert seen == ["5"]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert xdist.pin_worker_gpu(1, lambda: 0) == 0
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


# ---- which device is current ----


def test_a_sample_process_makes_the_measured_gpu_current_before_the_test_runs() -> None:
    """``--cnnperf-device=cuda:2``: the sample process works on GPU 2 from the start; a rank of
    a data-parallel step on its own GPU (never GPU 0 first); nothing on the CPU."""
    from pytest_cnnperf.sampling.child import current_device
    from pytest_cnnperf.sampling.messages import Job, Site

    def job(rank: int = 0, world_size: int = 1) -> Job:
        return Job(Site("t.py::t", "t.py", 0, "k"), (), "out", rank=rank, world_size=world_size)

    assert current_device(torch.device("cuda", 2), job()) == torch.device("cuda", 2)
    assert current_device(torch.device("cuda", 0), job(1, 2)) == torch.device("cuda", 1)
    assert current_device(torch.device("cpu"), job()) is None


def test_in_process_samples_run_with_the_measured_gpu_current(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--cnnperf-inprocess --cnnperf-device=cuda:1``: the benchmark runs with GPU 1 current,
    and the device current before it is current again afterwards."""
    import contextlib

    from pytest_cnnperf.measuring import torchstate

    entered: list[Any] = []

    @contextlib.contextmanager
    def device(which: Any) -> Any:
        entered.append(("enter", which))
        yield
        entered.append(("exit", which))

    monkeypatch.setattr(torch.cuda, "device", device)
    with torchstate.preserved(DEVICE):
        assert entered == [("enter", DEVICE)]
    assert entered == [("enter", DEVICE), ("exit", DEVICE)]
    entered.clear()
    with torchstate.preserved(torch.device("cpu")):
        pass
    assert entered == []


# ---- the fork probe ----


def test_the_probe_tells_a_hung_thread_pool_from_slow_cuda_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 5 s limit is for the CPU part alone: starting CUDA (seconds without persistence
    mode) has its own, and each timeout names its own cause."""
    import time

    from pytest_cnnperf.sampling import zygote

    monkeypatch.setattr(zygote, "PROBE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(zygote, "CUDA_PROBE_TIMEOUT_S", 0.6)
    assert zygote._probe(lambda done: done()) is None

    def slow_cuda(done: Any) -> None:
        done()
        time.sleep(0.5)  # past the CPU part's limit, within CUDA's

    assert zygote._probe(slow_cuda) is None

    def hung_cuda(done: Any) -> None:
        done()
        time.sleep(30)

    message = zygote._probe(hung_cuda)
    assert message is not None
    assert message.startswith("a forked process could not start CUDA within 1 s")

    message = zygote._probe(lambda done: time.sleep(30))
    assert message is not None
    assert message.startswith("a forked process hung in torch's thread pool")

    def failing(done: Any) -> None:
        done()
        raise RuntimeError("CUDA error: out of memory")

    assert zygote._probe(failing) == (
        "starting CUDA failed in a forked process: RuntimeError: CUDA error: out of memory"
    )


POISONING_CONFTEST = """
import torch

torch.cuda.is_available()
"""


@pytest.mark.skipif(not torch.backends.cuda.is_built(), reason="needs a CUDA build of torch")
@pytest.mark.parametrize(
    "poisoned",
    [True, pytest.param(False, marks=pytest.mark.slow)],  # fresh processes each
)
def test_cuda_initialised_before_the_session_is_named_with_the_fix(
    tmp_path: Any, poisoned: bool
) -> None:
    """``torch.cuda.is_available()`` in a conftest registers torch's fork handler: a forked
    process cannot use CUDA, whether or not a driver is there. The probe says exactly that, and
    what to do; without it, CUDA starts, or its own error comes through (without a GPU)."""
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(
        (POISONING_CONFTEST if poisoned else "import torch\n")
        + "from pytest_cnnperf.sampling import zygote\n"
        + "print(zygote._probe(lambda done: zygote.probe_torch('cuda:0', done)))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True
    )
    from pytest_cnnperf.sampling.zygote import POISONED

    if poisoned:
        assert done.stdout.strip() == POISONED
        assert "torch.cuda.is_available()" in POISONED
        assert "PYTORCH_NVML_BASED_CUDA_CHECK=1" in POISONED
    else:  # CUDA's own outcome: it starts on a GPU machine, elsewhere torch's error comes through
        out = done.stdout.strip()
        assert out == "None" or out.startswith("starting CUDA failed in a forked process: ")


#: what torch raises in a process forked after the CUDA driver was started without torch's fork
#: handler (by another library): c10's device count on cudaErrorInitializationError
#: (c10/cuda/CUDAFunctions.cpp), c10's check of any other CUDA call (CUDAException.cpp), and that
#: error again from a call queued until CUDA's start (torch/cuda/__init__.py's _lazy_init)
DRIVER_STARTED = [
    RuntimeError("CUDA driver initialization failed, you might not have a CUDA gpu."),
    getattr(torch, "AcceleratorError", RuntimeError)(
        "CUDA error: initialization error\nCUDA kernel errors might be asynchronously reported "
        "at some other API call, so the stacktrace below might be incorrect.\nFor debugging "
        "consider passing CUDA_LAUNCH_BLOCKING=1\n"
    ),
    torch.cuda.DeferredCudaCallError(
        "CUDA call failed lazily at initialization with error: CUDA error: initialization error"
        "\n\nCUDA call was originally invoked at:\n\n  File ..."
    ),
]


@pytest.mark.parametrize("error", DRIVER_STARTED, ids=["device-count", "cuda-check", "queued"])
def test_a_driver_started_before_the_fork_is_named_with_the_fix(error: Exception) -> None:
    """A conftest or library that started the CUDA driver without torch's fork handler (torch's
    bad-fork flag is then unset in the forked probe): CUDA's start fails with the driver's
    initialisation error, which the probe names as CUDA started before the fork, with the fix,
    keeping torch's own line."""
    from pytest_cnnperf.sampling import zygote

    def driver_started_before(done: Any) -> None:
        done()
        raise error

    message = zygote._probe(driver_started_before)
    first = f"{type(error).__name__}: {str(error).splitlines()[0]}"
    assert message == f"{zygote.POISONED} (torch's error: {first})"
    assert "torch.cuda.is_available()" in zygote.POISONED
    assert "PYTORCH_NVML_BASED_CUDA_CHECK=1" in zygote.POISONED
    assert "imported a library that starts CUDA itself" in zygote.POISONED


@pytest.mark.parametrize(("answer", "started"), [(0, True), (3, False)])
def test_the_pytest_process_asks_the_driver_whether_it_started(
    monkeypatch: pytest.MonkeyPatch, answer: int, started: bool
) -> None:
    """Before cuInit every driver call answers CUDA_ERROR_NOT_INITIALIZED (3); after it,
    cuDeviceGetCount answers CUDA_SUCCESS (0), whoever called cuInit."""
    import ctypes

    from pytest_cnnperf.sampling import zygote

    asked: list[str] = []

    class FakeDriver:
        def __init__(self, name: str) -> None:
            asked.append(name)

        def cuDeviceGetCount(self, count: Any) -> int:
            return answer

    monkeypatch.setattr(ctypes, "CDLL", FakeDriver)
    assert zygote.cuda_driver_started() is started
    assert asked == ["libcuda.so.1"]


DRIVER_STARTED_SCRIPT = """
from pytest_cnnperf.sampling import manager

manager.cuda_driver_started = lambda: True  # as after cuInit by a library torch does not see
sampling = manager.Sampling("cuda:0", False, 60.0)
sampling.start(lambda job: None)
print(sampling.zygote.wait_ready())
print(sampling.zygote.unusable)
sampling.close()
"""


def test_a_driver_started_in_the_pytest_process_makes_the_zygote_unusable(tmp_path: Any) -> None:
    """The pytest process asks the driver before forking the zygote (a forked process cannot
    tell): the probe then names the cause and the fix, where without the answer CUDA's own
    error would come through (here: no driver). In a fresh process, whose torch has started no
    thread pool that the probe's CPU part would hang on."""
    import subprocess
    import sys

    from pytest_cnnperf.sampling.zygote import POISONED

    script = tmp_path / "started.py"
    script.write_text(DRIVER_STARTED_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.splitlines() == ["False", POISONED]
