"""The GPU as CUDA sees it, asked in a process of its own. Prints one JSON line."""

from __future__ import annotations

import json

import torch

count = torch.cuda.device_count()
facts = {"count": count, "cuda": torch.version.cuda}
if count:
    props = torch.cuda.get_device_properties(0)
    facts.update(name=props.name, capability=[props.major, props.minor])
print(json.dumps(facts))
