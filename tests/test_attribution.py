"""From verdict to cause: which operators got slower.

The diff of two profiles on made-up operators (what it names, what it leaves to the machine or to
the noise, how it words them), then known answers on the CPU: a small convolutional net changed
in one way between its baseline's profile and the current one, profiled for real, must have the
right operator named first; the same code with slower steps outside any operator, none.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import factories
import pytest
import torch
import torch.nn.functional as F
from scripted import Scripted
from torch import nn
from torch.autograd import DeviceType

from pytest_cnnperf.gate.attribute import attribute
from pytest_cnnperf.measuring.profile import (
    MEMORY_ROWS,
    RAW_EVENT_METHODS,
    TIME_ROWS,
    module_ranges,
    profile_steps,
    raw_events,
    summarise,
)
from pytest_cnnperf.measuring.profile import ProfileFailed as ProfileFailing
from pytest_cnnperf.measuring.timing import CpuClock, run_step
from pytest_cnnperf.measuring.workload import TrainSpec, Workload, build_train
from pytest_cnnperf.model import (
    Attribution,
    BenchConfig,
    MemoryPeak,
    OperatorChange,
    OperatorTime,
    PeakParts,
    Profile,
    ProfileFailed,
    Sample,
)
from pytest_cnnperf.runner import _profiled
from pytest_cnnperf.sampling.manager import Target
from pytest_cnnperf.store.locations import readable_name

MS = 1e-3


def profile(*rows: tuple[str, float], step: float = 10 * MS, spread: float = 0.02) -> Profile:
    """A profile of ``(name, milliseconds)`` rows, each varying by ``spread`` of its time."""
    return Profile(
        clock="cpu",
        steps=5,
        step_s=step,
        operators=tuple(
            OperatorTime(name, calls=1, seconds=ms * MS, spread=spread * ms * MS)
            for name, ms in rows
        ),
    )


#: a step's operators: three large ones, and small ones that vote on the machine's change
BASE = (
    ("aten::mkldnn_convolution", 4.0),
    ("aten::convolution_backward", 3.0),
    ("aten::addmm", 1.0),
    ("aten::add_", 0.4),
    ("aten::threshold_backward", 0.3),
    ("aten::zero_", 0.2),
)


def test_a_slower_operator_is_named_with_its_share_of_the_change() -> None:
    before = profile(*BASE)
    after = profile(*BASE[:2], ("aten::addmm", 4.0), *BASE[3:], step=13 * MS)
    found = attribute(before, after)
    assert [c.name for c in found.changes] == ["aten::addmm"]
    assert (
        found.changes[0].text()
        == "aten::addmm +3.0 ms a step (1.0 ms -> 4.0 ms, 100% of the change)"
    )
    assert found.explained == pytest.approx(1.0)
    assert found.lines() == [
        "aten::addmm +3.0 ms a step (1.0 ms -> 4.0 ms, 100% of the change)",
        "these explain 100% of the step's change",
    ]


def test_an_operator_is_named_with_the_module_that_ran_it() -> None:
    change = OperatorChange("aten::conv2d", 0.0274, 0.095, module="layer4.1.conv2", share=0.35)
    assert change.text() == (
        "aten::conv2d +67.6 ms a step (27.4 ms -> 95.0 ms, 35% of the change), "
        "in module layer4.1.conv2"
    )


def test_a_trace_is_named_after_its_module_test_and_key_readably() -> None:
    assert readable_name("train_step ResNet bs=64 224x224 opt=sgd") == (
        "train_step_ResNet_bs=64_224x224_opt=sgd"
    )
    assert readable_name("test_resnet[cuda:0-64]") == "test_resnet[cuda_0-64]"
    assert readable_name("..hidden/x.") == "_hidden_x_"
    assert readable_name("") == "_"


def test_new_and_gone_operators_are_named_as_such_in_the_changes_direction() -> None:
    before = profile(*BASE, ("aten::upsample_nearest2d", 2.0))
    after = profile(*BASE, ("aten::copy_", 3.1), step=11 * MS)
    slower = attribute(before, after)
    assert [c.text() for c in slower.changes] == [
        "aten::copy_ 3.1 ms a step (new, 310% of the change)"  # the gone one made it faster
    ]
    faster = attribute(after, before)
    assert [c.text() for c in faster.changes] == [
        "aten::copy_ 3.1 ms a step (gone, 310% of the change)"
    ]


def test_an_operator_below_the_baselines_cut_is_not_called_new() -> None:
    before = Profile("cpu", 5, 10 * MS, profile(*BASE).operators, rest=("aten::copy_",))
    after = profile(*BASE, ("aten::copy_", 3.0), step=13 * MS)
    (change,) = attribute(before, after).changes
    assert not change.new
    assert change.text() == (
        "aten::copy_ 3.0 ms a step (below the baseline's top operators before, 100% of the change)"
    )


def test_an_operator_called_more_often_changed_for_certain() -> None:
    """One more convolution a step: its change is named though the convolutions vary by 30%,
    and does not count as the machine's."""
    before = profile(*BASE, spread=0.3)
    more = OperatorTime("aten::mkldnn_convolution", calls=2, seconds=6 * MS, spread=1.8 * MS)
    after = Profile("cpu", 5, 12 * MS, (more, *profile(*BASE[1:], spread=0.3).operators))
    (change,) = attribute(before, after).changes
    assert (
        change.text()
        == "aten::mkldnn_convolution +2.0 ms a step (4.0 ms -> 6.0 ms, 100% of the change)"
    )
    same_calls = dataclasses.replace(more, calls=1)
    assert not attribute(
        before, dataclasses.replace(after, operators=(same_calls, *after.operators[1:]))
    ).found


def test_a_few_operators_cannot_tell_the_machine_from_the_code() -> None:
    """Below five operators their common change is taken as none: in a step of two, one that
    doubled would otherwise be the machine's."""
    before = profile(("aten::mm", 6.0), ("aten::add", 2.0), spread=0.0)
    after = profile(("aten::mm", 12.0), ("aten::add", 2.0), step=16 * MS, spread=0.0)
    found = attribute(before, after)
    assert found.alike == 1.0
    assert [c.name for c in found.changes] == ["aten::mm"]


def test_a_machine_that_slows_every_operator_alike_names_none() -> None:
    before = profile(*BASE)
    after = profile(*((name, ms * 1.3) for name, ms in BASE), step=13 * MS)
    found = attribute(before, after)
    assert not found.found
    assert found.alike == pytest.approx(1.3)
    assert found.lines() == [
        "no operator-level cause found: no operator changed beyond its noise; the operators "
        "changed alike by +30% (the machine or its clock), or the time went to work outside them"
    ]


def test_time_outside_the_operators_names_no_operator() -> None:
    found = attribute(profile(*BASE), profile(*BASE, step=20 * MS))
    assert not found.found
    assert found.step_change_s == pytest.approx(10 * MS)


def test_a_change_within_the_noise_is_not_claimed() -> None:
    before = profile(*BASE, spread=0.3)  # the operators vary by 30% from one process to the next
    after = profile(("aten::mkldnn_convolution", 5.0), *BASE[1:], step=11 * MS, spread=0.3)
    assert not attribute(before, after).found
    quiet = attribute(profile(*BASE), profile(("aten::mkldnn_convolution", 5.0), *BASE[1:]))
    assert [c.name for c in quiet.changes] == ["aten::mkldnn_convolution"]


def test_a_change_below_a_hundredth_of_the_step_is_not_claimed() -> None:
    before = profile(*BASE, ("aten::relu", 0.05), spread=0.0)
    after = profile(*BASE, ("aten::relu", 0.14), spread=0.0)
    assert not attribute(before, after).found


def test_allocations_that_grew_are_named_on_a_memory_change_only() -> None:
    def rows(extra: int) -> Profile:
        return Profile(
            "cpu",
            5,
            10 * MS,
            (
                OperatorTime(
                    "aten::conv2d", 1, 4 * MS, allocated_bytes=(2 << 20) + extra, module="extra"
                ),
                OperatorTime("aten::relu", 1, 1 * MS, allocated_bytes=2 << 20),
            ),
        )

    assert attribute(rows(0), rows(16 << 20)).allocations == ()
    found = attribute(rows(0), rows(16 << 20), memory=True)
    assert [c.text() for c in found.allocations] == [
        "aten::conv2d allocates 16.0 MiB more a step (2.0 MiB -> 18.0 MiB), in module extra"
    ]


def test_a_memory_change_says_what_the_peak_holds_and_which_part_grew() -> None:
    """The peak's breakdown, from the memory passes: here the optimizer's state appeared (SGD
    to Adam: two moments per weight) and the activations grew."""
    mib = 1 << 20
    weights = MemoryPeak(100 * mib, None, "test", None, 40 * mib, 40 * mib, 0)
    adam = MemoryPeak(220 * mib, None, "test", None, 40 * mib, 40 * mib, 80 * mib)
    assert (weights.parts, adam.parts) == (
        PeakParts(40 * mib, 40 * mib, 0, 20 * mib),
        PeakParts(40 * mib, 40 * mib, 80 * mib, 60 * mib),
    )
    assert MemoryPeak(100 * mib, None, "older file").parts is None
    same = profile(*BASE)
    found = attribute(same, same, memory=True, peaks=(weights.parts, adam.parts))
    assert found.lines()[0] == "no operator's time changed beyond its noise"
    assert found.lines()[-1] == (
        "the peak holds parameters 40.0 MiB, gradients 40.0 MiB, optimizer state 80.0 MiB "
        "(+80.0 MiB), the rest 60.0 MiB (+40.0 MiB)"
    )
    assert attribute(same, same, peaks=(weights.parts, adam.parts)).peak_after is None


def test_a_baseline_entry_keeps_its_samples_profiles_merged_into_one() -> None:
    runs = [profile(("aten::addmm", ms), spread=0.0) for ms in (1.2, 1.0, 3.0)]
    measured = factories.result([0.01] * 4)
    samples = measured.measured.samples
    with_profiles = dataclasses.replace(
        measured.measured,
        samples=(
            *(dataclasses.replace(s, profile=p) for s, p in zip(samples[:3], runs, strict=True)),
            samples[3],
        ),
    )
    baseline = dataclasses.replace(measured, measurement=with_profiles).as_baseline().measured
    assert [s.profile for s in baseline.samples] == [with_profiles.profile, None, None, None]
    assert baseline.profile == with_profiles.profile


@dataclass
class RawEvent:
    """A profiler event as ``kineto_results.events()`` lists it (times in nanoseconds)."""

    name_: str
    start: int
    end: int
    device: DeviceType = DeviceType.CPU
    correlation: int = 0
    linked: int = 0
    thread: int = 1
    bytes_: int = 0

    def name(self) -> str:
        return self.name_

    def device_type(self) -> DeviceType:
        return self.device

    def start_ns(self) -> int:
        return self.start

    def end_ns(self) -> int:
        return self.end

    def start_thread_id(self) -> int:
        return self.thread

    def end_thread_id(self) -> int:
        return self.thread

    def is_async(self) -> bool:
        return False

    def correlation_id(self) -> int:
        return self.correlation

    def linked_correlation_id(self) -> int:
        return self.linked

    def nbytes(self) -> int:
        return self.bytes_


def test_a_cuda_profile_counts_each_operators_kernels_once_in_the_hosts_steps() -> None:
    """On CUDA the profiler also lists the kernels, their launches and a device-side copy of
    each range: the steps are the host's, and a kernel's time counts once, in the outermost
    operator whose call (or a call inside it) launched it; device allocations count."""
    cuda = DeviceType.CUDA
    events = []
    for i, (start, kernel_ns) in enumerate(((0, 500_000), (1_000_000, 600_000))):
        conv, inner = 10 * i + 1, 10 * i + 2
        events += [
            RawEvent("cnnperf::profiled-step", start, start + 1_000_000),
            RawEvent("cnnperf::profiled-step", start + 100, start + 1_000_100, device=cuda),
            RawEvent("aten::empty", start + 5_000, start + 6_000),  # no correlation id
            RawEvent("aten::conv2d", start + 10_000, start + 50_000, correlation=conv),
            RawEvent("aten::cudnn_convolution", start + 20_000, start + 40_000, correlation=inner),
            RawEvent("cudaLaunchKernel", start + 30_000, start + 35_000, linked=inner),
            RawEvent(
                "void at::native::conv_kernel<float>",
                start + 60_000,
                start + 60_000 + kernel_ns,
                device=cuda,
                linked=inner,
            ),
            RawEvent("[memory]", start + 25_000, start + 25_000, device=cuda, bytes_=4096),
            RawEvent("[memory]", start + 26_000, start + 26_000, bytes_=1 << 20),  # the host's
        ]
    found = summarise(events, cuda=True)
    assert (found.clock, found.steps, found.step_s) == ("cuda", 2, pytest.approx(1e-3))
    conv, empty = found.operators
    assert (conv.name, conv.calls, conv.allocated_bytes) == ("aten::conv2d", 1, 4096)
    assert (empty.name, empty.seconds) == ("aten::empty", 0.0)  # launched no kernel
    assert (conv.seconds, conv.spread) == (pytest.approx(500e-6), pytest.approx(100e-6))


def test_an_allocation_belongs_to_the_call_it_happened_in_to_the_nanosecond() -> None:
    """An operator's allocations are the records inside its call's bounds, edges included,
    and no record outside them, however close (torch's own tree rounded the bounds before
    2.11)."""
    events = [
        RawEvent("cnnperf::profiled-step", 0, 10_000),
        RawEvent("aten::mul_", 1_000, 2_000),
        RawEvent("[memory]", 999, 999, bytes_=8),  # 1 ns before the call
        RawEvent("[memory]", 1_000, 1_000, bytes_=16),
        RawEvent("[memory]", 2_000, 2_000, bytes_=-4),
        RawEvent("[memory]", 2_001, 2_001, bytes_=-16),  # 1 ns after it
    ]
    (mul,) = summarise(events, cuda=False).operators
    assert (mul.name, mul.allocated_bytes) == ("aten::mul_", 12)


def _rounded_apart(records: list[tuple[int, int]], start: int, end: int) -> int:
    """The bytes of ``records`` that a call's exact bounds and the same bounds as the tree of
    torch before 2.11 computes them (``start_ns() / 1000``, then times 1000, in floats: steps
    of 256 ns at today's timestamps) place on different sides."""
    low, high = start / 1000 * 1000, end / 1000 * 1000
    return sum(abs(b) for when, b in records if (start <= when <= end) != (low <= when <= high))


def test_a_cpu_profile_reads_as_torchs_own_tree_of_events() -> None:
    """The raw events read as ``prof.events()`` reads them (its parent links, CPU times and
    allocations), for the outermost operators of a real train step. Before torch 2.11 the tree
    places an allocation by its call's bounds rounded in floats (2.11 compares the nanoseconds,
    as the raw read does): a record within that rounding of an edge is the only difference
    allowed, as much of it as the records there hold."""
    from torch.profiler import ProfilerActivity, record_function
    from torch.profiler import profile as torch_profile

    work = workload("convolution")
    run_step(work.phases, CpuClock())
    with (
        module_ranges(work.model),
        torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        for _ in range(2):
            with record_function("cnnperf::profiled-step"):
                run_step(work.phases, CpuClock())
    raw = raw_events(prof)
    found = summarise(raw, cuda=False)
    events = prof.events()
    steps = sorted(e.time_range.start for e in events if e.name == "cnnperf::profiled-step")

    def outermost(e: Any) -> bool:
        parent = e.cpu_parent
        while parent is not None:
            if "::" in parent.name and not parent.name.startswith(("cnnperf::", "autograd::")):
                return False
            parent = parent.cpu_parent
        return "::" in e.name and not e.name.startswith(("cnnperf::", "autograd::", "profiler::"))

    expected: dict[str, list[float]] = {}
    for e in events:
        if outermost(e) and e.time_range.start >= steps[0]:
            times = expected.setdefault(e.name, [0.0, 0.0, 0.0])
            times[bisect.bisect_right(steps, e.time_range.start) - 1] += e.cpu_time_total / 1e6
            times[2] += max(0, e.cpu_memory_usage) / 2
    records = [(e.start_ns(), e.nbytes()) for e in raw if e.name() == "[memory]"]
    first_step = min(e.start_ns() for e in raw if e.name() == "cnnperf::profiled-step")
    apart: dict[str, int] = {}
    for e in raw:
        if e.device_type() == DeviceType.CPU and e.start_ns() >= first_step:
            gap = _rounded_apart(records, e.start_ns(), e.end_ns())
            apart[e.name()] = apart.get(e.name(), 0) + gap
    assert {o.name for o in found.operators} | set(found.rest) == set(expected)
    for row in found.operators:
        first, second, allocated = expected[row.name]
        assert row.seconds == pytest.approx(min(first, second), abs=1e-6)
        assert row.allocated_bytes == pytest.approx(allocated, abs=1 + apart[row.name] / 2)


def test_the_private_raw_events_attribution_reads_are_this_torchs() -> None:
    """``prof.profiler.kineto_results.events()`` is a private API: a torch that renames it, or
    an accessor of its events, fails here by name before it costs a benchmark its attribution."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        torch.ones(64).sum()
    events = raw_events(prof)
    assert {"[memory]", "aten::sum"} <= {e.name() for e in events}
    for event in events:
        for method in RAW_EVENT_METHODS:
            getattr(event, method)()  # each one answers, on every kind of event


def test_a_torch_without_the_raw_events_fails_the_profile_with_what_it_lacks() -> None:
    version = torch.__version__
    with pytest.raises(ProfileFailing) as raised:
        raw_events(SimpleNamespace(profiler=SimpleNamespace()))
    assert str(raised.value) == (
        f"torch {version}'s profiler has no raw events (prof.profiler.kineto_results.events(): "
        "'types.SimpleNamespace' object has no attribute 'kineto_results'); pytest-cnnperf reads "
        "this private API for speed: use a torch release its changelog says it is tested with"
    )
    event = SimpleNamespace(
        **{m: int for m in RAW_EVENT_METHODS if m not in ("nbytes", "is_async")}
    )
    results = SimpleNamespace(events=lambda: [event])
    with pytest.raises(ProfileFailing) as raised:
        raw_events(SimpleNamespace(profiler=SimpleNamespace(kineto_results=results)))
    assert str(raised.value) == (
        f"torch {version}'s raw profiler events have no nbytes, is_async "
        "(prof.profiler.kineto_results.events()); pytest-cnnperf reads this private API for "
        "speed: use a torch release its changelog says it is tested with"
    )


def test_merged_profiles_keep_the_fastest_process_and_spread_as_they_did() -> None:
    runs = [profile(("aten::addmm", ms), spread=0.0) for ms in (1.2, 1.0, 3.0)]
    merged = Profile.merged(runs)
    assert merged is not None
    (row,) = merged.operators
    assert row.seconds == pytest.approx(1.0 * MS)  # a disturbed process only ever slows it
    assert row.spread == pytest.approx(0.2 * MS)  # the median process against the fastest
    within = Profile.merged([profile(("aten::addmm", 1.0), spread=0.5)] * 3)
    assert within is not None
    assert within.operators[0].spread == pytest.approx(0.5 * MS)  # step to step, within one


# ---- known answers: a small net changed in one way, profiled for real on the CPU ----


class Net(nn.Module):
    """Two convolutions and two linear layers; ``change`` adds one thing to the forward."""

    def __init__(self, change: str | None = None) -> None:
        super().__init__()
        self.change = change
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.extra = nn.Conv2d(32, 32, 5, padding=2) if change == "convolution" else None
        width = 8192 if change == "linear" else 256
        self.fc1 = nn.Linear(32 * 4 * 4, width)
        self.fc2 = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        for _ in range(4 if self.change in ("memory format", "cast") else 0):
            if self.change == "memory format":
                x = x.contiguous(memory_format=torch.channels_last).contiguous()
            else:
                x = x.double().float()
        x = F.relu(self.conv2(x))
        if self.extra is not None:
            x = F.relu(self.extra(x))
        if self.change == "upsampling":
            x = x + F.interpolate(x[:, :, ::2, ::2], scale_factor=2, mode="bilinear")
        if self.change == "machine":
            time.sleep(0.02)  # slower steps, outside any operator
        x = F.adaptive_avg_pool2d(x, 4).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def workload(change: str | None) -> Workload:
    torch.manual_seed(0)
    spec = TrainSpec(batch_size=16, image_size=(32, 32))
    return build_train(Net(change), spec, torch.device("cpu"))


def profiled(*changes: str | None) -> list[Profile]:
    """Each net's profile over three runs, as a benchmark's samples take it; the nets' runs
    taken in turn, so that the machine's moods reach each of them alike (a benchmark's samples
    are fresh processes, whose differences its profile's spread takes in; here they share one)."""
    workloads = [workload(change) for change in changes]
    runs: list[list[Profile]] = [[] for _ in changes]
    for _ in range(3):
        for work, taken in zip(workloads, runs, strict=True):
            taken.append(profile_steps(work, torch.device("cpu"), CpuClock()))
    merged = [Profile.merged(taken) for taken in runs]
    assert all(merged)
    return [m for m in merged if m is not None]


CHANGES = (None, "convolution", "memory format", "cast", "linear", "upsampling", "machine")


@pytest.fixture(scope="module")
def profiles() -> dict[str | None, Profile]:
    """The unchanged net's profile and each changed one's, taken in turn, on one thread: on a
    busy machine a 2-thread operator waits for a thread that is not running, and parallel
    operators slow down far more than the others (a machine that varies by operator)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return dict(zip(CHANGES, profiled(*CHANGES), strict=True))
    finally:
        torch.set_num_threads(threads)


#: each change, the operators that name it, and how near the top one of them must be: a layer
#: 32 times wider also makes the optimizer's update of its weights (``aten::add_``) as slow
KNOWN: dict[str, tuple[Callable[[str], bool], int]] = {
    "convolution": (lambda name: "conv" in name, 1),
    "memory format": (lambda name: name in ("aten::contiguous", "aten::clone"), 1),
    "cast": (lambda name: name in ("aten::to", "aten::_to_copy"), 1),
    "linear": (lambda name: name in ("aten::linear", "aten::addmm", "aten::mm"), 2),
    "upsampling": (lambda name: "upsample" in name, 1),
}


def named_first(found: Attribution, change: str) -> bool:
    """Whether the change's operator is named at the top (or as near it as :data:`KNOWN` says)."""
    named, top = KNOWN[change]
    return any(named(c.name) for c in found.changes[:top])


@pytest.mark.parametrize("change", list(KNOWN))
def test_the_operator_that_changed_is_named_first(
    profiles: dict[str | None, Profile], change: str
) -> None:
    found = attribute(profiles[None], profiles[change])
    assert named_first(found, change), found.lines()


def test_slower_steps_outside_the_operators_name_none(
    profiles: dict[str | None, Profile],
) -> None:
    found = attribute(profiles[None], profiles["machine"])
    assert found.step_change_s > 0.015
    assert not found.found, found.lines()


def test_a_profile_keeps_the_operators_that_take_most_of_the_step(
    profiles: dict[str | None, Profile],
) -> None:
    baseline = profiles[None]
    times = [o.seconds for o in baseline.operators]
    assert times == sorted(times, reverse=True)
    assert sum(times) >= 0.95 * (sum(times) + baseline.other_s) - 1e-9
    assert len(baseline.operators) <= TIME_ROWS + MEMORY_ROWS
    # forward operators carry their module; which ones rank highest depends on the machine's
    # state (a busy core stalls any of them), so only that they are the net's is asserted
    modules = {o.module for o in baseline.operators} - {None}
    assert modules
    assert modules <= {"conv1", "conv2", "fc1", "fc2"}, modules
    assert "aten::mkldnn_convolution" not in {o.name for o in baseline.operators}  # inner ops
    assert statistics.median(o.calls for o in baseline.operators) >= 1


# ---- the whole way: saved with its profile, regressed with the operators named ----

NET = """
import os

import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        extra = os.path.exists(os.path.join(os.path.dirname(__file__), "EXTRA"))
        self.extra = nn.Conv2d(32, 32, 3, padding=1) if extra else None
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        if self.extra is not None:
            for _ in range(3):
                x = F.relu(self.extra(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def test_net(cnnperf):
    cnnperf.train_step(Net(), batch_size=16, image_size=32)
"""


def test_a_regression_names_its_operators_and_the_trace(
    pytester: pytest.Pytester, one_thread: None
) -> None:
    """Saved, the baseline keeps a profile; with three convolutions more the test fails naming
    a convolution's operator first, in the results file and the Markdown summary too, and the
    trace it wrote. Three samples a look: the save keeps the 7 a three-sample look needs
    (two a look would keep 13)."""
    pytester.makepyfile(test_net=NET)
    pytester.makeini(
        "[pytest]\ncnnperf_inprocess = true\ncnnperf_samples = 3\ncnnperf_min_time = 0.05\n"
        "cnnperf_calibration = false\ncnnperf_peak_tflops = 1\n"
    )
    pytester.runpytest("--cnnperf", "--cnnperf-save").assert_outcomes(passed=1)
    (saved,) = (pytester.path / "baselines").glob("*/test_net.json")
    assert '"profile"' in saved.read_text()
    (pytester.path / "EXTRA").write_text("1")
    result = pytester.runpytest(
        "--cnnperf", "--cnnperf-trace=traces", "--cnnperf-json=r.json", "--cnnperf-markdown=r.md"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Net bs=16 32x32 opt=sgd regressed (*",
            "*  operators   aten::conv* a step (*",
            "*these explain *% of the step's change*",
            "*  trace       traces/test_net--test_net--train_step_Net_bs=16_32x32_opt=sgd.pt.trace.json",
        ]
    )
    (trace,) = (pytester.path / "traces").glob("*.pt.trace.json")
    assert '"traceEvents"' in trace.read_text()
    data = json.loads((pytester.path / "r.json").read_text())
    first = data["results"][0]["decision"]["attribution"]["changes"][0]
    assert "conv" in first["name"]
    assert (
        "<details><summary>Which operators changed: <code>test_net</code></summary>"
        in (pytester.path / "r.md").read_text()
    )


def test_a_gated_run_profiles_the_operators_of_a_change_only(
    scripted_project: pytest.Pytester, scripted: Scripted
) -> None:
    """A saved baseline's first samples profile the operators; a gated run profiles none while
    nothing changed, and three samples of a look that follows a change (re-measuring a slower
    step, or of their own after a memory regression)."""
    scripted_project.makepyfile(
        test_bench="from models import Sleepy\n\n"
        + "".join(
            f"def test_{t}(cnnperf):\n"
            f"    cnnperf.train_step(Sleepy(name='{t}'), batch_size=2, image_size=8)\n\n"
            for t in ("same", "slower", "hungrier")
        )
    )
    changes = ("--cnnperf", "-o", "cnnperf_attribution=changes", "-p", "no:randomly")
    profile = Profile("cpu", 4, 0.01, (OperatorTime("aten::conv2d", 1, 0.005),))

    def with_profile(target: Target, i: int, sample: Sample) -> Sample:
        """The profile a real sample asked for would carry."""
        return (
            dataclasses.replace(sample, profile=profile) if i < target.profile_samples else sample
        )

    scripted.script.decorate = with_profile

    def profiled() -> dict[str, list[int]]:
        looks: dict[str, list[int]] = {}
        for test, count in scripted.script.profiled:
            looks.setdefault(test, []).append(count)
        scripted.script.profiled.clear()
        return looks

    scripted_project.runpytest(*changes, "--cnnperf-save").assert_outcomes(passed=3)
    assert profiled() == {"test_same": [3], "test_slower": [3], "test_hungrier": [3]}
    scripted_project.runpytest(*changes).assert_outcomes(passed=3)
    assert profiled() == {"test_same": [0], "test_slower": [0], "test_hungrier": [0]}
    scripted.slow_down("test_slower", 2.0)
    scripted.grow("test_hungrier", 64 << 20)
    scripted_project.runpytest(*changes).assert_outcomes(passed=1, failed=2)
    assert profiled() == {"test_same": [0], "test_slower": [0, 3], "test_hungrier": [0, 3]}


def test_what_a_profile_cannot_see_is_not_profiled() -> None:
    """A CUDA graph's replay runs no operators, a data-parallel step's ranks are not merged."""
    config = BenchConfig(kind="train_step", model="m", batch_size=8, image_size=(64, 64))
    graphed = dataclasses.replace(config, cuda_graphs=True)
    assert _profiled("changes", config, 1)
    assert _profiled("always", config, 1)
    assert not _profiled("off", config, 1)
    assert not _profiled("changes", graphed, 1)
    assert not _profiled("changes", config, 2)


def test_a_trace_folder_that_cannot_be_one_or_has_no_profiles_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_x(cnnperf):\n    pass\n")
    pytester.path.joinpath("notes").write_text("")
    result = pytester.runpytest("--cnnperf", "--cnnperf-trace=notes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: the trace folder (--cnnperf-trace): notes is a file, not a folder; name a folder for the traces"
        ]
    )
    result = pytester.runpytest("--cnnperf", "--cnnperf-trace=traces", "--cnnperf-attribution=off")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --cnnperf-trace=traces writes the profiled steps, but --cnnperf-attribution=off "
            "(or cnnperf_attribution = off) takes no profile; leave one of them out"
        ]
    )


def test_what_attribution_says_when_it_cannot_name_operators(tmp_path: Path) -> None:
    assert str(ProfileFailed("RuntimeError: boom")) == (
        "the operators could not be profiled (RuntimeError: boom), so none are named; "
        "attribution='off' in the test's cnnperf marker skips the profile"
    )
    with pytest.raises(ProfileFailing, match=r"recorded none of the profiled steps \(was another"):
        summarise([], cuda=False)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(ProfileFailing, match=r"the trace could not be written to .*a-file/t\.json"):
        profile_steps(workload(None), torch.device("cpu"), CpuClock(), str(blocked / "t.json"))


def test_more_changes_than_a_message_shows_are_in_the_json_results() -> None:
    voters = [(f"aten::same{i}", 0.5) for i in range(7)]
    changed = [f"aten::op{i}" for i in range(6)]
    before = profile(*voters, *((name, 1.0) for name in changed), step=10 * MS, spread=0.0)
    after = profile(*voters, *((name, 2.0) for name in changed), step=16 * MS, spread=0.0)
    found = attribute(before, after)
    assert len(found.changes) == 6
    assert found.lines()[-1] == (
        "these explain 100% of the step's change; 1 more in the JSON results (--cnnperf-json)"
    )
