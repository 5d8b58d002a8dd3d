"""Global torch state saved and restored around a benchmark: the float32 precision switches of
both APIs, oneDNN, the default dtype, and the CUDA memory given back (on fakes)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_cnnperf.measuring import environment, torchstate

NEW_API = torchstate.has_fp32_precision(torch)
needs_new_api = pytest.mark.skipif(not NEW_API, reason="torch < 2.9 has no fp32_precision flags")


@pytest.fixture
def clean_precision() -> Iterator[None]:
    """Whatever a test mixes, the next one starts from the state before it."""
    state = torchstate.capture_precision(torch)
    yield
    torchstate.restore_precision(torch, state)


@needs_new_api
@pytest.mark.usefixtures("clean_precision")
def test_mixing_the_legacy_and_new_precision_apis_is_captured_and_restored() -> None:
    """On torch >= 2.9 the legacy getters raise once the APIs were mixed; the state is read and
    restored through the new flags, and the legacy getters work again afterwards."""
    before = torchstate.capture_precision(torch)
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
        _ = torch.backends.cuda.matmul.allow_tf32
    mixed = torchstate.capture_precision(torch)
    assert mixed["matmul_precision"] is None
    assert mixed["cuda.matmul"] == "tf32"
    assert mixed["cudnn.conv"] == "ieee"
    assert torchstate.effective_tf32(torch) == (False, True)
    torchstate.restore_precision(torch, before)
    assert torchstate.capture_precision(torch) == before
    assert torch.get_float32_matmul_precision() == before["matmul_precision"]
    assert isinstance(torch.backends.cuda.matmul.allow_tf32, bool)


@needs_new_api
@pytest.mark.usefixtures("clean_precision")
def test_the_environment_records_the_new_flags_where_they_exist() -> None:
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    flags = environment.current_flags(torch.device("cuda"))
    assert flags.matmul_tf32 is True
    assert flags.matmul_precision == "mixed"
    assert flags.fp32_precision["cuda.matmul"] == "tf32"
    assert "none" not in flags.fp32_precision.values()
    cpu = environment.current_flags(torch.device("cpu"))
    assert cpu.cudnn_tf32 is None
    assert cpu.matmul_tf32 is None


@needs_new_api
@pytest.mark.usefixtures("clean_precision")
def test_a_parent_flag_restored_before_its_children() -> None:
    """Setting a parent flag overwrites its children: restoring must go parent first."""
    torch.set_float32_matmul_precision("high")
    saved = torchstate.capture_precision(torch)
    torch.backends.fp32_precision = "ieee"
    torch.backends.cudnn.fp32_precision = "ieee"
    torch.backends.cuda.matmul.allow_tf32 = False
    torchstate.restore_precision(torch, saved)
    assert torchstate.capture_precision(torch) == saved
    assert torch.get_float32_matmul_precision() == "high"


def legacy_torch() -> Any:
    """A torch before 2.9: legacy TF32 flags only, and a matmul precision that
    ``matmul.allow_tf32 = x`` sets too (as ``setAllowTF32CuBLAS`` does)."""
    state = {"precision": "highest"}

    class Matmul:
        allow_fp16_reduced_precision_reduction = True

        @property
        def allow_tf32(self) -> bool:
            return state["precision"] != "highest"

        @allow_tf32.setter
        def allow_tf32(self, value: bool) -> None:
            state["precision"] = "high" if value else "highest"

    def set_precision(value: str) -> None:
        state["precision"] = value

    backends = SimpleNamespace(
        cudnn=SimpleNamespace(allow_tf32=True), cuda=SimpleNamespace(matmul=Matmul())
    )
    return SimpleNamespace(
        backends=backends,
        get_float32_matmul_precision=lambda: state["precision"],
        set_float32_matmul_precision=set_precision,
    )


def test_before_torch_2_9_the_legacy_flags_are_saved_and_restored() -> None:
    fake = legacy_torch()
    fake.set_float32_matmul_precision("medium")
    saved = torchstate.capture_precision(fake)
    assert saved == {
        "matmul_precision": "medium",
        "cudnn.allow_tf32": True,
        "cuda.matmul.allow_tf32": True,
    }
    fake.backends.cudnn.allow_tf32 = False
    fake.backends.cuda.matmul.allow_tf32 = False
    assert torchstate.effective_tf32(fake) == (False, False)
    torchstate.restore_precision(fake, saved)
    # allow_tf32 = True would have left "high": the precision is restored after it
    assert fake.get_float32_matmul_precision() == "medium"
    assert torchstate.effective_tf32(fake) == (True, True)


def test_torch_state_restores_onednn_the_default_dtype_and_precision() -> None:
    """Issue 10, item 9: switches set inside a benchmark must not reach later tests."""
    before = torchstate.TorchState.capture()
    with torchstate.preserved():
        torch.backends.mkldnn.enabled = False
        torch.set_default_dtype(torch.float64)
        torch.set_float32_matmul_precision("medium")
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        if NEW_API:
            torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    assert torch.backends.mkldnn.enabled is True
    assert torch.get_default_dtype() == torch.float32
    assert torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is True
    after = torchstate.TorchState.capture()
    assert after.precision == before.precision
    assert (after.mkldnn_enabled, after.default_dtype) == (before.mkldnn_enabled, torch.float32)


# the sample processes' run is slow (a fresh pytest process and a zygote); the in-process one
# checks the same capture of the environment
@pytest.mark.parametrize(
    "where", ["in-process", pytest.param("sample processes", marks=pytest.mark.slow)]
)
def test_settings_changed_in_a_forward_do_not_reach_later_tests(
    pytester: pytest.Pytester, where: str
) -> None:
    """oneDNN switched off, a float64 default dtype and the new fp32_precision API used inside a
    forward: with ``--cnnperf-inprocess`` the next test finds them as they were, and either way
    the benchmark measured (the new API used to crash the capture of its environment)."""
    # one sample, and a stated peak: none is measured in the benchmark's first sample
    pytester.makeini(
        "[pytest]\ncnnperf_samples = 1\ncnnperf_min_time = 0.01\ncnnperf_peak_tflops = 1\n"
        "cnnperf_attribution = off\n"
    )
    pytester.makepyfile(
        """
        import torch
        from torch import nn

        class Meddling(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(3, 2)

            def forward(self, x):
                torch.backends.mkldnn.enabled = False
                torch.set_default_dtype(torch.float64)
                if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
                    torch.backends.cuda.matmul.fp32_precision = "tf32"
                return self.head(x.float().mean(dim=(2, 3)))

        def test_meddling(cnnperf):
            cnnperf.train_step(Meddling(), batch_size=2, image_size=4, num_classes=2)

        def test_after():
            assert torch.backends.mkldnn.enabled is True
            assert torch.get_default_dtype() == torch.float32
            assert torch.get_float32_matmul_precision() == "highest"
        """
    )
    args = ("--cnnperf", "--cnnperf-device=cpu", "-p", "no:randomly")
    if where == "in-process":
        result = pytester.runpytest(*args, "--cnnperf-inprocess")
    else:  # sample processes need a fresh pytest process to fork from
        result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2)


class CudaRecorder:
    """A torch whose CUDA calls are recorded."""

    def __init__(self, clear: bool = True) -> None:
        self.calls: list[tuple[str, Any]] = []
        calls = self.calls
        self.cuda = SimpleNamespace(
            is_initialized=lambda: True,
            synchronize=lambda device=None: calls.append(("synchronize", device)),
            empty_cache=lambda: calls.append(("empty_cache", None)),
        )
        self._C = SimpleNamespace()
        if clear:
            self._C._cuda_clearCublasWorkspaces = lambda: calls.append(("clear_cublas", None))


def test_cublas_workspaces_are_freed_before_the_cache_is_emptied() -> None:
    """``empty_cache`` cannot free cuBLAS's workspaces, which a benchmark's first matrix product
    allocates and keeps: they are cleared first, on the measured device only."""
    fake = CudaRecorder()
    device = torch.device("cuda", 1)
    torchstate.release_cuda_memory(fake, device)
    assert fake.calls == [("synchronize", device), ("clear_cublas", None), ("empty_cache", None)]


def test_a_torch_without_the_private_workspace_call_still_empties_the_cache() -> None:
    fake = CudaRecorder(clear=False)
    torchstate.release_cuda_memory(fake, torch.device("cuda", 0))
    assert [name for name, _ in fake.calls] == ["synchronize", "empty_cache"]


def test_nothing_is_released_where_cuda_never_started() -> None:
    fake = CudaRecorder()
    fake.cuda.is_initialized = lambda: False
    torchstate.release_cuda_memory(fake, torch.device("cuda", 0))
    assert fake.calls == []
