"""Models by name: torchvision's classification models and the ones a project registers.

Every model is built with random weights and nothing downloaded. Each name knows its usual input
size (torchvision's published crop size: 224 for most, 299 for Inception-V3, up to 600 for
EfficientNet-B7), which ``train_step`` uses when no ``image_size`` is given.
"""

from __future__ import annotations

import difflib
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: torchvision models whose constructor warns unless told how to initialise weights
_INIT_WEIGHTS = ("googlenet", "inception_v3")


class UnknownModelError(LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        close = difflib.get_close_matches(name, known, n=4, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        super().__init__(
            f"unknown model {name!r}; {hint}model_factory builds torchvision's classification "
            f"models ({len(known)} names; `cnnperf models` lists them) and the project's own, "
            "registered in conftest.py with the pytest_cnnperf_register_models(registry) hook"
        )


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable[..., Any]
    image_size: tuple[int, int]
    source: str


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
        self._project[name] = ModelSpec(name, factory, _size(image_size), "project")

    def torchvision_names(self) -> list[str]:
        import torchvision.models

        return sorted(torchvision.models.list_models(module=torchvision.models))

    def names(self) -> list[str]:
        return sorted({*self._project, *self.torchvision_names()})

    def spec(self, name: str) -> ModelSpec:
        if name in self._project:
            return self._project[name]
        if name in self.torchvision_names():
            return ModelSpec(name, self._torchvision_builder(name), _crop_size(name), "torchvision")
        raise UnknownModelError(name, self.names())

    @staticmethod
    def _torchvision_builder(name: str) -> Callable[..., Any]:
        def build(**kwargs: Any) -> Any:
            import torchvision.models

            if name in _INIT_WEIGHTS:
                kwargs.setdefault("init_weights", True)
            return torchvision.models.get_model(name, weights=None, **kwargs)

        return build

    def build(self, name: str, **kwargs: Any) -> Any:
        """Build model ``name`` with random weights on no device."""
        spec = self.spec(name)
        model = spec.build(**kwargs)
        self._built[model] = spec
        return model

    def spec_of(self, model: Any) -> ModelSpec | None:
        """The spec a model was built from, if it came from ``build``."""
        try:
            return self._built.get(model)
        except TypeError:
            return None


def _crop_size(name: str) -> tuple[int, int]:
    import torchvision.models

    try:
        transforms = torchvision.models.get_model_weights(name).DEFAULT.transforms
        return _size(int(transforms.keywords["crop_size"]))
    except (KeyError, AttributeError, ValueError, TypeError):
        return (224, 224)


class ModelFactory:
    """``model_factory("resnet50", num_classes=10)``: a model with random weights, on no device
    (the ``model_factory`` fixture)."""

    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry

    def __call__(self, name: str, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        import pytest

        try:
            return self.registry.build(name, **kwargs)
        except UnknownModelError as exc:
            problem = str(exc)
        pytest.fail(f"cnnperf: {problem}", pytrace=False)

    def image_size(self, name: str) -> tuple[int, int]:
        """The model's usual input size, e.g. ``(299, 299)`` for ``inception_v3``."""
        return self.registry.spec(name).image_size

    def names(self) -> list[str]:
        return self.registry.names()
