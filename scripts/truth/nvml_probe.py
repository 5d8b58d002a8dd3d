"""The GPU's identity as torch and as NVML see it, asked in a process of its own. Prints one
JSON line.
"""

from __future__ import annotations

import json

import torch

from pytest_cnnperf.measuring import nvml

monitor = nvml.GpuMonitor.open(0)
print(
    json.dumps(
        {
            "torch": str(torch.cuda.get_device_properties(0).uuid),
            "name": torch.cuda.get_device_name(0),
            "nvml": monitor.uuid() if monitor else None,
        }
    )
)
