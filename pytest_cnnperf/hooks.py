"""Hooks that a project's ``conftest.py`` can implement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .models import ModelRegistry


@pytest.hookspec
def pytest_cnnperf_register_models(registry: ModelRegistry) -> None:
    """Register the project's own models for the ``model_factory`` fixture.

    Called once, at configure time, for every ``--cnnperf`` run. Example::

        def pytest_cnnperf_register_models(registry):
            registry.add("tinynet", TinyNet, image_size=32)

    ``TinyNet(num_classes=...)`` must build the model with random weights on no device.
    """
