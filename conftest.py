"""What belongs to the whole repository, for the plugin's own tests and the repository's own
benchmarks alike: the models the README's examples register.

``benchmarks/`` holds the repository's benchmark tests, gated against ``baselines/`` (run them
with ``pytest --cnnperf benchmarks --pyargs pytest_cnnperf.zoo``); ``tests/`` holds the plugin's
tests, which ``pytest`` runs by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_cnnperf.models import ModelRegistry


def tinynet(num_classes: int = 10) -> Any:
    """A small convolutional net, as a project's own model: three convolutions, batch norm,
    pooling and a linear head, with random weights."""
    from torch import nn

    def block(inputs: int, outputs: int) -> list[Any]:
        return [
            nn.Conv2d(inputs, outputs, 3, padding=1, bias=False),
            nn.BatchNorm2d(outputs),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        ]

    return nn.Sequential(
        *block(3, 32),
        *block(32, 64),
        *block(64, 128),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, num_classes),
    )


def pytest_cnnperf_register_models(registry: ModelRegistry) -> None:
    registry.add("tinynet", tinynet, image_size=32)
