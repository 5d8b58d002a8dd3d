"""The CUDA path: device choice, cuDNN modes, events, allocator peaks, AMP, NVML, out of
memory, CUDA graphs, another GPU than the first, what counts as a sync. Skipped without a CUDA
device; ``scripts/gpu-check`` runs them on a GPU machine (``tests/test_cuda_fakes.py`` and
``tests/test_gpu_check.py`` run what can be checked without one everywhere)."""

from __future__ import annotations

import constructs
import pytest
import torch

from pytest_cnnperf.gate.decide import MEMORY_CONFIRMATIONS
from pytest_cnnperf.gate.policy import SamplingPolicy, gate_policy
from pytest_cnnperf.model.structure import Structure, numbers_differ

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# What these tests expect of keys and messages: on CUDA the cnnperf fixture passes the cuDNN mode
# in force, "on" at torch's defaults. tests/test_gpu_check.py checks them against the code on
# the CPU, so that a GPU run is not the first to find one wrong.
GRAPHED_KEY = "train_step Sequential bs=32 32x32 amp=bf16 opt=adam cudnn=on cuda_graphs"
GRAPHED_INFERENCE_KEY = "inference Sequential bs=32 32x32 cudnn=on cuda_graphs"
#: the out-of-memory test's batch: 2 images of 128 px (384 KiB on the host), whose activations
#: after a 1x1 convolution to 2**22 channels are 512 GiB, more than any GPU holds
OOM_BATCH, OOM_SIZE, OOM_CHANNELS = 2, 128, 2**22
OUT_OF_MEMORY = (
    f"*cnnperf: measuring train_step Sequential bs={OOM_BATCH} {OOM_SIZE}x{OOM_SIZE} opt=sgd "
    "cudnn=on on cuda:0 failed: *OutOfMemoryError*"
)
#: the samples each side of the against-a-revision test takes at most (``cnnperf_samples``)
AGAINST_SAMPLES = 6
#: the forward FLOPs of flops_model() at batch 16, 32 px: its convolution and its linear layer
FLOPS_FORWARD = 2 * 16 * 32 * 3 * 9 * 32 * 32 + 2 * 16 * 32 * 10


def missing_index(count: int) -> str:
    return f"ERROR: --cnnperf-device=cuda:{count} asks for CUDA device {count}, but only *"


def too_many_workers(gpus: int) -> str:
    return f"*-n {gpus + 1} starts {gpus + 1} workers, but only {gpus} CUDA device*use -n {gpus}*"


def against_samples(memory_verdict: str | None) -> int:
    """The samples each side of the against-a-revision test takes, from the GPU's design: the
    first look of a paired run, and a pair more where peak memory changed past its threshold
    (the first look measures it once; a change must show in ``MEMORY_CONFIRMATIONS``)."""
    design = SamplingPolicy.of(AGAINST_SAMPLES).design(gate_policy("cuda")).paired()
    changed = memory_verdict in ("regressed", "improved")
    return design.looks[0] + (MEMORY_CONFIRMATIONS - 1 if changed else 0)


def flops_model() -> torch.nn.Module:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


INI = """
[pytest]
cnnperf_samples = 2
cnnperf_min_time = 0.2
cnnperf_attribution = off
"""

MODELS = """
import torch
from torch import nn


def convnet(num_classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes),
    )


def expanding(channels, num_classes=10):
    # small on the host, too big for the device once it runs: activations of `channels` per pixel
    return nn.Sequential(
        nn.Conv2d(3, channels, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(channels, num_classes),
    )
"""


@pytest.fixture
def gpu_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester.makepyfile(models=MODELS)
    return pytester


def test_auto_picks_the_first_cuda_device(gpu_project: pytest.Pytester) -> None:
    gpu_project.makepyfile(
        """
        import torch

        def test_device(cnnperf_device, cudnn_mode):
            assert cnnperf_device == torch.device("cuda:0")
            assert cudnn_mode is not None
        """
    )
    gpu_project.runpytest_subprocess("--cnnperf").assert_outcomes(passed=1)


def test_a_missing_cuda_index_is_a_usage_error(gpu_project: pytest.Pytester) -> None:
    gpu_project.makepyfile("def test_x(cnnperf):\n    pass\n")
    count = torch.cuda.device_count()
    result = gpu_project.runpytest_subprocess("--cnnperf", f"--cnnperf-device=cuda:{count}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([missing_index(count)])


def test_cudnn_modes_parametrize_set_and_restore_the_flags(gpu_project: pytest.Pytester) -> None:
    gpu_project.makepyfile(
        """
        import torch

        FLAGS = {
            "on": (True, False, False),
            "off": (False, False, False),
            "benchmark": (True, True, False),
            "deterministic": (True, False, True),
        }

        def test_mode(cudnn_mode):
            cudnn = torch.backends.cudnn
            assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == FLAGS[cudnn_mode.value]

        def test_after():
            cudnn = torch.backends.cudnn
            assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (True, False, False)
        """
    )
    result = gpu_project.runpytest(
        "--cnnperf", "--cudnn=on,off,benchmark,deterministic", "-v", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*test_mode[[]on[]] PASSED*",
            "*test_mode[[]off[]] PASSED*",
            "*test_mode[[]benchmark[]] PASSED*",
            "*test_mode[[]deterministic[]] PASSED*",
        ]
    )


def test_a_cuda_train_step_in_sample_processes(gpu_project: pytest.Pytester) -> None:
    """Fresh processes measure; the pytest process itself never initialises CUDA."""
    gpu_project.makepyfile(
        """
        import importlib.util

        import torch

        from models import convnet

        def test_train(cnnperf):
            result = cnnperf.train_step(convnet(), batch_size=64, image_size=64)
            m, env = result.measurement, result.environment
            assert not m.in_process
            assert m.memory.source == "cuda-allocator"
            assert m.memory.reserved_bytes >= m.memory.allocated_bytes > 0
            assert {p for s in m.samples for p in s.phases} == {"forward", "backward", "optimizer"}
            sample = m.samples[0]
            assert sum(sample.phases["forward"]) > 0
            assert env.device == "cuda:0"
            assert env.cuda and env.cudnn and env.driver  # the driver without NVML too
            assert env.flags.cudnn_mode == "benchmark"
            if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9
                assert env.flags.fp32_precision
            if importlib.util.find_spec("pynvml"):  # nvidia-ml-py is optional in practice
                assert sample.health is not None and sample.health.sm_clock_mhz
                assert sample.health.other_processes in ((), None)
                assert not sample.health.problems, sample.health.problems
            assert sample.calibration_s > 0
            assert sample.calibration_unit.startswith("cuda-mm-fp16-4096x")
            assert not torch.cuda.is_initialized()
        """
    )
    result = gpu_project.runpytest_subprocess(
        "--cnnperf", "--cudnn=benchmark", "--cnnperf-json=r.json"
    )
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("amp", ["fp16", "bf16"])
def test_amp_and_channels_last_train(gpu_project: pytest.Pytester, amp: str) -> None:
    gpu_project.makepyfile(
        f"""
        from models import convnet

        def test_train(cnnperf):
            result = cnnperf.train_step(convnet(), batch_size=32, image_size=32, amp="{amp}", channels_last=True)
            assert result.config.amp == "{amp}"
            assert result.config.channels_last
            assert result.measurement.items_per_second > 0
        """
    )
    gpu_project.runpytest("--cnnperf", "--cnnperf-inprocess").assert_outcomes(passed=1)


def test_out_of_memory_fails_its_own_test_and_frees_the_device(
    gpu_project: pytest.Pytester,
) -> None:
    """A batch small on the host whose activations overflow the device: the plugin makes its
    batches on the host (``randn``, then ``.to``), so a batch sized to the device's memory would
    ask the host for hundreds of GB instead. The test body asks nothing of CUDA itself."""
    gpu_project.makepyfile(
        f"""
        import torch

        from models import convnet, expanding

        def test_too_big(cnnperf):
            cnnperf.train_step(
                expanding({OOM_CHANNELS}), batch_size={OOM_BATCH}, image_size={OOM_SIZE},
                num_classes=10,
            )

        def test_fine_afterwards(cnnperf):
            # the benchmark frees what it allocated, cuBLAS's workspaces too (which
            # empty_cache() alone never frees): nothing more is allocated than before it
            before = torch.cuda.memory_allocated()
            cnnperf.train_step(convnet(), batch_size=32, image_size=32)
            assert torch.cuda.memory_allocated() <= before
        """
    )
    for mode in ([], ["--cnnperf-inprocess"]):
        result = gpu_project.runpytest_subprocess("--cnnperf", "-p", "no:randomly", *mode)
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines([OUT_OF_MEMORY])


def test_inference_on_cuda(gpu_project: pytest.Pytester) -> None:
    gpu_project.makepyfile(
        """
        def test_infer(cnnperf, model_factory):
            result = cnnperf.inference(model_factory("resnet18"), batch_size=64, amp="fp16")
            assert result.config.kind == "inference"
            assert result.measurement.items_per_second > 0
        """
    )
    gpu_project.runpytest_subprocess("--cnnperf").assert_outcomes(passed=1)


def test_cuda_graphs_capture_and_replay_the_whole_step(gpu_project: pytest.Pytester) -> None:
    """``cuda_graphs=True``: a train step with a capturable Adam under bf16, and a forward pass,
    each replayed as one graph; the replays still train (the weights change)."""
    gpu_project.makepyfile(
        f"""
        from models import convnet

        def test_graphed(cnnperf):
            model = convnet()
            before = [p.detach().clone() for p in model.parameters()]
            result = cnnperf.train_step(
                model, batch_size=32, image_size=32, amp="bf16", optimizer="adam", cuda_graphs=True
            )
            assert result.key == {GRAPHED_KEY!r}
            m = result.measurement
            assert not any(s.phases for s in m.samples) and m.items_per_second > 0
            assert m.peak_allocated_bytes > 0
            after = [p.detach().cpu() for p in model.parameters()]
            assert any((a - b).abs().max() > 0 for a, b in zip(after, before))
            inferred = cnnperf.inference(convnet(), batch_size=32, image_size=32, cuda_graphs=True)
            assert inferred.key == {GRAPHED_INFERENCE_KEY!r}
            assert inferred.measurement.items_per_second > 0
        """
    )
    gpu_project.runpytest("--cnnperf", "--cnnperf-inprocess").assert_outcomes(passed=1)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_another_gpu_than_the_first(gpu_project: pytest.Pytester) -> None:
    """``--cnnperf-device=cuda:1``: events on GPU 1's stream, so the phases they time add up
    to the synchronised wall time of its steps (on GPU 0's idle stream they would time the
    host's launches instead)."""
    gpu_project.makepyfile(
        """
        from models import convnet

        def test_train(cnnperf):
            result = cnnperf.train_step(convnet(), batch_size=64, image_size=64)
            assert result.environment.device == "cuda:1"
            for sample in result.measurement.samples:
                events = sum(sample.step_times_s) / len(sample.step_times_s)
                assert 0.95 < events / sample.step_time_s < 1.05
        """
    )
    for mode in ([], ["--cnnperf-inprocess"]):
        result = gpu_project.runpytest_subprocess("--cnnperf", "--cnnperf-device=cuda:1", *mode)
        result.assert_outcomes(passed=1)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_data_parallel_over_two_gpus_with_nccl(gpu_project: pytest.Pytester) -> None:
    gpu_project.makepyfile(
        """
        from models import convnet

        def test_ddp(cnnperf):
            result = cnnperf.train_step(convnet(), batch_size=64, image_size=64, world_size=2)
            assert result.config.world_size == 2
            assert result.config.batch_size == 128
            assert 0 < result.measurement.scaling_efficiency
        """
    )
    gpu_project.runpytest_subprocess("--cnnperf").assert_outcomes(passed=1)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_xdist_workers_benchmark_on_a_gpu_each(gpu_project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    gpu_project.makepyfile(
        """
        import os
        import pathlib

        import pytest
        from models import convnet

        @pytest.mark.parametrize("i", range(4))
        def test_train(cnnperf, i):
            seen = pathlib.Path(__file__).parent / "seen"
            seen.mkdir(exist_ok=True)
            worker = os.environ["PYTEST_XDIST_WORKER"]
            (seen / f"{worker}-{i}").write_text(os.environ["CUDA_VISIBLE_DEVICES"])
            cnnperf.train_step(convnet(), batch_size=32, image_size=32)
        """
    )
    result = gpu_project.runpytest_subprocess("--cnnperf", "-n", "2")
    result.assert_outcomes(passed=4)
    gpus: dict[str, set[str]] = {}
    for path in (gpu_project.path / "seen").iterdir():
        gpus.setdefault(path.name.split("-")[0], set()).add(path.read_text())
    assert sorted(gpus) == ["gw0", "gw1"]
    assert all(len(seen) == 1 for seen in gpus.values()), gpus  # one GPU a worker
    assert len(set.union(*gpus.values())) == 2, gpus  # and not the same one


def test_more_xdist_workers_than_gpus_is_a_usage_error(gpu_project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    gpu_project.makepyfile("def test_x(cnnperf):\n    pass\n")
    gpus = torch.cuda.device_count()
    result = gpu_project.runpytest_subprocess("--cnnperf", "-n", str(gpus + 1))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([too_many_workers(gpus)])


def test_flops_peak_and_energy_of_a_cuda_step() -> None:
    """The first sample counts the step's FLOPs on meta tensors, finds the GPU's row in the
    peaks table (or says why not), and reads NVML's energy counter around the timed steps."""
    import dataclasses

    from pytest_cnnperf.gate.policy import CUDA
    from pytest_cnnperf.measuring import energy, peak_table
    from pytest_cnnperf.measuring.nvml import GpuMonitor
    from pytest_cnnperf.measuring.sample import SamplePlan, take_sample
    from pytest_cnnperf.measuring.workload import TrainSpec, build_train

    device = torch.device("cuda:0")
    workload = build_train(
        flops_model(), TrainSpec(batch_size=16, image_size=(32, 32), amp="bf16"), device
    )
    timing = dataclasses.replace(CUDA.timing, min_time_s=0.3)
    sample, env = take_sample(
        workload,
        device,
        SamplePlan(timing, calibrate=False),
        memory_pass=False,
        in_process=True,
        count_pass=True,
    )
    assert sample.flops is not None
    assert sample.flops.method == "meta"
    assert sample.flops.phases["forward"] == FLOPS_FORWARD
    assert sample.peak is not None
    assert sample.peak.precision == "bf16"
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if peak_table.lookup(env.device_name, sms).row is not None:
        assert sample.peak.source == "table"
        assert sample.peak.flops_per_s is not None
    else:
        assert sample.peak.source == "unknown"
    monitor = GpuMonitor.open(0)
    if monitor is not None and energy.probe_for(device, monitor) is not None:
        assert sample.energy is not None
        assert sample.energy.source == "nvml"
        assert sample.energy.joules > 0
        assert sample.energy.items == 16 * len(sample.step_times_s)
    else:
        assert sample.energy is None


def test_a_sync_on_cuda_is_counted_once_from_the_dispatcher_or_the_runtimes_host_events() -> None:
    """``.item()`` in a module's forward: its operator named with the module, and not again as
    the runtime's synchronisation it waits in; a copy to the host and
    ``torch.cuda.synchronize()`` as syncs: three in all, so ``allowed_syncs=1`` accepts one
    sync on CUDA as on the CPU; the kernel launches reported; the first steps' numbers computed
    within the CUDA fp32 tolerance of a second run."""
    from torch import nn

    from pytest_cnnperf.gate import structure as gate_structure
    from pytest_cnnperf.gate.policy import GateSettings
    from pytest_cnnperf.measuring import counting, numbers
    from pytest_cnnperf.measuring.sample import clock_for
    from pytest_cnnperf.measuring.workload import TrainSpec, Workload, build_train
    from pytest_cnnperf.model import Measurement, Sample

    reads = {"item": True, "copy": True}

    class Reads(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if reads["item"]:
                float(x.mean())
            if reads["copy"]:
                x.sum().cpu()
                torch.cuda.synchronize()
            return x

    device = torch.device("cuda:0")

    def build() -> Workload:
        numbers.seed_everything()
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(),
            Reads(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, 10),
        )
        return build_train(model, TrainSpec(batch_size=16, image_size=(32, 32)), device)

    def count(workload: Workload) -> Structure:
        for _ in range(3):
            for _, run in workload.phases:
                run()
        found = counting.count_steps(workload, device, clock_for(device))
        assert found is not None
        return found

    workload = build()
    assert workload.first_steps is not None
    first = workload.first_steps()
    found = count(workload)
    assert found.source == "dispatch+cuda"
    syncs = {(c.name, c.where): c.per_step for c in found.counts if c.kind == "sync"}
    assert syncs == {
        (constructs.ITEM, "2"): 1,
        (counting.TO_HOST, "2"): 1,
        ("cudaDeviceSynchronize", None): 1,
    }
    assert found.per_step("sync") == 3
    assert found.per_step("launch") > 0
    computed = first()
    again = build().first_steps
    assert again is not None
    assert numbers_differ(computed, again()()) is None
    assert computed.tolerance == numbers.tolerance("cuda", "fp32")

    reads.update(item=False, copy=False)
    before = count(build())
    reads["item"] = True
    one_more = count(build())

    def judged(allowed: int) -> bool:
        settings = GateSettings(
            gate_policy("cuda"), 0.05, 0.05, strict=False, allowed_syncs=allowed
        )
        now, then = (Measurement(16, (Sample(0.1, structure=s),)) for s in (one_more, before))
        return gate_structure.judge(now, then, settings)[0]

    assert judged(allowed=0)  # a new sync fails
    assert not judged(allowed=1)  # and one allowed sync is one sync


def test_an_extra_convolution_is_named_by_its_kernels_device_time() -> None:
    """The operator profile on CUDA: each operator's time is the device time of the kernels it
    launched (CUPTI), so a convolution added to the model is named first, in its module."""
    from torch import nn

    from pytest_cnnperf.gate.attribute import attribute
    from pytest_cnnperf.measuring.profile import profile_steps
    from pytest_cnnperf.measuring.timing import CudaClock
    from pytest_cnnperf.measuring.workload import TrainSpec, build_train
    from pytest_cnnperf.model import Profile

    def net(extra: bool) -> nn.Module:
        layers: list[nn.Module] = [nn.Conv2d(3, 64, 3, padding=1), nn.ReLU()]
        if extra:
            layers += [nn.Conv2d(64, 64, 3, padding=1), nn.ReLU()]
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    device = torch.device("cuda:0")

    def profiled(extra: bool) -> Profile:
        workload = build_train(net(extra), TrainSpec(batch_size=64, image_size=(64, 64)), device)
        runs = [profile_steps(workload, device, CudaClock(device)) for _ in range(3)]
        merged = Profile.merged(runs)
        assert merged is not None
        assert merged.clock == "cuda"
        return merged

    found = attribute(profiled(False), profiled(True))
    assert found.changes, found.lines()
    first = found.changes[0]
    assert "conv" in first.name, found.lines()
    print("\n".join(["extra convolution on the GPU:", *found.lines()]))


def test_against_a_revision_on_the_gpu(pytester: pytest.Pytester) -> None:
    """--cnnperf-against on a GPU: the revision's process samples the same GPU (it inherits
    CUDA_VISIBLE_DEVICES), both sides are judged per pair, and a commit that doubles the model's
    depth regresses against its parent while the parent against itself does not; each side
    takes the samples the design says. Run by ``gpu-check --zoo``, a call of its own."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=pytester.path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    (pytester.path / "src" / "gpuproj").mkdir(parents=True)
    init = pytester.path / "src" / "gpuproj" / "__init__.py"

    def commit(blocks: int, message: str) -> None:
        init.write_text(
            "from torch import nn\n\n\ndef net():\n"
            "    layers = [nn.Conv2d(3, 64, 3, padding=1), nn.ReLU()]\n"
            f"    for _ in range({blocks}):\n"
            "        layers += [nn.Conv2d(64, 64, 3, padding=1), nn.ReLU()]\n"
            "    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), "
            "nn.Linear(64, 10))\n"
        )
        git("add", "-A")
        git("commit", "-qm", message)

    pytester.makeini(
        INI.replace("cnnperf_samples = 2", f"cnnperf_samples = {AGAINST_SAMPLES}")
        + "pythonpath = src\n"
    )
    pytester.makepyfile(
        test_gpu_perf="from gpuproj import net\n\n\ndef test_net(cnnperf):\n"
        "    cnnperf.train_step(net(), batch_size=64, image_size=64)\n"
    )
    (pytester.path / ".gitignore").write_text("__pycache__/\n*.json\nstdout\nstderr\n")
    git("init", "-q", "-b", "main")
    commit(2, "two blocks")
    commit(6, "six blocks")
    slower = pytester.runpytest_subprocess(
        "--cnnperf", "--cnnperf-against=HEAD~1", "--cnnperf-json=r.json", "-p", "no:randomly"
    )
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*regressed (throughput*", "*at HEAD~1 (*"])
    import json

    (result,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert result["environment"]["device"] == "cuda:0"
    decision = result["decision"]
    taken = len(result["measurement"]["samples"])
    assert len(decision["reference"]["samples"]) == taken  # as many of each side
    assert taken == against_samples(decision["memory"]["verdict"])
    same = pytester.runpytest_subprocess("--cnnperf", "--cnnperf-against=HEAD", "-p", "no:randomly")
    same.assert_outcomes(passed=1)
    assert git("worktree", "list").count("\n") == 0


# ---- what counts as a sync: the manual's table, each construct on the GPU ----


@pytest.fixture(scope="module")
def counted_constructs() -> Structure:
    """Every construct of the table counted in one pass (one profiler start), each in a module
    named by its id."""
    from pytest_cnnperf.measuring import counting
    from pytest_cnnperf.measuring.sample import clock_for
    from pytest_cnnperf.measuring.workload import build_custom

    device = torch.device("cuda:0")
    runs = constructs.all_in_one(device)
    workload = build_custom(lambda: [run() for run in runs.values()], 1)
    workload.model = runs
    found = counting.count_steps(workload, device, clock_for(device))
    assert found is not None
    return found


@pytest.mark.parametrize("construct", constructs.CONSTRUCTS, ids=lambda c: c.id)
def test_each_construct_of_the_table_counts_as_it_says_on_cuda(
    construct: constructs.Construct, counted_constructs: Structure
) -> None:
    """The table's CUDA column: what each construct counts as where its tensors are on the GPU
    (``print(found)`` shows every count, for the manual)."""
    found = constructs.syncs(counted_constructs, construct.id)
    print(f"{construct.id}: {found}")
    assert found == construct.expected("cuda")


def test_on_cuda_no_sync_of_the_table_is_counted_twice(counted_constructs: Structure) -> None:
    """The runtime's synchronising calls of every construct happen inside the call counted for
    it: none is left over as a runtime row of its own."""
    left = [c for c in counted_constructs.counts if c.kind == "sync" and c.where is None]
    assert left == []
    assert counted_constructs.varying == ()


@pytest.mark.parametrize("construct", constructs.CONSTRUCTS, ids=lambda c: c.id)
def test_each_construct_syncs_where_cudas_sync_debug_mode_says(
    construct: constructs.Construct,
) -> None:
    """An independent reference for the table's CUDA column: torch's own sync debug mode warns
    at each synchronising call of the runtime; a construct the count calls a sync warns, one it
    calls none does not."""
    import warnings

    step = construct.make(torch.device("cuda:0"))
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    warned = [w for w in caught if "synchronizing CUDA operation" in str(w.message)]
    syncs = sum(construct.expected("cuda").values())
    print(f"{construct.id}: {len(warned)} warning(s), {syncs} sync(s) counted")
    if construct.debug_mode:
        assert bool(warned) == bool(syncs), [str(w.message) for w in warned]
    else:
        assert not warned
