"""``cuda_graphs=True``: a whole step captured once as a CUDA graph and replayed, as in
"Whole-network capture" of PyTorch's CUDA semantics notes: static inputs, a few steps on a side
stream first, gradients set to ``None`` so that the captured backward allocates them from the
graph's pool, a capturable optimizer (Adam and AdamW built with ``capturable=True``; SGD's float
learning rate is baked into the graph). The three phases become one: a replay is the step.
https://docs.pytorch.org/docs/stable/notes/cuda.html#whole-network-capture
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: eager steps on a side stream before the capture (the notes use 3; DDP would need 11)
WARMUP_STEPS = 3


def capture(
    step: Callable[[], None], before: Callable[[], None], device: Any
) -> Callable[[], None]:
    """Warm ``step`` up on a side stream, call ``before()`` (a train step: set the gradients
    to ``None``), capture ``step`` as a CUDA graph and return its replay."""
    import torch

    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP_STEPS):
            before()
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    before()
    with torch.cuda.graph(graph):
        step()
    return graph.replay
