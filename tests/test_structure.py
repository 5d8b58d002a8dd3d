"""The exact signals beside the clock: operator counts and the numbers a step computes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import constructs
import pytest
import torch
from torch import nn
from torch.autograd import DeviceType  # type: ignore[attr-defined]

from pytest_cnnperf.cli import main
from pytest_cnnperf.gate import structure as gate_structure
from pytest_cnnperf.gate.policy import GatePolicy, GateSettings
from pytest_cnnperf.measuring import counting, numbers
from pytest_cnnperf.measuring.timing import CpuClock
from pytest_cnnperf.measuring.workload import TrainSpec, Workload, build_custom, build_train
from pytest_cnnperf.model import Measurement, Sample
from pytest_cnnperf.model.findings import ComputesOtherwise, StructureChanged, StructureRegressed
from pytest_cnnperf.model.structure import (
    OperatorCount,
    StepNumbers,
    Structure,
    changes,
    numbers_differ,
)
from pytest_cnnperf.parsers import parse_allowed, parse_structure

CPU = torch.device("cpu")


def counted(step: Callable[[], Any], model: nn.Module | None = None) -> Structure:
    workload = build_custom(step, 1)
    workload.model = model
    found = counting.count_steps(workload, CPU, CpuClock())
    assert found is not None
    return found


def calls(structure: Structure, kind: str) -> dict[tuple[str, str | None], int]:
    return {(c.name, c.where): c.per_step for c in structure.counts if c.kind == kind}


# ---- what counts as a sync: a test per construct (the manual's table), on the CPU ----

X = torch.randn(8, 8)


@pytest.mark.parametrize("construct", constructs.CONSTRUCTS, ids=lambda c: c.id)
def test_each_construct_of_the_table_counts_as_it_says_on_the_cpu(
    construct: constructs.Construct,
) -> None:
    """What the CPU predicts of a CUDA run: a read of a tensor the device holds is a sync, one
    of a tensor a CUDA run keeps on the host (an optimizer's step counter, a number made on the
    host) is not; a boolean mask set to a number is ``masked_fill_``."""
    found = counted(construct.make(CPU))
    assert constructs.syncs(found) == construct.expected("cpu")
    assert found.varying == ()


@pytest.mark.parametrize(
    ("construct", "label"),
    [
        (lambda: float(X.sum()), constructs.ITEM),
        (lambda: bool(X.sum() > 0), constructs.ITEM),
        (lambda: torch.masked_select(X, X > 0), "aten::masked_select (masked_select())"),
        (lambda: torch.unique(X), "aten::_unique2 (unique())"),
        (lambda: X.to("cpu"), counting.TO_HOST),
        (lambda: f"{X}", constructs.PRINT),
    ],
    ids=["float", "bool", "masked_select", "unique", "to-cpu", "format"],
)
def test_other_spellings_of_a_sync_are_counted_on_the_cpu(
    construct: Callable[[], Any], label: str
) -> None:
    assert constructs.syncs(counted(construct)) == {label: 1}


@pytest.mark.parametrize(
    "construct",
    [
        lambda: X.contiguous(),
        lambda: f"{torch.tensor(2.0):.1f}",
        lambda: torch.tensor(2.0).cpu().tolist(),
        lambda: X.cpu().tolist(),
        lambda: torch.ones(3).nonzero(),
    ],
    ids=["contiguous", "format-a-host-number", "host-cpu-tolist", "cpu-then-tolist", "host"],
)
def test_what_a_cuda_run_does_on_the_host_is_no_sync_or_one(construct: Callable[[], Any]) -> None:
    """A host tensor's reads are free; ``.cpu()`` then ``.tolist()`` copies once (the copy is
    a host tensor of its own, as in a CUDA run); ``.contiguous()`` of a contiguous tensor does
    nothing."""
    found = constructs.syncs(counted(construct))
    assert sum(found.values()) == (1 if found else 0)
    assert set(found) <= {counting.TO_HOST}


def test_a_tensor_from_the_model_or_the_batch_is_on_the_device_a_host_one_is_not() -> None:
    """What a CUDA run keeps on the host, predicted on the CPU: a factory without a device or
    with the string "cpu", and what is computed from such tensors alone; a factory given a
    ``torch.device`` (the run's) and whatever a tensor made before the step touches, on the
    device."""
    made: dict[str, torch.Tensor] = {}
    counter = counting.Counting("cpu")
    counter.steps.append(__import__("collections").Counter())
    with counter:
        made["number"] = torch.tensor(2.0)
        made["on-cpu"] = torch.zeros(2, device="cpu")
        made["computed"] = made["number"] * made["on-cpu"]
        made["on-device"] = torch.zeros(2, device=CPU)
        made["mixed"] = made["number"] * X
        made["of-the-batch"] = X.sum()
    where = {name: counter.placement.on_device(t) for name, t in made.items()}
    assert where == {
        "number": False,
        "on-cpu": False,
        "computed": False,
        "on-device": True,
        "mixed": True,
        "of-the-batch": True,
    }


def test_a_round_trip_to_float64_counts_two_casts_where_it_happens() -> None:
    """Named with the module whose forward cast, and again in the backward pass."""

    class Block(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.double().float() * 2

    model = nn.Sequential(nn.Linear(8, 8), Block())
    x = torch.randn(4, 8)

    def step() -> None:
        model(x).sum().backward()

    casts = calls(counted(step, model), "cast")
    assert casts[("aten::_to_copy float32->float64", "1")] == 1
    assert casts[("aten::_to_copy float64->float32", "1")] == 1
    assert casts[("aten::_to_copy float32->float64", "step")] == 1  # the backward's


def test_a_memory_format_conversion_is_counted() -> None:
    x = torch.randn(2, 3, 8, 8)
    layouts = calls(counted(lambda: x.contiguous(memory_format=torch.channels_last)), "layout")
    assert layouts == {("aten::clone to channels_last", "step"): 1}


def test_a_module_that_syncs_is_named_and_the_plugins_own_calls_are_not_counted() -> None:
    class Reads(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.mean().item() > 100:  # a value read on the host
                x = x * 0
            return x

    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.Sequential(nn.ReLU(), Reads()), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    )
    workload = build_train(model, TrainSpec(batch_size=2, image_size=(8, 8)), CPU)
    for _, run in workload.phases:  # the optimizer's state exists from the second step on
        run()
    found = counting.count_steps(workload, CPU, CpuClock())
    assert found is not None
    syncs = calls(found, "sync")
    assert list(syncs) == [
        ("aten::_local_scalar_dense (.item(), float(), int() or bool() of a tensor)", "1.1")
    ]
    assert not [c for c in found.counts if c.name.startswith("profiler::")]
    assert found.varying == ()
    ops = calls(found, "op")
    assert ops[("aten::convolution", None)] == 1
    assert ops[("aten::convolution_backward", None)] == 1


def test_counts_that_differ_between_steps_are_varying_and_never_compared() -> None:
    state = {"n": 0}

    def step() -> None:
        state["n"] += 1
        for _ in range(state["n"]):
            X.add(1)

    found = counted(step)
    assert found.varying == ("aten::add",)
    other = Structure((OperatorCount("aten::add", 5),), 2)
    assert changes(found, other) == ()
    _, (reason,) = gate_structure.judge(measured(other), measured(found), SETTINGS)
    assert str(reason) == (
        "structure: aten::add called a different number of times from one step to the next, so "
        "not compared"
    )


def test_a_compiled_or_graphed_step_is_not_counted() -> None:
    workload = Workload(phases=[("step", lambda: None)], items_per_step=1, countable=False)
    assert counting.count_steps(workload, CPU, CpuClock()) is None


def test_the_counter_agrees_with_the_profiler_on_what_it_counts() -> None:
    """The operators that do the work, the syncs and the casts: counted as often as the profiler
    sees them. (The profiler also sees the calls kernels make inside them, ``aten::empty``; under
    a dispatch mode autograd adds gradients out of place, ``aten::add`` for ``aten::add_``.)"""
    from torch.profiler import profile

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    x = torch.randn(2, 3, 8, 8)

    def step() -> None:
        out = model(x)
        float(out.detach().double().sum())
        out.sum().backward()

    found = counting.summarise(_one_step(step, model), "dispatch")
    with profile() as prof:
        step()
    seen: dict[str, int] = {}
    for event in prof.events():
        seen[event.name] = seen.get(event.name, 0) + 1
    ops = {name: count for (name, _), count in calls(found, "op").items()}
    working = (
        "aten::convolution",
        "aten::convolution_backward",
        "aten::native_batch_norm",
        "aten::native_batch_norm_backward",
        "aten::threshold_backward",
        "aten::_local_scalar_dense",
        "aten::_to_copy",
    )
    assert {n: ops.get(n) for n in working} == {n: seen.get(n) for n in working}


def _one_step(step: Callable[[], None], model: nn.Module) -> list[Any]:
    counter = counting.Counting("cpu")
    with counting.module_names(model, counter):
        counter.steps.append(__import__("collections").Counter())
        with counter:
            step()
    return counter.steps


# ---- on CUDA: the runtime's calls among the profiler's host events (a fake) ----


class Event:
    def __init__(
        self, name: str, start: int, end: int | None = None, device: DeviceType = DeviceType.CPU
    ) -> None:
        self._name, self._start, self._end = name, start, end if end is not None else start + 1
        self._device = device

    def name(self) -> str:
        return self._name

    def device_type(self) -> DeviceType:
        return self._device

    def start_ns(self) -> int:
        return self._start

    def end_ns(self) -> int:
        return self._end


def test_on_cuda_the_runtimes_syncs_and_launches_are_counted_per_step() -> None:
    """The runtime's synchronising calls and kernel launches inside each counted step's range
    on the host's timeline (the range's copy on the device's is not a step); the plugin's own
    synchronisation between the steps is outside both; a sync inside a counted operator's
    range is that operator's, counted once with it."""
    events = [
        Event("cnnperf::counted-step", 0, 1000),
        Event("cnnperf::counted-step", 5, 1200, device=DeviceType.CUDA),
        Event("cudaLaunchKernel", 10),
        Event("cudaLaunchKernel", 20),
        Event("cudaStreamSynchronize", 30),
        Event("cnnperf::counted-sync", 40, 60),  # an .item() the dispatcher counted
        Event("cudaStreamSynchronize", 50),
        Event("cudaDeviceSynchronize", 1500),  # the plugin's, between steps
        Event("cnnperf::counted-step", 2000, 3000),
        Event("cudaLaunchKernel", 2010),
        Event("cuLaunchKernel", 2020),
        Event("cudaStreamSynchronize", 2030),
        Event("cnnperf::counted-sync", 2040, 2060),
        Event("cudaStreamSynchronize", 2050),
        Event("aten::add", 2070),
    ]
    first, second = counting.runtime_counts(events, 2)
    assert first == second
    assert first == {
        ("launch", "kernel launches", None): 2,
        ("sync", "cudaStreamSynchronize", None): 1,
    }


META = torch.device("meta")  # a device's tensor, on a machine without one


@pytest.mark.parametrize(
    ("name", "args", "kwargs", "found"),
    [
        ("aten::_to_copy", (torch.empty(2, device=META),), {"device": CPU}, counting.TO_HOST),
        (
            "aten::_to_copy",
            (torch.empty(2, device=META),),
            {"device": CPU, "non_blocking": True},
            None,
        ),
        ("aten::_to_copy", (torch.empty(2),), {"device": META}, counting.TO_DEVICE),
        (
            "aten::copy_",
            (torch.empty(2), torch.empty(2, device=META)),
            {},
            "aten::copy_ (device to host)",
        ),
        (
            "aten::copy_",  # into pageable memory the driver waits for the copy
            (torch.empty(2), torch.empty(2, device=META), True),
            {},
            "aten::copy_ (device to host)",
        ),
        ("aten::_local_scalar_dense", (torch.tensor(1.0),), {}, None),
        ("aten::_local_scalar_dense", (torch.empty((), device=META),), {}, constructs.ITEM),
        ("aten::nonzero", (torch.ones(2),), {}, None),
    ],
    ids=[
        "to-host",
        "to-pinned-host",
        "to-device",
        "copy-to-host",
        "copy-to-pageable-non_blocking",
        "item-of-a-host-tensor",
        "item-of-a-device-tensor",
        "nonzero-of-a-host-tensor",
    ],
)
def test_on_cuda_a_sync_is_one_on_the_device(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], found: str | None
) -> None:
    """Classified by the tensors' devices: a host tensor's ``.item()`` (an optimizer's step
    counter) is free in a CUDA run; a copy between host and device waits unless it need not."""
    placement = counting.Placement("cuda")
    assert counting.classify(name, args, kwargs, placement) == (found and ("sync", found))


def test_a_boolean_mask_set_to_a_number_is_masked_fill_on_either_device() -> None:
    """``x[mask] = 0.0``: ATen runs ``index_put_`` as ``masked_fill_`` (no mask read on the
    host) with one boolean mask on the target's device, a one-element value on the host, and
    no accumulation; otherwise it finds the mask's entries first."""
    cuda = counting.Placement("cuda")
    x, mask = torch.empty(4, device=META), torch.empty(4, dtype=torch.bool, device=META)
    number, on_device = torch.tensor(0.0), torch.empty((), device=META)
    label = ("sync", "aten::index_put_ (boolean mask)")
    put = "aten::index_put_"
    assert counting.classify(put, (x, [mask], number), {}, cuda) is None
    assert counting.classify(put, (x, [mask], on_device), {}, cuda) == label
    assert counting.classify(put, (x, [mask], number, True), {}, cuda) == label
    assert counting.classify(put, (x, [torch.ones(4, dtype=torch.bool)], number), {}, cuda) == label
    assert counting.classify(put, (x, [mask, mask], number), {}, cuda) == label
    assert counting.classify("aten::index", (x, [mask]), {}, cuda) == (
        "sync",
        label[1].replace("index_put_", "index"),
    )


# ---- the gate: counts and numbers against the reference's ----

SETTINGS = GateSettings(GatePolicy(0.01, 0.05, 0), 0.05, 0.05, strict=False)
SYNC = "aten::_local_scalar_dense (.item(), float(), int() or bool() of a tensor)"
BASE = Structure((OperatorCount("aten::add", 2), OperatorCount("aten::mul", 1)), 2)


def measured(structure: Structure | None, steps: StepNumbers | None = None) -> Measurement:
    return Measurement(4, (Sample(0.1, structure=structure, numbers=steps),))


def with_counts(*more: OperatorCount) -> Structure:
    return Structure(BASE.counts + more, 2)


def test_identical_counts_and_numbers_find_nothing() -> None:
    steps = StepNumbers((2.3, 2.2, 2.1), 0.5, 1e-3)
    assert gate_structure.judge(measured(BASE, steps), measured(BASE, steps), SETTINGS) == (
        False,
        (),
    )


def test_a_new_sync_fails_naming_the_operator_its_count_and_the_module() -> None:
    now = with_counts(
        OperatorCount(SYNC, 1, "sync", "layer3.1"), OperatorCount("aten::_local_scalar_dense", 1)
    )
    regressed, (reason,) = gate_structure.judge(measured(now), measured(BASE), SETTINGS)
    assert regressed
    assert isinstance(reason, StructureRegressed)
    assert reason.fails_as == "host-device synchronisations"
    assert str(reason).startswith(f"structure: 1 new {SYNC} per step, in layer3.1 (a host-device")
    assert "@pytest.mark.cnnperf(allowed_syncs=1)" in str(reason)


def test_allowed_syncs_accepts_a_known_one_and_not_two() -> None:
    allowed = GateSettings(GatePolicy(0.01, 0.05, 0), 0.05, 0.05, strict=False, allowed_syncs=1)
    one = with_counts(OperatorCount(SYNC, 1, "sync", "fc"))
    regressed, reasons = gate_structure.judge(measured(one), measured(BASE), allowed)
    assert not regressed
    assert isinstance(reasons[0], StructureChanged)
    two = with_counts(OperatorCount(SYNC, 2, "sync", "fc"))
    assert gate_structure.judge(measured(two), measured(BASE), allowed)[0]


def test_other_count_changes_are_reported_and_fail_only_where_gated() -> None:
    cast = "aten::_to_copy float32->float64"
    now = with_counts(
        OperatorCount(cast, 2, "cast", "layer3.1"), OperatorCount("aten::_to_copy", 2)
    )
    regressed, (reason,) = gate_structure.judge(measured(now), measured(BASE), SETTINGS)
    assert not regressed
    assert str(reason).startswith(f"structure: 2 new {cast} per step, in layer3.1 (reported")
    gated = GateSettings(
        GatePolicy(0.01, 0.05, 0), 0.05, 0.05, strict=False, structure=frozenset({"cast"})
    )
    regressed, (reason,) = gate_structure.judge(measured(now), measured(BASE), gated)
    assert regressed
    assert isinstance(reason, StructureRegressed)
    assert reason.fails_as == "dtype casts"


def test_a_step_that_could_not_be_counted_says_so_and_compares_nothing() -> None:
    failed = Measurement(4, (Sample(0.1, structure_error="RuntimeError: no Python binding"),))
    regressed, (reason,) = gate_structure.judge(failed, measured(BASE), SETTINGS)
    assert not regressed
    assert str(reason) == (
        "structure: the step could not be counted (RuntimeError: no Python binding), so its "
        "operator counts were not compared; the timed steps ran as usual"
    )


def test_a_reference_without_counts_never_fails_on_them() -> None:
    now = with_counts(OperatorCount(SYNC, 1, "sync", "fc"))
    assert gate_structure.judge(measured(now), measured(None), SETTINGS) == (False, ())


def test_numbers_beyond_the_tolerance_say_the_step_computes_something_else() -> None:
    before = StepNumbers((4.472, 2.298, 0.934), 36.9, 1e-3)
    same = StepNumbers((4.472001, 2.298002, 0.934001), 36.90001, 1e-3)
    skipped = StepNumbers((4.556, 2.236, 0.719), 31.4, 1e-3)
    assert numbers_differ(before, same) is None
    _, (reason,) = gate_structure.judge(measured(BASE, skipped), measured(BASE, before), SETTINGS)
    assert isinstance(reason, ComputesOtherwise)
    assert reason.fails_as is None
    assert str(reason).startswith(
        "numbers: the step computes something else: the loss of step 1 is 4.556 now, 4.472 before "
        "(+1.9%, where runs of the same code differ by at most 0.1%)"
    )
    strict = GateSettings(GatePolicy(0.01, 0.05, 0), 0.05, 0.05, strict=True)
    _, (reason,) = gate_structure.judge(measured(BASE, skipped), measured(BASE, before), strict)
    assert isinstance(reason, ComputesOtherwise)
    assert reason.fails_as == "what the step computes"


def test_numbers_hold_no_infinity_which_files_cannot() -> None:
    """An fp16 step whose first gradients overflowed (the scaler skips it) has no norm; a NaN
    differs from every number."""
    layer = nn.Linear(2, 2)
    for p in layer.parameters():
        p.grad = torch.full_like(p, float("inf"))
    assert numbers.grad_norm(layer) is None
    for p in layer.parameters():
        p.grad = torch.full_like(p, 3.0)
    assert numbers.grad_norm(layer) == pytest.approx((6 * 3.0**2) ** 0.5)  # six entries of 3
    one = StepNumbers((1.0,), None, 5e-2)
    assert numbers_differ(one, one) is None
    assert numbers_differ(one, StepNumbers((float("nan"),), None, 5e-2)) is not None


def test_the_structure_settings_name_the_bad_value_and_the_accepted_forms() -> None:
    assert parse_structure("syncs,casts") == frozenset({"sync", "cast"})
    assert parse_structure("none") == frozenset()
    with pytest.raises(ValueError) as bad:
        parse_structure("syncs,launches")
    assert str(bad.value) == (
        "'launches' is not a kind of count the gate can fail on; use syncs, casts, layouts, "
        "operators, several joined with commas (e.g. syncs,casts), or none"
    )
    with pytest.raises(ValueError, match="'-1' is not a number of host-device synchronisations"):
        parse_allowed("-1")


# ---- the numbers: the first steps from the initial weights, read outside the steps ----


def test_the_first_steps_numbers_are_the_same_after_the_model_trained() -> None:
    """Kept before the first step, the initial state is put back: the numbers do not depend on
    how many steps the sample timed, and match a fresh model's from the same seed."""

    def build() -> Workload:
        numbers.seed_everything()
        model = nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(144, 5)
        )
        return build_train(model, TrainSpec(batch_size=4, image_size=(8, 8), num_classes=5), CPU)

    fresh = build()
    assert fresh.first_steps is not None
    direct = fresh.first_steps()()
    trained = build()
    assert trained.first_steps is not None
    first = trained.first_steps()
    for _ in range(5):
        for _, run in trained.phases:
            run()
    again = first()
    assert (again.values(), again.tolerance) == (direct.values(), direct.tolerance)
    assert len(again.losses) == numbers.STEPS
    assert again.grad_norm
    assert again.tolerance == numbers.tolerance("cpu", "fp32")


# ---- the whole way: a test's step gains a sync, casts, or skips a block ----

NET = """
import os

import torch
from torch import nn

HERE = os.path.dirname(__file__)


def variant(name):
    return os.path.exists(os.path.join(HERE, name))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        if variant("ITEM"):
            float(x.mean())
        y = self.conv(x)
        if variant("F64"):
            y = y.double().float()
        return torch.relu(y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(), Block())
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.stem(x)
        x = self.blocks[0](x) if variant("SKIP") else self.blocks(x)
        return self.fc(x.mean((2, 3)))


def test_net(cnnperf):
    cnnperf.train_step(Net(), batch_size=4, image_size=16)
"""


@pytest.fixture
def net(
    pytester: pytest.Pytester, one_thread: None, saved_once: Callable[..., None]
) -> pytest.Pytester:
    pytester.makepyfile(test_net=NET)
    pytester.makeini(
        "[pytest]\ncnnperf_inprocess = true\ncnnperf_samples = 3\ncnnperf_min_time = 0.02\n"
        "cnnperf_calibration = false\ncnnperf_peak_tflops = 1\ncnnperf_attribution = off\n"
    )

    def save() -> None:
        pytester.runpytest("--cnnperf", "--cnnperf-save").assert_outcomes(passed=1)
        (saved,) = (pytester.path / "baselines").glob("*/test_net.json")
        assert '"structure"' in saved.read_text()
        assert '"numbers"' in saved.read_text()

    saved_once(pytester, "structure-net", save)
    return pytester


def test_an_item_in_a_forward_fails_as_a_structure_regression_naming_it_and_its_module(
    net: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """In the failure, and in every report: JSON, Markdown, JUnit, ``cnnperf show`` and
    ``cnnperf compare`` against the run before."""
    net.runpytest("--cnnperf", "--cnnperf-json=before.json")  # its speed verdict is the clock's
    (net.path / "ITEM").write_text("1")
    result = net.runpytest(
        "--cnnperf", "--cnnperf-json=r.json", "--cnnperf-markdown=r.md", "--junitxml=j.xml"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_step Net bs=4 16x16 opt=sgd regressed (*host-device synchronisations)",
            "*structure: 1 new aten::_local_scalar_dense (.item(), *) per step, in each of "
            "blocks.0 and blocks.1 (a host-device synchronisation*allowed_syncs=2*",
        ]
    )
    data = json.loads((net.path / "r.json").read_text())
    kinds = [r["kind"] for r in data["results"][0]["decision"]["reasons"]]
    assert "structure-regressed" in kinds
    new_sync = "1 new aten::_local_scalar_dense (.item(), float(), int() or bool() of a tensor)"
    markdown = (net.path / "r.md").read_text()
    (line,) = [row for row in markdown.splitlines() if row.startswith("- ❌ `test_net`")]
    assert "structure: 1 new aten::" in line  # after the throughput, where that regressed too
    assert "per step, in each of blocks.0 and blocks.1" in markdown
    junit = (net.path / "j.xml").read_text()
    assert '<property name="cnnperf.syncs_per_step" value="2"' in junit
    capsys.readouterr()
    main(["show", str(net.path / "r.json")])
    assert new_sync in capsys.readouterr().out
    main(["compare", str(net.path / "before.json"), str(net.path / "r.json")])
    shown = capsys.readouterr().out
    assert (
        "what test_net [train_step Net bs=4 16x16 opt=sgd] calls and computes, OLD -> NEW:" in shown
    )
    assert f"  structure: {new_sync} per step, in each of blocks.0 and blocks.1" in shown


def test_identical_code_has_no_structure_finding_and_computes_the_same(
    net: pytest.Pytester,
) -> None:
    result = net.runpytest("--cnnperf", "--cnnperf-json=r.json", "-p", "no:randomly")
    data = json.loads((net.path / "r.json").read_text())
    reasons = data["results"][0]["decision"].get("reasons", [])
    assert not [r for r in reasons if r["kind"].startswith(("structure", "computes"))], reasons
    assert "structure:" not in result.stdout.str()
    assert "numbers:" not in result.stdout.str()


def test_a_round_trip_to_float64_is_reported_with_its_count_and_passes(
    net: pytest.Pytester,
) -> None:
    (net.path / "F64").write_text("1")
    result = net.runpytest("--cnnperf", "-rA")
    assert result.ret in (0, 1)  # the speed verdict is the clock's; the counts are exact
    result.stdout.fnmatch_lines(
        [
            "*structure: *1 new aten::_to_copy float32->float64 per step, in each of blocks.0 and blocks.1*"
        ]
    )
    assert "host-device synchronisations" not in result.stdout.str()


def test_a_skipped_block_computes_something_else_and_fails_in_strict_mode(
    net: pytest.Pytester,
) -> None:
    (net.path / "SKIP").write_text("1")
    result = net.runpytest("--cnnperf", "-rA")
    result.stdout.fnmatch_lines(["*numbers: the step computes something else: the loss of step*"])
    strict = net.runpytest("--cnnperf", "--cnnperf-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*numbers: the step computes something else*"])


TRAINED = """
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(__file__)


def variant(name):
    return os.path.exists(os.path.join(HERE, name))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)
        if variant("TEMPERATURE"):
            self.temperature = nn.Parameter(torch.ones(1))

    def forward(self, x):
        out = self.fc(torch.relu(self.conv(x)).mean((2, 3)))
        if variant("TEMPERATURE"):
            out = out / self.temperature
        if variant("BRANCH") and out.abs().max().item() > 1e6:
            out = out * 0
        return out


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_net(cnnperf, optimizer):
    cnnperf.train_step(Net(), batch_size=4, image_size=16, optimizer=optimizer)


def test_clipped(cnnperf):
    model = Net().to(cnnperf.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 3, 16, 16, device=cnnperf.device)
    y = torch.randint(0, 10, (4,), device=cnnperf.device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(
            model.parameters(), 1.0, error_if_nonfinite=variant("NONFINITE")
        )
        optimizer.step()

    cnnperf.measure(step, items_per_step=4, name="clipped")
"""


@pytest.fixture
def trained(
    pytester: pytest.Pytester, one_thread: None, saved_once: Callable[..., None]
) -> pytest.Pytester:
    """A net trained with Adam and AdamW, and a step of its own that clips its gradients, saved;
    the clock cannot fail them (a 90% loss, memory twice as large): only the counts can."""
    pytester.makepyfile(test_trained=TRAINED)
    pytester.makeini(
        "[pytest]\ncnnperf_inprocess = true\ncnnperf_samples = 3\ncnnperf_min_time = 0.02\n"
        "cnnperf_calibration = false\ncnnperf_peak_tflops = 1\ncnnperf_attribution = off\n"
        "cnnperf_threshold = 90%\ncnnperf_memory_threshold = 200%\n"
    )
    saved_once(
        pytester,
        "structure-trained",
        lambda: pytester.runpytest(
            "--cnnperf", "--cnnperf-save", "-p", "no:randomly"
        ).assert_outcomes(passed=3),
    )
    return pytester


def reasons(result: pytest.RunResult, path: Path) -> dict[str, list[dict[str, Any]]]:
    data = json.loads(path.read_text())
    return {r["test_id"]: r["decision"].get("reasons", []) for r in data["results"]}


def test_a_parameter_added_to_a_net_trained_with_adam_adds_no_sync(
    trained: pytest.Pytester,
) -> None:
    """Adam and AdamW read each parameter's step counter with ``.item()``: a tensor that a CUDA
    run keeps on the host, so no sync on any device. A learnable scalar more is one counter
    more, and passes the gate."""
    (trained.path / "TEMPERATURE").write_text("1")
    result = trained.runpytest("--cnnperf", "-k", "test_net", "--cnnperf-json=r.json", "-rA")
    result.assert_outcomes(passed=2)
    assert "host-device synchronisation" not in result.stdout.str()
    for test, found in reasons(result, trained.path / "r.json").items():
        kinds = [r["kind"] for r in found]
        assert "structure-regressed" not in kinds, (test, found)
        assert "sync" not in json.dumps(found), (test, found)


def test_a_forward_that_branches_on_a_value_of_the_output_still_fails(
    trained: pytest.Pytester,
) -> None:
    (trained.path / "BRANCH").write_text("1")
    result = trained.runpytest("--cnnperf", "-k", "test_net", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*train_step Net bs=4 16x16 opt=adam regressed (*host-device synchronisations)*",
            f"*structure: 1 new {constructs.ITEM} per step, in Net (a host-device*",
        ]
    )


def test_clipping_that_checks_the_gradients_norm_still_fails(trained: pytest.Pytester) -> None:
    """``clip_grad_norm_(..., error_if_nonfinite=True)`` reads the norm on the host to decide
    whether to raise: a sync every step of a step of one's own (``measure``)."""
    (trained.path / "NONFINITE").write_text("1")
    result = trained.runpytest("--cnnperf", "-k", "test_clipped")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*measure clipped bs=4 regressed (*host-device synchronisations)*",
            f"*structure: 1 new {constructs.ITEM} per step, in step (a host-device*",
        ]
    )


def test_numbers_that_cannot_be_computed_leave_the_sample_as_it_was() -> None:
    """A check beside the sample: one that fails (a loss that is no tensor, a state that does
    not load back) costs the sample its numbers only; the counts are taken all the same."""
    import dataclasses

    from pytest_cnnperf.gate.policy import CPU as CPU_POLICY
    from pytest_cnnperf.measuring.sample import SamplePlan, take_sample

    def unkeepable() -> Callable[[], StepNumbers]:
        raise RuntimeError("the state does not load back")

    workload = build_custom(lambda: X.add(1), 1)
    workload.first_steps = unkeepable
    timing = dataclasses.replace(CPU_POLICY.timing, min_time_s=0.01, min_steps=3)
    sample, _ = take_sample(
        workload,
        CPU,
        SamplePlan(timing, calibrate=False),
        memory_pass=False,
        in_process=True,
        count_pass=True,
    )
    assert sample.numbers is None
    assert sample.structure is not None
    assert calls(sample.structure, "op") == {("aten::add", None): 1}


def test_the_manuals_table_of_syncs_has_a_row_for_each_construct_as_counted() -> None:
    """docs/structure.md's "What counts as a sync": a row per construct, by its test id, whose
    CPU and CUDA cells say the number of syncs the constructs table expects."""
    manual = Path(__file__).resolve().parent.parent / "docs" / "structure.md"
    rows = {
        cells[-1].strip("`"): cells
        for line in manual.read_text().splitlines()
        if line.startswith("| ")
        for cells in [[c.strip() for c in line.strip("|").split(" | ")]]
        if len(cells) == 4
    }

    def said(count: int) -> str:
        return f"{count} sync" if count else "no sync"

    for construct in constructs.CONSTRUCTS:
        assert construct.id in rows, construct.id
        _, cpu, cuda, _ = rows[construct.id]
        assert cpu.startswith(said(sum(construct.expected("cpu").values()))), construct.id
        assert cuda.startswith(said(sum(construct.expected("cuda").values()))), construct.id
