"""Models by name: torchvision's classification models, timm's (``timm/NAME``, when timm is
installed) and the ones a project registers.

Every model is built with random weights and nothing downloaded. Each name knows its usual input
size (torchvision's published crop size: 224 for most, 299 for Inception-V3, up to 600 for
EfficientNet-B7; timm's ``pretrained_cfg["input_size"]``), which ``train_step`` uses when no
``image_size`` is given. A timm model made outside ``model_factory`` is known by the architecture
it carries in ``pretrained_cfg``: ``timm.create_model("resnet50")`` reads ``timm/resnet50``.
"""

from __future__ import annotations

import difflib
import importlib
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")

#: torchvision models whose constructor warns unless told how to initialise weights
_INIT_WEIGHTS = ("googlenet", "inception_v3")
#: ``timm/resnet50``: a timm model by its registry name (not a Hugging Face hub id)
TIMM_PREFIX = "timm/"
#: how to list timm's names, for the messages
_TIMM_LISTING = "`python -c \"import timm; print(timm.list_models('convnext*'))\"` lists them"


class ModelNameError(LookupError):
    """A name ``model_factory`` cannot build; the message says why and what it takes."""


class UnknownModelError(ModelNameError):
    def __init__(self, name: str, known: list[str], timm_name: str | None = None) -> None:
        # a name of timm's given bare ("convnext_atto") is suggested with its prefix
        close = difflib.get_close_matches(name, known, n=4, cutoff=0.5)
        close = [timm_name] if timm_name else close
        hint = f"did you mean {', '.join(close)}? " if close else ""
        super().__init__(
            f"unknown model {name!r}; {hint}model_factory builds torchvision's classification "
            f"models ({len(known)} names; `cnnperf models` lists them), timm's as timm/NAME "
            "(with timm installed) and the project's own, registered in conftest.py with the "
            "pytest_cnnperf_register_models(registry) hook"
        )


class UnknownTimmModelError(ModelNameError):
    def __init__(self, name: str, known: list[str], reason: str | None = None) -> None:
        bare = name.removeprefix(TIMM_PREFIX)
        close = difflib.get_close_matches(bare, known, n=4, cutoff=0.5) if bare else []
        hint = f"did you mean {', '.join(TIMM_PREFIX + each for each in close)}? " if close else ""
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"unknown timm model {name!r}{why}; {hint}model_factory builds timm's models as "
            f"timm/NAME, NAME one of timm.list_models() ({len(known)} names; {_TIMM_LISTING}), "
            "with random weights: Hugging Face hub ids and local paths are not loaded"
        )


class TimmMissingError(ModelNameError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"model {name!r} is one of timm's, and timm is not installed here; install it with "
            "`pip install timm` (model_factory builds its models with random weights, nothing "
            "downloaded)"
        )


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable[..., Any]
    image_size: tuple[int, int]


def _size(value: int | tuple[int, int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


class ModelRegistry:
    """Names to model builders. ``add`` registers a project's model."""

    def __init__(self) -> None:
        self._project: dict[str, ModelSpec] = {}
        self._built: weakref.WeakKeyDictionary[Any, ModelSpec] = weakref.WeakKeyDictionary()

    def add(
        self, name: str, factory: Callable[..., Any], *, image_size: int | tuple[int, int] = 224
    ) -> None:
        """Register ``factory(num_classes=..., **kwargs)`` under ``name``."""
        if not callable(factory):
            raise TypeError(f"the factory for model {name!r} must be callable, got {factory!r}")
        if name in self._project:
            raise ValueError(f"model {name!r} is registered twice")
        self._project[name] = ModelSpec(name, factory, _size(image_size))

    def torchvision_names(self) -> list[str]:
        import torchvision.models

        return sorted(torchvision.models.list_models(module=torchvision.models))

    def names(self) -> list[str]:
        return sorted({*self._project, *self.torchvision_names()})

    def spec(self, name: str) -> ModelSpec:
        if name in self._project:
            return self._project[name]
        if name.startswith(TIMM_PREFIX):
            return _timm_spec(name)
        if name in self.torchvision_names():
            return ModelSpec(name, _torchvision_builder(name), _crop_size(name))
        raise UnknownModelError(name, self.names(), _timm_suggestion(name))

    def build(self, name: str, **kwargs: Any) -> Any:
        """Build model ``name`` with random weights on no device."""
        spec = self.spec(name)
        model = spec.build(**kwargs)
        self._built[model] = spec
        return model

    def spec_of(self, model: Any) -> ModelSpec | None:
        """The spec a model was built from, if it came from ``build``; else the one a timm model
        carries in its ``pretrained_cfg`` (named ``timm/<architecture>``), else None."""
        try:
            built = self._built.get(model)
        except TypeError:
            built = None
        return built if built is not None else _carried_spec(model)


def _torchvision_builder(name: str) -> Callable[..., Any]:
    def build(**kwargs: Any) -> Any:
        import torchvision.models

        if name in _INIT_WEIGHTS:
            kwargs.setdefault("init_weights", True)
        return torchvision.models.get_model(name, weights=None, **kwargs)

    return build


def _import_timm(name: str) -> ModuleType:
    """timm, imported for model ``name``; by module name so that typing does not need it."""
    try:
        return importlib.import_module("timm")
    except ImportError:
        raise TimmMissingError(name) from None


def _timm_spec(name: str) -> ModelSpec:
    """``timm/resnet50``: timm's ``resnet50``, its input size from its pretrained config."""
    timm = _import_timm(name)
    bare = name.removeprefix(TIMM_PREFIX)
    # a "/" or ":" is a hub id or a path to timm, which would download or load weights
    if not bare or any(char in bare for char in "/:\\") or not timm.is_model(bare):
        raise UnknownTimmModelError(name, list(timm.list_models()))
    try:
        config = timm.get_pretrained_cfg(bare) if hasattr(timm, "get_pretrained_cfg") else None
    except RuntimeError as exc:  # a pretrained tag the architecture does not have
        raise UnknownTimmModelError(name, list(timm.list_models()), str(exc)) from None
    return ModelSpec(name, _timm_builder(name, bare), _input_size(config))


def _timm_builder(name: str, bare: str) -> Callable[..., Any]:
    def build(**kwargs: Any) -> Any:
        return _import_timm(name).create_model(bare, pretrained=False, **kwargs)

    return build


def _timm_suggestion(name: str) -> str | None:
    """``timm/NAME`` when ``name`` is one of timm's (and timm is installed)."""
    try:
        timm = importlib.import_module("timm")
    except ImportError:
        return None
    return TIMM_PREFIX + name if "/" not in name and timm.is_model(name) else None


def _carried_spec(model: Any) -> ModelSpec | None:
    """The spec of a timm model made outside ``build``, from the pretrained config it carries
    (``pretrained_cfg``; ``default_cfg`` in timm before 0.9)."""
    for attribute in ("pretrained_cfg", "default_cfg"):
        config = getattr(model, attribute, None)
        if isinstance(config, Mapping):
            architecture = config.get("architecture")
            if isinstance(architecture, str) and architecture:
                name = TIMM_PREFIX + architecture
                return ModelSpec(name, _timm_builder(name, architecture), _input_size(config))
    return None


def _input_size(config: object) -> tuple[int, int]:
    """The (height, width) of a timm pretrained config's ``input_size`` (channels, H, W): a
    dict on a model, a ``PretrainedCfg`` from ``timm.get_pretrained_cfg``; else 224."""
    if isinstance(config, Mapping):
        size = config.get("input_size")
    else:
        size = getattr(config, "input_size", None)
    if isinstance(size, (tuple, list)) and len(size) == 3:
        return (int(size[1]), int(size[2]))
    return (224, 224)


def _crop_size(name: str) -> tuple[int, int]:
    import torchvision.models

    try:
        transforms = torchvision.models.get_model_weights(name).DEFAULT.transforms
        return _size(int(transforms.keywords["crop_size"]))
    except (KeyError, AttributeError, ValueError, TypeError):
        return (224, 224)


class ModelFactory:
    """``model_factory("resnet50", num_classes=10)``: a model with random weights, on no device
    (the ``model_factory`` fixture); ``model_factory("timm/convnext_tiny")`` builds timm's."""

    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry

    def __call__(self, name: str, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        return _or_fail(lambda: self.registry.build(name, **kwargs))

    def image_size(self, name: str) -> tuple[int, int]:
        """The model's usual input size, e.g. ``(299, 299)`` for ``inception_v3``."""
        __tracebackhide__ = True
        return _or_fail(lambda: self.registry.spec(name).image_size)

    def names(self) -> list[str]:
        return self.registry.names()


def _or_fail(make: Callable[[], T]) -> T:
    """``make()``, or the test failed with the message of the name it could not build (outside
    the ``except`` block: no chained traceback)."""
    __tracebackhide__ = True
    try:
        return make()
    except ModelNameError as exc:
        problem = str(exc)
    import pytest

    pytest.fail(f"cnnperf: {problem}", pytrace=False)
