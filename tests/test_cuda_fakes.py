"""The CUDA path on fakes, where no GPU is needed: which device's stream events go on, the
calibration's size, NVML's processes and throttling counters, counting and pinning GPUs, the
fork probe. ``tests/test_cuda.py`` runs the same path on a real GPU."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_cnnperf.measuring import calibration
from pytest_cnnperf.measuring.timing import CudaClock, time_steps
from pytest_cnnperf.policy import TimingPolicy

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
    assert fake.products == products * (calibration.WARMUP + calibration.REPEATS)
    assert seconds > 0
    assert {device for name, device in fake.log if name in ("randn", "generator")} == {DEVICE}
    assert {s for event in fake.events for s in event.streams} == {("stream", DEVICE)}


def test_the_cpu_calibration_has_the_unit_of_unstamped_baselines() -> None:
    from pytest_cnnperf.measuring.timing import CpuClock
    from pytest_cnnperf.results import UNSTAMPED_CALIBRATION_UNITS

    seconds, unit = calibration.calibrate(torch.device("cpu"), CpuClock())
    assert seconds > 0
    assert unit == UNSTAMPED_CALIBRATION_UNITS["cpu"]
