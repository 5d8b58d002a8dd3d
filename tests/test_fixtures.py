"""The fixtures: cnnperf_device, cudnn_mode, model_factory, and skipping without --cnnperf."""

from __future__ import annotations

import pytest


def test_benchmarks_are_skipped_without_the_flag_and_torch_stays_unimported(
    pytester: pytest.Pytester,
) -> None:
    """A fresh process: the point is what the plugin imports when it loads."""
    pytester.makepyfile(
        test_mixed="""
        import sys

        def test_bench(cnnperf):
            pass

        def test_model(model_factory):
            pass

        def test_unit():
            assert "torch" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]2[]] *benchmark: run pytest with --cnnperf to measure it"]
    )


def test_device_and_cudnn_mode_on_the_cpu(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import torch

        def test_device(cnnperf_device, cudnn_mode):
            assert cnnperf_device == torch.device("cpu")
            assert cudnn_mode is None
        """
    )
    project.runpytest("--cnnperf", "--cnnperf-device=cpu").assert_outcomes(passed=1)


def test_model_factory_builds_random_models_by_name(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import torch

        def test_models(model_factory):
            a = model_factory("resnet18", num_classes=10)
            b = model_factory("resnet18", num_classes=10)
            assert a.fc.out_features == 10
            assert not torch.equal(a.conv1.weight, b.conv1.weight)  # random, not downloaded
            assert a.conv1.weight.device == torch.device("cpu")
            assert model_factory.image_size("inception_v3") == (299, 299)
            assert model_factory.image_size("resnet50") == (224, 224)
            assert "mobilenet_v2" in model_factory.names()
        """
    )
    project.runpytest("--cnnperf").assert_outcomes(passed=1)


def test_unknown_model_names_close_matches(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        def test_models(model_factory):
            model_factory("resnet5")
        """
    )
    result = project.runpytest("--cnnperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: unknown model 'resnet5'; did you mean resnet50, *resnet18? model_factory "
            "builds torchvision's classification models (* names; `cnnperf models` lists them), "
            "timm's as timm/NAME (with timm installed) and the project's own, registered in "
            "conftest.py with the pytest_cnnperf_register_models(registry) hook"
        ]
    )
    result.stdout.no_fnmatch_line("*During handling*")


def test_projects_register_their_own_models(project: pytest.Pytester) -> None:
    project.makeconftest(
        """
        from models import Sleepy

        def pytest_cnnperf_register_models(registry):
            registry.add("sleepy", Sleepy, image_size=16)
        """
    )
    project.makepyfile(
        """
        def test_models(model_factory, cnnperf):
            model = model_factory("sleepy", num_classes=3)
            assert model.head.out_features == 3
            assert model_factory.image_size("sleepy") == (16, 16)
            result = cnnperf.train_step(model, batch_size=2)
            assert result.config.model == "sleepy"
            assert result.config.image_size == (16, 16)
        """
    )
    project.runpytest("--cnnperf").assert_outcomes(passed=1)


def test_cudnn_mode_context_restores_flags() -> None:
    import torch

    from pytest_cnnperf.measuring.cudnn import CudnnMode, cudnn_mode_applied, current_mode

    before = (
        torch.backends.cudnn.enabled,
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
    )
    for mode in CudnnMode:
        with cudnn_mode_applied(mode):
            assert current_mode() is mode
        assert (
            torch.backends.cudnn.enabled,
            torch.backends.cudnn.benchmark,
            torch.backends.cudnn.deterministic,
        ) == before
    with pytest.raises(RuntimeError), cudnn_mode_applied(CudnnMode.OFF):
        raise RuntimeError("a failing benchmark")
    assert torch.backends.cudnn.enabled == before[0]
