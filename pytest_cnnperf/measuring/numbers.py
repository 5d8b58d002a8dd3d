"""The numbers a train step computes: the losses of its first steps from the model's initial
weights (the same in every process: :func:`seed_everything` runs at the test's setup), and the
gradients' norm after the first. The initial state is kept before the first step and put back
after the timed and counted ones, so nothing is read inside a timed or counted step.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..model.structure import StepNumbers
from .timing import Phase

#: the seed of torch, numpy and random at a benchmark test's setup and before the first steps
SEED = 0
#: the first steps whose losses are kept
STEPS = 3
#: the relative difference within which runs of the same code compute the same, by device and
#: precision: CPU fp32 differs in its last bits with the thread count; CUDA fp32 with cuDNN's
#: algorithm choice and TF32; reduced precision by its rounding
TOLERANCE = {("cpu", "fp32"): 1e-3, ("cuda", "fp32"): 1e-2}
REDUCED_TOLERANCE = 5e-2


def tolerance(device_type: str, precision: str) -> float:
    return TOLERANCE.get((device_type, precision), REDUCED_TOLERANCE)


def seed_everything() -> None:
    """Seed torch (every device), numpy and random with :data:`SEED`."""
    import random

    import torch

    random.seed(SEED)
    torch.manual_seed(SEED)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(SEED)


def keep(
    module: Any,
    optimizer: Any,
    scaler: Any,
    phases: Sequence[Phase],
    loss: Callable[[], Any],
    tolerance_: float,
) -> Callable[[], StepNumbers]:
    """Keep the initial state of a train step on the host; the call returned puts it back and
    computes the first steps' numbers. ``loss()``: the loss the forward phase left."""
    started = time.perf_counter()
    model_state = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
    optimizer_state = copy.deepcopy(optimizer.state_dict())
    scaler_state = scaler.state_dict() if scaler is not None else None
    kept_s = time.perf_counter() - started

    def first_steps() -> StepNumbers:
        started = time.perf_counter()
        module.load_state_dict(model_state)
        optimizer.load_state_dict(copy.deepcopy(optimizer_state))
        if scaler is not None and scaler_state:
            scaler.load_state_dict(scaler_state)
        seed_everything()
        losses, norm = [], None
        for step in range(STEPS):
            for name, run in phases:
                run()
                if name == "forward":
                    losses.append(float(loss().detach().float()))
            if step == 0:
                norm = grad_norm(module)
        if not all(math.isfinite(value) for value in losses):
            raise ValueError(f"the first steps' losses are not all finite: {losses}")
        seconds = kept_s + time.perf_counter() - started
        return StepNumbers(tuple(losses), norm, tolerance_, SEED, seconds)

    return first_steps


def grad_norm(module: Any) -> float | None:
    """The L2 norm of all the module's gradients together, in float64; ``None`` where there are
    none, or where it is not finite (fp16's gradient scaler skips such a step: files hold no
    infinities)."""
    import torch

    norms = [p.grad.detach().double().norm() for p in module.parameters() if p.grad is not None]
    norm = float(torch.linalg.vector_norm(torch.stack(norms))) if norms else None
    return norm if norm is not None and math.isfinite(norm) else None
