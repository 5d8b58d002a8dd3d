"""The truth table's gate checks (run by ``scripts/truth-check`` through pytest and the plugin):
the same model saved, gated unchanged, and gated with a GPU spin that slows its step.
"""

from __future__ import annotations

import os

import pytest
import torch
import torchvision
from torch import nn

CYCLES = int(os.environ["TRUTH_SPIN_CYCLES"])
BATCH, SIZE = int(os.environ["TRUTH_BATCH"]), int(os.environ["TRUTH_SIZE"])
MODEL = os.environ["TRUTH_MODEL"]
SAME, SLOW = int(os.environ["TRUTH_SAME"]), int(os.environ["TRUTH_SLOW"])
RUNS = (
    ["base"] + [f"same-{i}" for i in range(1, SAME + 1)] + [f"slow-{i}" for i in range(1, SLOW + 1)]
)


class Injected(nn.Module):
    """The model, after the GPU spins for ``cycles`` clock cycles on its stream: a slower step
    that allocates nothing (extra images would grow the peak memory too, and the memory gate
    would answer before the step time could)."""

    def __init__(self, inner, cycles):
        super().__init__()
        self.inner, self.cycles = inner, cycles

    def forward(self, x):
        if self.cycles:
            torch.cuda._sleep(self.cycles)
        return self.inner(x)


@pytest.mark.parametrize("run", RUNS)
def test_gate(cnnperf, run):
    cycles = CYCLES if run.startswith("slow") else 0
    model = Injected(torchvision.models.get_model(MODEL, num_classes=1000), cycles)
    cnnperf.train_step(model, batch_size=BATCH, image_size=SIZE, name="gate")
