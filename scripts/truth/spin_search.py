"""In a process of its own, which ends before the gate's samples start: the length of the GPU
spin that makes the gate's step at least ``TRUTH_SEARCH["target"]`` slower, timed by
torch.utils.benchmark alternately with the plain step. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import statistics

import torch
import torch.nn.functional as F
import torchvision
from torch.utils.benchmark import Timer

config = json.loads(os.environ["TRUTH_SEARCH"])
target, batch, size = config["target"], config["batch"], config["size"]
device = torch.device("cuda")
model = torchvision.models.get_model(config["model"], num_classes=1000).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images = torch.randn(batch, 3, size, size, device=device)
labels = torch.randint(0, 1000, (batch,), device=device)


def step_of(cycles):
    def step():
        if cycles:
            torch.cuda._sleep(cycles)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()

    return step


def median(call):
    return float(Timer("call()", globals={"call": call}).blocked_autorange(min_run_time=0.5).median)


plain = step_of(0)
for _ in range(10):
    plain()
probe = 10**6
cycles_per_s = probe / median(lambda: torch.cuda._sleep(probe))
cycles = int(target * median(plain) * cycles_per_s)
for _ in range(4):
    slow = step_of(cycles)
    slowdown = statistics.median(median(slow) / median(plain) for _ in range(2))
    if slowdown >= 1 + target:
        break
    # the spin added (slowdown - 1) of a step: lengthen it in proportion, and 5% more
    cycles = int(cycles * 1.05 * target / max(slowdown - 1, target / 4))
print(json.dumps({"cycles": cycles, "slowdown": slowdown}))
