"""timm's models: named by the architecture they carry, built by ``model_factory("timm/NAME")``.

Most tests put a fake ``timm`` module in ``sys.modules`` (they run without timm); the last one
measures real timm models through the plugin and is skipped where timm is not installed. The
benchmarks run in a fresh pytest process: an in-process run would leave the plugin's modules on
the ``pytest_cnnperf`` package for the next in-process run's ``from . import gate`` to find, beside
fresh copies of the classes they compare by type.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest
from scripted import Scripted

from pytest_cnnperf.models import ModelFactory, ModelRegistry

#: the fake timm's registry: each model's pretrained config
CONFIGS: dict[str, dict[str, Any]] = {
    "resnet18": {"architecture": "resnet18", "input_size": (3, 224, 224)},
    "convnext_tiny": {"architecture": "convnext_tiny", "input_size": (3, 288, 288)},
    "convnext_atto": {"architecture": "convnext_atto", "input_size": (3, 224, 224)},
}
LISTING = "`python -c \"import timm; print(timm.list_models('convnext*'))\"` lists them"


class FakeModel:
    def __init__(self, **pretrained_cfg: Any) -> None:
        self.pretrained_cfg = pretrained_cfg


class FakeTimm(types.ModuleType):
    """The part of timm's API that model_factory uses, over a three-model registry."""

    def __init__(self) -> None:
        super().__init__("timm")
        self.created: list[tuple[str, dict[str, Any]]] = []

    def list_models(self) -> list[str]:
        return sorted(CONFIGS)

    def is_model(self, name: str) -> bool:
        return name.split(".")[0] in CONFIGS

    def get_pretrained_cfg(self, name: str) -> types.SimpleNamespace:
        architecture, _, tag = name.partition(".")
        if tag:
            raise RuntimeError(f"Invalid pretrained tag ({tag}) for {architecture}.")
        return types.SimpleNamespace(**CONFIGS[architecture])

    def create_model(self, name: str, **kwargs: Any) -> FakeModel:
        self.created.append((name, kwargs))
        return FakeModel(**CONFIGS[name])


@pytest.fixture
def fake_timm(monkeypatch: pytest.MonkeyPatch) -> FakeTimm:
    fake = FakeTimm()
    monkeypatch.setitem(sys.modules, "timm", fake)
    return fake


@pytest.fixture
def no_timm(monkeypatch: pytest.MonkeyPatch) -> None:
    """timm not installed: ``import timm`` raises ImportError."""
    monkeypatch.setitem(sys.modules, "timm", None)


def failure(call: Any, *args: Any) -> str:
    with pytest.raises(pytest.fail.Exception) as info:
        call(*args)
    return str(info.value)


def test_a_model_carrying_a_timm_config_is_named_by_its_architecture() -> None:
    registry = ModelRegistry()
    carried = FakeModel(architecture="resnet50", input_size=(3, 256, 240))
    spec = registry.spec_of(carried)
    assert spec is not None
    assert (spec.name, spec.image_size) == ("timm/resnet50", (256, 240))
    # timm before 0.9 carries it as default_cfg
    old = types.SimpleNamespace(default_cfg={"architecture": "convnext_atto"})
    spec = registry.spec_of(old)
    assert spec is not None
    assert (spec.name, spec.image_size) == ("timm/convnext_atto", (224, 224))
    assert registry.spec_of(FakeModel(url="")) is None
    assert registry.spec_of(object()) is None


def test_torchvision_models_keep_their_names() -> None:
    """Not timm's: a factory-built model reads its factory name, any other none (the runner
    then names it by its class)."""
    import torchvision

    registry = ModelRegistry()
    spec = registry.spec_of(registry.build("resnet18", num_classes=10))
    assert spec is not None
    assert spec.name == "resnet18"
    assert registry.spec_of(torchvision.models.resnet18(num_classes=10)) is None


def test_timm_models_of_one_class_read_their_architectures_in_the_report(
    project: pytest.Pytester, scripted: Scripted
) -> None:
    """timm's ResNet-18 and ResNet-50 are both a ``ResNet``: each reads its own name, and trains
    at its configured input size."""
    project.makepyfile(
        """
        import torch
        from torch import nn

        class ResNet(nn.Module):
            def __init__(self, architecture):
                super().__init__()
                self.pretrained_cfg = {"architecture": architecture, "input_size": (3, 16, 12)}
                self.conv = nn.Conv2d(3, 4, 3)
                self.fc = nn.Linear(4, 10)

            def forward(self, x):
                return self.fc(self.conv(x).mean(dim=(2, 3)))

        def test_resnets(cnnperf):
            a = cnnperf.train_step(ResNet("resnet18"), batch_size=2)
            b = cnnperf.train_step(ResNet("resnet50"), batch_size=2)
            assert a.key == "train_step timm/resnet18 bs=2 16x12 opt=sgd"
            assert b.key == "train_step timm/resnet50 bs=2 16x12 opt=sgd"
        """
    )
    project.runpytest("--cnnperf", plugins=[scripted]).assert_outcomes(passed=1)


def test_the_factory_builds_timm_models_with_random_weights(fake_timm: FakeTimm) -> None:
    registry = ModelRegistry()
    factory = ModelFactory(registry)
    model = factory("timm/convnext_tiny", num_classes=10)
    assert fake_timm.created == [("convnext_tiny", {"pretrained": False, "num_classes": 10})]
    spec = registry.spec_of(model)
    assert spec is not None
    assert (spec.name, spec.image_size) == ("timm/convnext_tiny", (288, 288))
    assert factory.image_size("timm/convnext_tiny") == (288, 288)
    assert factory.image_size("timm/resnet18") == (224, 224)


def test_an_unknown_timm_name_is_named_with_how_to_list_them(fake_timm: FakeTimm) -> None:
    factory = ModelFactory(ModelRegistry())
    assert failure(factory, "timm/convnext_tin") == (
        "cnnperf: unknown timm model 'timm/convnext_tin'; did you mean timm/convnext_tiny, "
        "timm/convnext_atto? model_factory builds timm's models as timm/NAME, NAME one of "
        f"timm.list_models() (3 names; {LISTING}), with random weights: Hugging Face hub ids "
        "and local paths are not loaded"
    )
    assert failure(factory, "timm/not_a_model").startswith(
        "cnnperf: unknown timm model 'timm/not_a_model'; model_factory builds timm's models as "
        "timm/NAME"
    )
    assert failure(factory.image_size, "timm/resnet18.bogus").startswith(
        "cnnperf: unknown timm model 'timm/resnet18.bogus' (Invalid pretrained tag (bogus) for "
        "resnet18.); did you mean timm/resnet18?"
    )


@pytest.mark.parametrize("name", ["timm/hf-hub:timm/resnet18", "timm/timm/resnet18", "timm/"])
def test_hub_ids_and_paths_are_not_loaded(fake_timm: FakeTimm, name: str) -> None:
    message = failure(ModelFactory(ModelRegistry()), name)
    assert message.startswith(f"cnnperf: unknown timm model {name!r}; ")
    assert "Hugging Face hub ids and local paths are not loaded" in message
    assert fake_timm.created == []


def test_a_bare_timm_name_suggests_the_prefix(fake_timm: FakeTimm) -> None:
    assert failure(ModelFactory(ModelRegistry()), "convnext_atto").startswith(
        "cnnperf: unknown model 'convnext_atto'; did you mean timm/convnext_atto? model_factory "
        "builds torchvision's classification models"
    )


@pytest.mark.usefixtures("no_timm")
def test_without_timm_the_message_says_to_install_it() -> None:
    factory = ModelFactory(ModelRegistry())
    expected = (
        "cnnperf: model 'timm/convnext_tiny' is one of timm's, and timm is not installed here; "
        "install it with `pip install timm` (model_factory builds its models with random "
        "weights, nothing downloaded)"
    )
    assert failure(factory, "timm/convnext_tiny") == expected
    assert failure(factory.image_size, "timm/convnext_tiny") == expected
    # and the torchvision names do not need it
    assert factory.image_size("resnet18") == (224, 224)


def test_real_timm_models_are_saved_under_their_names(
    project: pytest.Pytester, scripted: Scripted
) -> None:
    """Real timm (needs ``pip install timm``; imported here first, as its C extensions cannot
    be imported again in the inner run): a factory-built ResNet-18 and a ConvNeXt-atto from
    ``timm.create_model``, saved under their names (their samples scripted)."""
    pytest.importorskip("timm")
    project.makepyfile(
        test_zoo="""
        import timm

        def test_zoo(cnnperf, model_factory):
            assert model_factory.image_size("timm/convnext_atto") == (224, 224)
            for model in (
                model_factory("timm/resnet18", num_classes=10),
                timm.create_model("convnext_atto", pretrained=False, num_classes=10),
            ):
                cnnperf.train_step(model, batch_size=2, image_size=32)
        """
    )
    result = project.runpytest("--cnnperf", "--cnnperf-save", plugins=[scripted])
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "saved*test_zoo*timm/resnet18 bs=2 32x32 *",
            "saved*test_zoo*timm/convnext_atto bs=2 32x32 *",
        ]
    )
    (saved,) = (project.path / "baselines").glob("*/test_zoo.json")
    assert set(json.loads(saved.read_text())["entries"]["test_zoo"]) == {
        "train_step timm/resnet18 bs=2 32x32 opt=sgd",
        "train_step timm/convnext_atto bs=2 32x32 opt=sgd",
    }
