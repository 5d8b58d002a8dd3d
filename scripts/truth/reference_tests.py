"""The truth table's test module (run by ``scripts/truth-check`` through pytest and the plugin):
each check measures a figure with the plugin and with an independent reference, and records
both in ``TRUTH_OUT``.
"""

from __future__ import annotations

import gc
import json
import os
import statistics

import pytest
import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

from pytest_cnnperf.measuring import cpuload
from pytest_cnnperf.measuring.cudnn import CudnnMode, cudnn_mode_applied

OUT = os.environ["TRUTH_OUT"]
CONFIG = json.loads(os.environ["TRUTH_CONFIG"])


def record(**fields):
    with open(OUT, "a") as out:
        out.write(json.dumps(fields) + "\n")


def bare(model, device, batch, size):
    """The train step a user writes: what cnnperf.train_step times, written out."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(batch, 3, size, size, device=device)
    labels = torch.randint(0, 1000, (batch,), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()

    return step, optimizer


def timed(step):
    """torch.utils.benchmark's figure for the step, and the CPU time others denied it."""
    threads = torch.get_num_threads()
    before = cpuload.snapshot()
    timer = Timer("step()", globals={"step": step}, num_threads=threads)
    median = timer.blocked_autorange(min_run_time=CONFIG["timer_s"]).median
    after = cpuload.snapshot()
    busy = cpuload.contention(before, after, threads) if before and after else None
    return median, busy


@pytest.mark.parametrize("name", CONFIG["step_models"])
def test_step_time(cnnperf, model_factory, name):
    device = cnnperf.device
    batch, size = CONFIG["batch"], CONFIG["size"]
    model = model_factory(name).to(device)
    step, _ = bare(model, device, batch, size)
    for _ in range(3):
        step()
    for round in range(CONFIG["rounds"]):
        before, busy_before = timed(step)
        m = cnnperf.train_step(
            model, batch_size=batch, image_size=size, name=f"round {round}"
        ).measurement
        after, busy_after = timed(step)
        record(
            check="step",
            model=name,
            round=round,
            timer=[before, after],
            cnnperf=m.step_time_s,
            samples=[s.step_time_s for s in m.samples],
            events=[statistics.fmean(s.step_times_s) for s in m.samples],
            busy=[busy_before, busy_after, *(s.cpu_contention for s in m.samples)],
        )


def reference_peak(step, optimizer, device, steps):
    """torch.cuda.max_memory_allocated over ``steps`` bare steps, taken as cnnperf takes its
    peak: from a step boundary (gradients freed), the allocator's cache emptied and its peaks
    reset first. On a warm cache a tensor may get a larger cached block than it asked for, and
    the allocated bytes count the whole block: the two sides would differ by rounding alone."""
    optimizer.zero_grad(set_to_none=True)
    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    for _ in range(steps):
        step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device)


def test_peak_memory(cnnperf, model_factory):
    device = cnnperf.device
    if device.type != "cuda":
        pytest.skip("needs a GPU")
    model = model_factory("resnet50")
    m = cnnperf.train_step(
        model, batch_size=CONFIG["seed_batch"], image_size=CONFIG["seed_size"], name="memory"
    ).measurement
    step, optimizer = bare(model.to(device), device, CONFIG["seed_batch"], CONFIG["seed_size"])
    for _ in range(3):  # the optimizer's state, as cnnperf's timed steps made it
        step()
    record(
        check="memory",
        cnnperf=m.peak_allocated_bytes,
        reference=reference_peak(step, optimizer, device, CONFIG["memory_steps"]),
    )


def test_seeds(cnnperf, model_factory):
    device = cnnperf.device
    if device.type != "cuda":
        pytest.skip("needs a GPU")
    bf16 = torch.cuda.get_device_capability(device) >= (8, 0)
    runs = {"on": {}, "off": {}}
    if bf16:
        runs.update({"bf16": {"amp": "bf16"}, "bf16-cl": {"amp": "bf16", "channels_last": True}})
    for label, options in runs.items():
        mode = CudnnMode.OFF if label == "off" else CudnnMode.ON
        with cudnn_mode_applied(mode):
            m = cnnperf.train_step(
                model_factory("resnet50"),
                batch_size=CONFIG["direction_batch"],
                image_size=CONFIG["seed_size"],
                name=label,
                **options,
            ).measurement
        record(check="seed", label=label, step=m.step_time_s, peak=m.peak_allocated_bytes)
