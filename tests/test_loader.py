"""``cnnperf.train_loop``: the user's loader feeding the train step.

The loop is checked by what it reads and when (the timed parts never hold a pass's end or its
last batch; every run reads the same items), by the messages that bad input gets, by the words
and figures of its reports, and through pytest with scripted samples. One test times a loader
for real: one that sleeps far longer than its step, reported input-bound. No test asserts a
timing."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import re
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from factories import ENV
from scripted import Scripted
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from pytest_cnnperf import benchmark
from pytest_cnnperf.benchmark import ArgumentProblem
from pytest_cnnperf.measuring.batches import unpack_problem
from pytest_cnnperf.measuring.loader import Feed, LoopSpec, build_loop, children_cpu_s, first_look
from pytest_cnnperf.measuring.timing import CpuClock, time_block
from pytest_cnnperf.model import (
    Comparison,
    Decision,
    Measurement,
    Result,
    Sample,
    Verdict,
)
from pytest_cnnperf.model.config import LoaderSetting
from pytest_cnnperf.model.parts import Loading
from pytest_cnnperf.reports import benchmark_json, epoch, explain, markdown, table
from pytest_cnnperf.reports.loader import InputFigures

CPU = torch.device("cpu")


class Indexed(Dataset[tuple[torch.Tensor, int]]):
    """``size`` images of 3x4x4 whose label is their index; each item draws from torch's
    generator (a worker's is seeded from the loader's)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.rand(3, 4, 4), index


class Dicts(Indexed):
    def __getitem__(self, index: int) -> Any:
        return {"image": torch.zeros(3, 4, 4), "label": index}


class Triples(Indexed):
    def __getitem__(self, index: int) -> Any:
        return torch.zeros(3, 4, 4), index, f"{index}.jpg"


class Images(Indexed):
    def __getitem__(self, index: int) -> Any:
        return torch.zeros(3, 4, 4)


class DiesInWorkers(Indexed):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if torch.utils.data.get_worker_info() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(index)


def tiny() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.Flatten(), nn.Linear(32, 64))


def pairs(count: int, size: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.rand(size, 3, 4, 4), torch.arange(size) % 4) for _ in range(count)]


class Stream:
    """A re-iterable without a length: ``count`` batches a pass."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter(pairs(self.count))


def read(feed: Feed, batches: int) -> list[list[int]]:
    """The labels of the next ``batches`` batches."""
    seen = []
    for _ in range(batches):
        feed.read()
        seen.append(feed.host[1].tolist())
    return seen


# ---- the arguments and the key ----


def test_a_dataloaders_configuration_names_the_benchmark() -> None:
    loader = DataLoader(
        Indexed(64),
        batch_size=8,
        num_workers=2,
        pin_memory=True,
        persistent_workers=True,
        prefetch_factor=4,
    )
    setting = benchmark.loader_setting(loader)
    assert setting == LoaderSetting("Indexed", 2, True, True, 4)
    spec = LoopSpec(batch_size=benchmark.loop_batch_size(loader, None))
    config = benchmark.loop_config(spec, setting, "tinynet", None, None)
    assert config.key == (
        "train_loop tinynet bs=8 Indexed workers=2 pin_memory persistent prefetch=4 opt=sgd"
    )
    plain = benchmark.loader_setting(DataLoader(Indexed(64), batch_size=8))
    assert plain.label() == "Indexed workers=0"


def test_a_named_loop_is_the_same_benchmark_whatever_its_loader() -> None:
    """``name=`` names the pipeline: a PR that drops workers is gated against the same
    baseline, and its slowdown fails."""
    spec = LoopSpec(batch_size=8)
    keys = {
        benchmark.loop_config(
            spec, benchmark.loader_setting(DataLoader(Indexed(8), 8, num_workers=n)), "m", None, "p"
        ).key
        for n in (0, 2)
    }
    assert keys == {"train_loop p bs=8 opt=sgd"}


def test_an_iterables_batch_size_is_its_first_batchs_or_given() -> None:
    assert benchmark.loop_batch_size(pairs(3, size=5), None) == 5
    assert benchmark.loop_batch_size(Stream(3), 2) == 2
    assert benchmark.loader_setting(Stream(3)) == LoaderSetting("Stream")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: benchmark.loader_setting(42),
            "loader=42 is not iterable; train_loop reads a torch.utils.data.DataLoader or any "
            "iterable of (images, targets) batches; pass the DataLoader itself",
        ),
        (
            lambda: benchmark.loop_batch_size(Stream(3), None),
            "train_loop cannot tell how many images a batch of the Stream holds without reading "
            "it (only a DataLoader or a list of batches says); pass batch_size=N, the images "
            "each batch it yields holds",
        ),
        (
            lambda: benchmark.loop_batch_size(DataLoader(Indexed(8), batch_size=8), 16),
            "batch_size=16, but the DataLoader of Indexed yields batches of 8 images; leave "
            "batch_size out: train_loop reads it from the loader",
        ),
        (
            lambda: benchmark.steps(0),
            "steps=0 is not a number of steps; use a positive int (the timed steps of each "
            "sample), or leave it out for as many as the run's timing asks for",
        ),
    ],
)
def test_a_bad_argument_names_the_value_the_forms_and_the_fix(call: Any, message: str) -> None:
    with pytest.raises(ArgumentProblem) as raised:
        call()
    assert str(raised.value) == message


# ---- reading the loader ----


@pytest.mark.parametrize("workers", [0, 1])
def test_every_run_reads_the_same_items_whatever_the_global_generator(workers: int) -> None:
    """The same items in the same order, pass after pass; and with workers, the same random
    transforms (their generators are seeded from the loader's)."""

    def labels_and_pixels(seed: int) -> tuple[list[list[int]], float]:
        torch.manual_seed(seed)
        loader = DataLoader(Indexed(24), batch_size=4, shuffle=True, num_workers=workers)
        feed = Feed(loader, 4)
        seen = read(feed, 6)  # one pass
        feed.restart()
        seen += read(feed, 6)  # and the next
        return seen, float(feed.host[0].sum())

    (first, pixels), (again, pixels_again) = labels_and_pixels(1), labels_and_pixels(2)
    assert first == again
    assert first[:6] != first[6:]  # each pass in its own order
    if workers:  # a worker's generator is seeded from the loader's; without, it is torch's own
        assert pixels == pixels_again


def test_the_timed_steps_never_hold_a_pass_end_or_its_last_batch() -> None:
    """6 batches a pass, 11 steps timed: in parts inside passes, the restart and one step to
    warm the new pass between them, untimed; the pass's last batch never timed."""
    loader = DataLoader(Indexed(12), batch_size=2)
    workload = build_loop(tiny(), loader, LoopSpec(batch_size=2), CPU)
    loop = workload.loop
    assert loop is not None
    feed = loop.feed
    timed: list[tuple[int, int]] = []  # (pass, batches read in it) of each timed step
    original = feed.read

    def logged() -> None:
        original()
        if feed.in_part:
            timed.append((feed.passes, feed.position))

    phases = [("wait", logged), *loop.phases[1:]]
    _, marks = time_block(phases, CpuClock(), 11, window=loop)
    assert len(marks) == 11
    assert feed.passes >= 2
    assert max(position for _, position in timed) <= 5
    starts = {}
    for passes, position in timed:
        starts.setdefault(passes, position)
    assert all(position >= 2 for passes, position in starts.items() if passes)


def test_channels_last_puts_each_batch_in_that_format() -> None:
    loader = DataLoader(Indexed(12), batch_size=2)
    workload = build_loop(tiny(), loader, LoopSpec(batch_size=2, channels_last=True), CPU)
    loop = workload.loop
    assert loop is not None
    for _, run in loop.phases:
        run()
    assert loop.batch.images.is_contiguous(memory_format=torch.channels_last)


def test_a_part_that_ran_into_an_unknown_pass_end_is_timed_again() -> None:
    workload = build_loop(tiny(), Stream(5), LoopSpec(batch_size=2), CPU)
    loop = workload.loop
    assert loop is not None
    _, marks = time_block(loop.phases, CpuClock(), 6, window=loop)
    assert len(marks) == 6
    assert loop.feed.length == 5


def test_the_figures_of_a_sample_hold_the_loader_and_the_model_alone() -> None:
    from pytest_cnnperf.gate.policy import CPU as POLICY
    from pytest_cnnperf.measuring.sample import SamplePlan, take_sample

    timing = dataclasses.replace(POLICY.timing, min_time_s=0.01, warmup_max_s=0.1)
    # a pass longer than the most warm-up steps and the timed ones: a busy machine's longer
    # warm-up never reaches the pass's end
    batches = POLICY.timing.warmup_max_steps + 5 + 1
    items = TensorDataset(torch.rand(4 * batches, 3, 4, 4), torch.arange(4 * batches) % 64)
    loader = DataLoader(items, batch_size=4, shuffle=True)
    workload = build_loop(tiny(), loader, LoopSpec(batch_size=4, steps=5), CPU)
    sample, _ = take_sample(
        workload, CPU, SamplePlan(timing, calibrate=False), memory_pass=True, in_process=True
    )
    loading = sample.loading
    assert loading is not None
    assert len(sample.step_times_s) == 5
    assert set(sample.phases) == {"wait", "copy", "forward", "backward", "optimizer"}
    assert (loading.batches, loading.seeded, loading.restarts) == (batches, True, 0)
    assert loading.wait_s > 0
    assert loading.synthetic_step_s > 0
    assert loading.worker_cpu is None  # no workers
    assert sample.memory is not None
    assert sample.structure is None
    assert sample.numbers is None


def test_a_sample_with_workers_keeps_the_cpu_they_used() -> None:
    from pytest_cnnperf.gate.policy import CPU as POLICY
    from pytest_cnnperf.measuring.sample import SamplePlan, take_sample

    timing = dataclasses.replace(POLICY.timing, min_time_s=0.01, warmup_max_s=0.1)
    loader = DataLoader(Indexed(64), batch_size=4, num_workers=1)
    workload = build_loop(tiny(), loader, LoopSpec(batch_size=4, steps=3), CPU)
    sample, _ = take_sample(
        workload, CPU, SamplePlan(timing, calibrate=False), memory_pass=False, in_process=True
    )
    assert workload.loop is not None
    workload.loop.close()
    assert sample.loading is not None
    assert sample.loading.worker_cpu is not None


def test_the_workers_cpu_time_counts_as_the_samples_own() -> None:
    """The loader's workers are the benchmark's processes: their CPU time is not a
    neighbour's (``measuring.cpuload``)."""
    before = children_cpu_s()
    loader = DataLoader(Spins(4), batch_size=2, num_workers=1)
    list(loader)
    assert children_cpu_s() > before


class Spins(Indexed):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        x = torch.rand(64, 64)
        for _ in range(200):
            x = (x @ x).clamp(0, 1)
        return super().__getitem__(index)


# ---- bad input ----


def failing_read(loader: Any, batch_size: int, batches: int = 1, unpack: Any = None) -> str:
    feed = Feed(loader, batch_size, unpack)
    with pytest.raises((TypeError, ValueError, RuntimeError)) as raised:
        read(feed, batches)
    return str(raised.value)


def test_an_iterable_of_something_else_than_pairs_is_refused() -> None:
    assert failing_read(DataLoader(Dicts(8), batch_size=2), 2) == (
        "the DataLoader of Dicts yielded a dict with keys 'image', 'label', not an (images, "
        "targets) pair; train_loop reads a mapping batch through unpack=, a pair of keys (the "
        "images' and the targets' in a mapping batch) or a callable that takes the batch and "
        'returns (images, targets); pass unpack=("image", "label")'
    )
    assert failing_read(DataLoader(Triples(8), batch_size=2), 2) == (
        "the DataLoader of Triples yielded a list of 3 values, not an (images, targets) pair; "
        "train_loop reads (images, targets) pairs: a Dataset whose __getitem__ returns (image, "
        "label), batched by the DataLoader's default collate, or any iterable that yields "
        "(images, targets); return (image, label) from the dataset's __getitem__, or give the "
        "DataLoader a collate_fn that returns (images, targets), or pass unpack= a callable "
        "that takes the batch and returns (images, targets)"
    )
    assert failing_read(DataLoader(Images(8), batch_size=2), 2) == (
        "the DataLoader of Images yielded a Tensor of shape (2, 3, 4, 4): images without "
        "targets, not an (images, targets) pair; train_loop trains on images with their "
        "targets, which the loss needs; return (image, label) from the dataset's __getitem__"
    )
    assert failing_read([([1, 2], 0)] * 4, 2) == (
        "the list yielded a pair whose images are a list of 2 values, not a tensor of a batch "
        "of images; train_loop reads (images, targets) pairs: a Dataset whose __getitem__ "
        "returns (image, label), batched by the DataLoader's default collate, or any iterable "
        "that yields (images, targets); stack the images into one tensor (N, C, H, W), as the "
        "DataLoader's default collate does"
    )


def test_a_loader_too_short_for_one_measured_step_is_refused() -> None:
    assert failing_read(DataLoader(Indexed(4), batch_size=2), 2) == (
        "the DataLoader of Indexed yields 2 batches a pass, too few to time a step in it: a "
        "pass needs at least 3 (1 after a restart, 1 timed, and the pass's last, which may be "
        "short and is never timed); use a dataset of at least 6 items at batch_size=2"
    )
    assert failing_read(DataLoader(Indexed(10), batch_size=2, num_workers=2), 2) == (
        "the DataLoader of Indexed yields 5 batches a pass, too few to time a step in it: a "
        "pass needs at least 7 (5 to fill its workers' queue of 4 batches again after a "
        "restart, 1 timed, and the pass's last, which may be short and is never timed); use "
        "a dataset of at least 14 items at batch_size=2, or fewer workers"
    )
    assert failing_read(Stream(0), 2) == (
        "the Stream is empty: its first pass yielded no batch; train_loop reads (images, "
        "targets) pairs: a Dataset "
        "whose __getitem__ returns (image, label), batched by the DataLoader's default "
        "collate, or any iterable that yields (images, targets), at least 3 batches a pass; "
        "give it a dataset of at least 6 items at batch_size=2"
    )


def test_a_refused_loader_leaves_no_worker_behind() -> None:
    # the test's traceback holds the feed until a garbage collection, which would wait on each
    # idle worker in turn: the refusal ends them itself
    others = set(multiprocessing.active_children())  # earlier tests' daemons
    failing_read(DataLoader(Indexed(10), batch_size=2, num_workers=2), 2)
    assert set(multiprocessing.active_children()) - others == set()


def test_a_generator_read_once_is_refused_at_its_second_pass() -> None:
    batches = iter(pairs(4))
    assert failing_read(batches, 2, batches=5) == (
        "the list_iterator ended after 4 batches and yields none when read again: iter() of "
        "a generator or an iterator returns itself, so it can be read once, and a sample reads "
        "the loader in several passes; train_loop reads (images, targets) pairs: a Dataset "
        "whose __getitem__ returns (image, label), batched by the DataLoader's default "
        "collate, or any iterable that yields (images, targets) that can be read again (a "
        "DataLoader, a list) or that never ends; give train_loop a DataLoader or a list of "
        "batches instead"
    )


def test_a_first_batch_of_another_size_is_refused() -> None:
    assert failing_read(pairs(4, size=3), 2) == (
        "the list yielded a first batch of 3 images where its batch size is 2; a pass's first "
        "batch is a whole one; give train_loop's batch_size= the images each batch holds (a "
        "DataLoader says it itself), or a dataset of at least one whole batch"
    )


def test_a_loader_whose_workers_die_is_named_with_the_fixes() -> None:
    message = failing_read(DataLoader(DiesInWorkers(8), batch_size=2, num_workers=1), 2)
    message = re.sub(r"\(pid(\(s\))? [\d, ]+\)", "(pid N)", message)
    said = re.search(r"died \((.*?)\); train_loop", message)
    assert said is not None
    assert said.group(1).startswith("DataLoader worker (pid N)")
    assert message == (
        f"a worker process of the DataLoader of DiesInWorkers died ({said.group(1)}); "
        "train_loop times a loader whose workers live through the measurement. Run it with "
        "num_workers=0 to see the dataset's own error; a worker killed by a bus error ran out "
        "of shared memory (raise /dev/shm: docker run --shm-size=8g or --ipc=host), and one "
        "killed by the system ran out of memory (use fewer workers or a smaller "
        "prefetch_factor)"
    )


# ---- batches that are not pairs: unpack= ----


def dict_batches(count: int, size: int = 4, **keys: str) -> list[dict[str, Any]]:
    """``count`` batches of ``size`` images as dicts: their images under ``images=`` (default
    ``image``), their labels under ``targets=`` (default ``label``), and their paths."""
    images, targets = keys.get("images", "image"), keys.get("targets", "label")
    return [
        {images: torch.rand(size, 3, 4, 4), targets: torch.arange(size) % 4, "path": ["p"] * size}
        for _ in range(count)
    ]


@pytest.mark.parametrize(
    "unpack",
    [("image", "label"), lambda batch: (batch["image"], batch["label"])],
    ids=["keys", "callable"],
)
def test_unpack_reads_a_dataloaders_dict_batches(unpack: Any) -> None:
    feed = Feed(DataLoader(Dicts(8), batch_size=2), 2, unpack)
    assert read(feed, 3) == [[0, 1], [2, 3], [4, 5]]
    assert feed.host[0].shape == (2, 3, 4, 4)


def test_a_lists_batch_size_is_read_through_unpack() -> None:
    assert benchmark.loop_batch_size(dict_batches(4, size=5), None, ("image", "label")) == 5
    assert benchmark.loop_batch_size(dict_batches(4, size=5), None, lambda b: (b["image"], 0)) == 5


def test_unpack_is_no_part_of_the_benchmarks_key() -> None:
    """Reading the same batches another way is the same benchmark, against the same baseline."""
    setting = benchmark.loader_setting(DataLoader(Dicts(8), batch_size=2))
    keys = {
        benchmark.loop_config(LoopSpec(batch_size=2, unpack=unpack), setting, "m", None, None).key
        for unpack in (None, ("image", "label"), lambda batch: (batch["image"], batch["label"]))
    }
    assert keys == {"train_loop m bs=2 Dicts workers=0 opt=sgd"}


def take_image(batch: Any) -> Any:
    return batch["image"]


@pytest.mark.parametrize(
    ("loader", "unpack", "message"),
    [
        (
            [],
            None,
            "the list is empty: len() says it yields no batch; train_loop times train steps on "
            "the batches it yields, at least 3 a pass; fill it with at least 3 (images, "
            "targets) batches",
        ),
        (
            DataLoader(Indexed(0), batch_size=2, num_workers=2),
            None,
            "the DataLoader of Indexed is empty: len() says it yields no batch; train_loop "
            "times train steps on the batches it yields, at least 7 a pass; give it a dataset "
            "of at least 7 batches' worth of items",
        ),
        (
            [torch.zeros(8, 3, 32, 32)] * 20,
            None,
            "the list yielded a Tensor of shape (8, 3, 32, 32): images without targets, not an "
            "(images, targets) pair; train_loop trains on images with their targets, which the "
            "loss needs; make each batch of the list a pair, as in [(images, targets), ...], "
            "with targets such as torch.randint(0, num_classes, (8,)) for random labels",
        ),
        (
            [(torch.zeros(4, 3, 4, 4), torch.zeros(4), "paths")] * 4,
            None,
            "the list yielded a tuple of 3 values, not an (images, targets) pair; train_loop "
            "reads (images, targets) pairs: a Dataset whose __getitem__ returns (image, label), "
            "batched by the DataLoader's default collate, or any iterable that yields (images, "
            "targets); make each batch of the list an (images, targets) pair, or pass unpack= a "
            "callable that takes the batch and returns (images, targets)",
        ),
        (
            dict_batches(4),
            None,
            "the list yielded a dict with keys 'image', 'label', 'path', not an (images, "
            "targets) pair; train_loop reads a mapping batch through unpack=, a pair of keys "
            "(the images' and the targets' in a mapping batch) or a callable that takes the "
            'batch and returns (images, targets); pass unpack=("image", "label")',
        ),
        (  # no key named as images are: the key of the one batch of images, and its targets'
            dict_batches(4, images="pixels", targets="cls_id"),
            None,
            "the list yielded a dict with keys 'pixels', 'cls_id', 'path', not an (images, "
            "targets) pair; train_loop reads a mapping batch through unpack=, a pair of keys "
            "(the images' and the targets' in a mapping batch) or a callable that takes the "
            'batch and returns (images, targets); pass unpack=("pixels", "cls_id")',
        ),
        (  # two batches of targets: the choice is the user's
            [{"a": torch.zeros(4, 3, 4, 4), "b": torch.zeros(4), "c": torch.zeros(4)}] * 4,
            None,
            "the list yielded a dict with keys 'a', 'b', 'c', not an (images, targets) pair; "
            "train_loop reads a mapping batch through unpack=, a pair of keys (the images' and "
            "the targets' in a mapping batch) or a callable that takes the batch and returns "
            "(images, targets); pass unpack=(the images' key, the targets' key), two of 'a', "
            "'b', 'c'",
        ),
        (
            dict_batches(4),
            ("img", "label"),
            "unpack=(\"img\", \"label\"), but the list yielded a dict with keys 'image', 'label', "
            "'path', without 'img'; pass unpack=(\"image\", \"label\")",
        ),
        (
            pairs(4),
            ("image", "label"),
            'unpack=("image", "label") reads a mapping batch by its keys, but the list yielded '
            "a tuple of 2 values; leave unpack out: train_loop reads (images, targets) pairs as "
            "they are",
        ),
        (
            [(torch.zeros(4, 3, 4, 4), torch.zeros(4), "paths")] * 4,
            ("image", "label"),
            'unpack=("image", "label") reads a mapping batch by its keys, but the list yielded '
            "a tuple of 3 values; pass unpack= a callable that takes the batch and returns "
            "(images, targets)",
        ),
        (
            dict_batches(4),
            take_image,
            "unpack=take_image returned a Tensor of shape (4, 3, 4, 4) for a dict with keys "
            "'image', 'label', 'path' from the list, not an (images, targets) pair; unpack takes "
            "the loader's batch and returns (images, targets): return the two as a tuple, such "
            'as (batch["image"], batch["label"])',
        ),
        (
            dict_batches(4),
            lambda batch: (batch["img"], batch["label"]),
            "unpack=<lambda> raised KeyError: 'img' on a dict with keys 'image', 'label', 'path' "
            "from the list; unpack takes the loader's batch and returns (images, targets): make "
            'it read this batch, such as unpack=lambda batch: (batch["image"], batch["label"])',
        ),
    ],
    ids=[
        "empty-list",
        "empty-dataloader",
        "images-alone",
        "triples",
        "dicts",
        "dicts-by-values",
        "dicts-unclear",
        "missing-key",
        "keys-of-a-pair",
        "keys-of-a-triple",
        "callable-returns-one",
        "callable-raises",
    ],
)
def test_a_loader_refused_at_the_call_names_its_own_fault(
    loader: Any, unpack: Any, message: str
) -> None:
    """Before its batch size is asked: an empty loader, and a list whose first batch gives no
    (images, targets) pair as it is or through ``unpack``."""
    assert first_look(loader, unpack) == message


def test_a_dataloaders_batch_without_unpacks_keys_is_refused_at_its_first_read() -> None:
    assert failing_read(DataLoader(Dicts(8), batch_size=2), 2, unpack=("img", "target")) == (
        'unpack=("img", "target"), but the DataLoader of Dicts yielded a dict with keys '
        "'image', 'label', without 'img', 'target'; pass unpack=(\"image\", \"label\")"
    )


@pytest.mark.parametrize(
    ("unpack", "message"),
    [
        (
            "image",
            "unpack='image' is neither a pair of keys nor a callable; train_loop reads a batch "
            "that is not an (images, targets) pair through unpack=: a pair of keys (the "
            "images' and the targets' in a mapping batch) or a callable that takes the batch "
            'and returns (images, targets); use unpack=("image", "label") with the keys of '
            "your batches, or leave unpack out for a loader that yields (images, targets) pairs",
        ),
        (
            ("image", "image"),
            'unpack=("image", "image") names the key "image" twice; give the key of the images '
            'first and that of the targets second, such as unpack=("image", "label")',
        ),
    ],
)
def test_an_unpack_of_another_form_is_refused(unpack: object, message: str) -> None:
    assert unpack_problem(unpack) == message
    assert unpack_problem(("image", "label")) is None
    assert unpack_problem(take_image) is None


# ---- the words and figures of the reports ----

LOOP = LoaderSetting("SleepyData", workers=0)


def loading(wait: float, **fields: Any) -> Loading:
    values: dict[str, Any] = dict(
        first_batch_s=0.05,
        wait_s=wait,
        copy_s=0.0,
        synthetic_step_s=0.037,
        batches=256,
        seeded=True,
        cpus=2,
    )
    values.update(fields)
    return Loading(**values)


def loop_result(
    step: float = 0.1,
    wait: float = 0.063,
    loader: LoaderSetting = LOOP,
    decision: Decision | None = None,
    **fields: Any,
) -> Result:
    samples = tuple(
        Sample(
            step_time_s=step,
            step_times_s=(step,) * 4,
            phases={"wait": (wait,) * 4, "copy": (0.0,) * 4},
            loading=loading(wait, **fields),
        )
        for _ in range(3)
    )
    config = benchmark.loop_config(LoopSpec(batch_size=8), loader, "Net", None, "sleepy")
    return Result(
        config=config,
        test_id="tests/test_loop.py::test_loop",
        environment=ENV,
        measurement=Measurement(8, samples),
        decision=decision,
    )


def figures(result: Result) -> InputFigures:
    found = InputFigures.of(result.measurement)
    assert found is not None
    return found


def test_the_verdict_says_how_long_the_step_waited_and_what_the_model_alone_runs_at() -> None:
    result = loop_result()
    assert figures(result).verdict() == (
        "input-bound: the step waited 63% of the time for data; the model alone runs 2.7x faster"
    )
    assert figures(loop_result(wait=0.01, synthetic_step_s=0.09)).verdict() == (
        "partly input-bound: the step waited 10% of the time for data; the model alone runs "
        "1.1x faster"
    )
    assert figures(loop_result(wait=0.001, synthetic_step_s=0.05)).verdict() == (
        "not input-bound (the step waited 1% of the time for data), yet the model alone runs "
        "2.0x faster: the step itself ran slower beside its loader (its workers take the "
        "step's cores, or the batch is copied again)"
    )
    assert figures(loop_result(wait=0.001, synthetic_step_s=0.1)).verdict() == (
        "not input-bound: the step waited 1% of the time for data; the model alone runs no faster"
    )
    assert InputFigures.of(Measurement(8, (Sample(0.1),))) is None


@pytest.mark.parametrize(
    ("loader", "fields", "cuda", "fixes"),
    [
        (LOOP, {}, False, ["num_workers > 0 (with 0, each batch is made between two steps)"]),
        (
            LoaderSetting("D", workers=1),
            {"cpus": 4},
            False,
            ["more workers (num_workers=1 of 4 CPUs)"],
        ),
        (
            LoaderSetting("D", workers=2, prefetch_factor=2),
            {},
            False,
            ["cheaper transforms (2 workers already use every CPU)"],
        ),
        (
            LoaderSetting("D", workers=2),
            {"worker_cpu": 0.1},
            False,
            [
                "more workers (num_workers=2 used 0.1 cores' worth of CPU: they wait on "
                "something else, such as storage)"
            ],
        ),
        (
            LoaderSetting("D"),
            {},
            False,
            ["a DataLoader with workers (this iterable makes each batch between steps)"],
        ),
        # nothing to fix where nothing is waited for, and pinned memory only on CUDA
        (LOOP, {"wait": 0.001, "copy_s": 0.02}, False, []),
        (
            LOOP,
            {"wait": 0.001, "copy_s": 0.02},
            True,
            ["pin_memory=True (copying the batch took 20% of the time, from pageable memory)"],
        ),
        (
            LoaderSetting("D", workers=4),
            {"wait": 0.001, "first_batch_s": 2.0, "batches": 100, "cpus": 8},
            False,
            [
                "persistent_workers=True (each pass waits 2.00 s for its workers to start, 20% of a pass)"
            ],
        ),
        (
            LoaderSetting("D", workers=4, persistent_workers=True),
            {"wait": 0.001, "first_batch_s": 2.0, "batches": 100},
            False,
            [],
        ),
    ],
)
def test_the_fixes_named_are_those_the_figures_point_at(
    loader: LoaderSetting, fields: dict[str, Any], cuda: bool, fixes: list[str]
) -> None:
    fields = dict(fields)
    wait = fields.pop("wait", 0.063)
    assert figures(loop_result(wait=wait, loader=loader, **fields)).fixes(loader, cuda) == fixes


def test_spiky_waits_point_at_a_deeper_prefetch() -> None:
    loader = LoaderSetting("D", workers=1, prefetch_factor=2)
    result = loop_result(loader=loader, cpus=4)
    assert result.measurement is not None
    spiky = dataclasses.replace(
        result.measurement,
        samples=tuple(
            dataclasses.replace(s, phases={"wait": (0.0, 0.0, 0.0, 0.252)})
            for s in result.measurement.samples
        ),
    )
    assert InputFigures.of(spiky) is not None
    assert InputFigures.of(spiky).fixes(loader, False)[-1] == (  # type: ignore[union-attr]
        "a larger prefetch_factor (now 2: the waits come in spikes)"
    )


def regressed() -> Result:
    comparison = Comparison(
        metric="throughput",
        baseline=160.0,
        current=80.0,
        change=0.5,
        threshold=0.3,
        verdict=Verdict.REGRESSED,
        p_value=0.004,
        baseline_samples=9,
        current_samples=3,
    )
    decision = Decision(
        verdict=Verdict.REGRESSED,
        throughput=comparison,
        baseline_file="baselines/cpu-test-2t/test_loop.json",
        failed=True,
    )
    return loop_result(wait=0.071, synthetic_step_s=0.029, decision=decision)


def test_a_regressed_loop_names_its_input_wait_under_its_throughput() -> None:
    lines = explain.failure(regressed()).splitlines()
    assert lines[0] == "cnnperf: train_loop sleepy bs=8 opt=sgd regressed (throughput)"
    assert lines[1].startswith("  throughput  80.0 images/s now, 160 images/s in the baseline")
    below = lines.index(next(line for line in lines if line.startswith("  input")))
    assert lines[below] == (
        "  input       input-bound: the step waited 71% of the time for data; the model alone "
        "runs 3.4x faster"
    )
    assert all(line.startswith("            ") for line in lines[2:below])


def test_the_reports_show_the_wait_share_and_the_verdict() -> None:
    result = regressed()
    row = table.row(result)
    assert row.input_wait == "71%"
    assert row.notes[-1] == (
        "input-bound: the step waited 71% of the time for data; the model alone runs 3.4x "
        "faster; try num_workers > 0 (with 0, each batch is made between two steps); first "
        "batch after 50.0 ms (not gated)"
    )
    text = markdown.render([result])
    assert "| input wait |" in text
    assert (
        "(train_loop sleepy bs=8): throughput -50.0% (fails below -30%); "
        "input-bound: the step waited 71% of the time for data; the model alone runs 3.4x "
        "faster"
    ) in text
    assert "waited 71% for input" in explain.headline(result)


def test_the_benchmark_json_carries_the_loaders_figures() -> None:
    pytest.importorskip("pytest_benchmark")
    entry = benchmark_json.benchmark(loop_result(), several=False)
    assert entry is not None
    extra = entry["extra_info"]
    assert extra["input_wait_share"] == pytest.approx(0.63)
    assert extra["first_batch_s"] == pytest.approx(0.05)
    assert extra["synthetic_images_per_second"] == pytest.approx(8 / 0.037)
    assert extra["input_bound"] == "input-bound"


def test_an_epoch_takes_the_loops_throughput_and_its_workers_start_up() -> None:
    plain = loop_result()
    restarting = loop_result(loader=LoaderSetting("D", workers=4), first_batch_s=3.0)
    kept = loop_result(loader=LoaderSetting("D", workers=4, persistent_workers=True))
    seconds = [p.seconds for p in epoch.project([plain, restarting, kept], 8000)[0]]
    assert seconds == pytest.approx([100.0, 103.0, 100.0])
    assert epoch.lines([plain], 8000, None)[0] == (
        "Time per epoch of 8,000 images at the measured throughput (data loading included: "
        "the loops' end-to-end throughput)"
    )


# ---- through pytest ----

LOOP_TEST = """
import torch
from torch.utils.data import DataLoader, Dataset
from models import Sleepy


class Indexed(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        return torch.rand(3, 8, 8), index % 10


def test_loop(cnnperf):
    cnnperf.train_loop(Sleepy(name="a"), DataLoader(Indexed(), batch_size=4, shuffle=True))


def test_named(cnnperf):
    loader = DataLoader(Indexed(), batch_size=4, num_workers=0)
    cnnperf.train_loop(Sleepy(name="b"), loader, name="pipeline")
"""


def waiting(target: Any, i: int, sample: Sample) -> Sample:
    """A scripted sample of a loop whose model alone takes 2 ms a step: the rest is waiting."""
    step = sample.step_time_s
    return dataclasses.replace(
        sample,
        phases={"wait": (step - 0.002,), "copy": (0.0,)},
        loading=loading(step - 0.002, synthetic_step_s=0.002),
    )


@pytest.fixture
def loops(scripted_project: pytest.Pytester, scripted: Scripted) -> pytest.Pytester:
    scripted.script.decorate = waiting
    scripted_project.makepyfile(test_loop=LOOP_TEST)
    result = scripted_project.runpytest("--cnnperf", "--cnnperf-save")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "saved*test_loop*train_loop Sleepy bs=4 Indexed workers=0 *80%*",
            "saved*test_named*train_loop pipeline bs=4 *80%*",
        ]
    )
    return scripted_project


def test_an_unchanged_loop_passes(loops: pytest.Pytester) -> None:
    result = loops.runpytest("--cnnperf")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*regressed*")
    result.stdout.fnmatch_lines(["*input wait*", "*test_loop*80%*"])


def test_a_loader_twice_as_slow_fails_as_a_throughput_regression_naming_the_wait(
    loops: pytest.Pytester, scripted: Scripted
) -> None:
    scripted.slow_down("test_named", 2.0)
    result = loops.runpytest("--cnnperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnnperf: train_loop pipeline bs=4 opt=sgd regressed (throughput)",
            "*  throughput  * images/s now, * images/s in the baseline: -*% (fails below -30%)",
            "*  input       input-bound: the step waited 90% of the time for data; the model "
            "alone runs 10.0x faster",
        ]
    )


def test_a_loader_that_is_not_iterable_fails_its_test(scripted_project: pytest.Pytester) -> None:
    scripted_project.makepyfile(
        test_bad="""
        from models import Sleepy

        def test_bad(cnnperf):
            cnnperf.train_loop(Sleepy(), 42)
        """
    )
    result = scripted_project.runpytest("--cnnperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cnnperf: loader=42 is not iterable; train_loop reads*"])


@pytest.mark.usefixtures("one_thread")
def test_a_loader_that_sleeps_far_longer_than_its_step_is_input_bound(
    project: pytest.Pytester,
) -> None:
    """Real timing, a margin of ten: each batch sleeps 40 ms, the tiny step takes a few."""
    project.makepyfile(
        test_real=textwrap.dedent(
            """
            import time

            import torch
            from torch import nn
            from torch.utils.data import DataLoader, Dataset


            class Slow(Dataset):
                def __len__(self):
                    return 256

                def __getitem__(self, index):
                    time.sleep(0.01)
                    return torch.rand(3, 8, 8), index % 4


            def test_real(cnnperf):
                net = nn.Sequential(nn.Flatten(), nn.Linear(192, 4))
                result = cnnperf.train_loop(net, DataLoader(Slow(), batch_size=4), steps=3)
                loading = result.measured.samples[0].loading
                assert loading is not None and loading.seeded
            """
        )
    )
    result = project.runpytest("--cnnperf", "--cnnperf-effort=quick")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*note: test_real: input-bound: the step waited *% of the time*"])


def test_an_in_process_loop_ends_its_loaders_workers_with_its_samples(
    project: pytest.Pytester,
) -> None:
    """The loop's workers end when its samples do, not at some later garbage collection,
    which would wait seconds on each in whatever test it fell in."""
    project.makepyfile(
        test_workers=textwrap.dedent(
            """
            import torch
            from torch import nn
            from torch.utils.data import DataLoader, TensorDataset


            def test_workers(cnnperf):
                data = TensorDataset(torch.rand(64, 3, 8, 8), torch.arange(64) % 4)
                net = nn.Sequential(nn.Flatten(), nn.Linear(192, 4))
                cnnperf.train_loop(net, DataLoader(data, batch_size=4, num_workers=1), steps=3)
            """
        )
    )
    others = set(multiprocessing.active_children())
    result = project.runpytest("--cnnperf", "--cnnperf-effort=quick")
    result.assert_outcomes(passed=1)
    assert set(multiprocessing.active_children()) - others == set()


BAD_LOADERS = """
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Dicts(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return {"image": torch.rand(3, 8, 8), "label": i % 4}


def net():
    return nn.Sequential(nn.Flatten(), nn.Linear(192, 4))


def test_dicts(cnnperf):
    cnnperf.train_loop(net(), DataLoader(Dicts(), batch_size=2))


def test_empty(cnnperf):
    cnnperf.train_loop(net(), [])


def test_images_alone(cnnperf):
    cnnperf.train_loop(net(), [torch.randn(8, 3, 8, 8) for _ in range(20)])


def test_unpacked(cnnperf):
    loader = DataLoader(Dicts(), batch_size=2)
    result = cnnperf.train_loop(net(), loader, unpack=("image", "label"), steps=3)
    assert result.measured.samples[0].loading is not None


def test_unpacked_by_a_function(cnnperf):
    loader = DataLoader(Dicts(), batch_size=2)
    cnnperf.train_loop(net(), loader, unpack=lambda batch: (batch["image"], batch["label"]))
"""


@pytest.mark.usefixtures("one_thread")
def test_each_loader_trains_or_fails_its_test_with_its_own_fault_and_no_traceback(
    project: pytest.Pytester,
) -> None:
    """The issue's three loaders: a DataLoader of dicts fails in its sample naming the fix from
    its keys, and trains with ``unpack`` (keys or a callable, in-process); an empty list and a
    list of images alone fail at the call, before any batch size is asked for."""
    project.makepyfile(test_bad=BAD_LOADERS)
    result = project.runpytest("--cnnperf", "--cnnperf-effort=quick")
    result.assert_outcomes(passed=2, failed=3)
    assert manual_block("## Bad input", "text").strip() in result.outlines
    result.stdout.fnmatch_lines(
        [
            "cnnperf: the list is empty: len() says it yields no batch; train_loop times train "
            "steps on the batches it yields, at least 3 a pass; fill it with at least 3 (images, "
            "targets) batches",
        ]
    )
    assert (
        "cnnperf: the list yielded a Tensor of shape (8, 3, 8, 8): images without targets, not "
        "an (images, targets) pair; train_loop trains on images with their targets, which the "
        "loss needs; make each batch of the list a pair, as in [(images, targets), ...], with "
        "targets such as torch.randint(0, num_classes, (8,)) for random labels"
    ) in result.outlines
    assert not [line for line in result.outlines if "Traceback" in line or "loader.py" in line]


# ---- the manual's example ----

MANUAL = Path(__file__).parent.parent / "docs" / "loader.md"


def manual_example() -> str:
    text = MANUAL.read_text(encoding="utf-8")
    return text.split("```python\n", 1)[1].split("```", 1)[0]


def manual_block(section: str, language: str = "python") -> str:
    """The first code block of ``language`` under the manual's ``section`` heading."""
    text = MANUAL.read_text(encoding="utf-8").split(f"\n{section}\n", 1)[1]
    return text.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_manuals_example_reads_torchvisions_fake_images_through_its_transforms() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(manual_example(), str(MANUAL), "exec"), namespace)
    loader = DataLoader(namespace["images"](), batch_size=4, shuffle=True)
    feed = Feed(loader, 4)
    feed.read()
    images, targets = feed.host
    assert images.shape == (4, 3, 224, 224)
    assert images.dtype == torch.float32
    assert targets.shape == (4,)


def test_the_manuals_dict_example_reads_its_photos_through_unpack() -> None:
    namespace: dict[str, Any] = {}
    example = manual_block("## Batches that are not pairs")
    exec(compile(example, str(MANUAL), "exec"), namespace)
    feed = Feed(namespace["photos"](), 32, ("image", "label"))
    feed.read()
    images, targets = feed.host
    assert images.shape == (32, 3, 64, 64)
    assert targets.shape == (32,)


def test_the_manuals_examples_have_the_keys_they_say(
    scripted_project: pytest.Pytester, scripted: Scripted
) -> None:
    scripted.script.decorate = waiting
    scripted_project.makepyfile(
        test_input=manual_example(), test_photos=manual_block("## Batches that are not pairs")
    )
    result = scripted_project.runpytest("--cnnperf", "--cnnperf-save")
    result.assert_outcomes(passed=4)

    def keys(module: str) -> set[str]:
        baselines = list((scripted_project.path / "baselines").glob(f"*/{module}.json"))
        entries = json.loads(baselines[0].read_text())["entries"]
        return {key for test in entries.values() for key in test}

    assert keys("test_input") == {
        "train_loop resnet18 bs=32 FakeData workers=0 opt=sgd",
        "train_loop resnet18 bs=32 FakeData workers=4 opt=sgd",
        "train_loop resnet18-pipeline bs=32 amp=bf16 channels_last opt=sgd",
    }
    assert keys("test_photos") == {"train_loop resnet18 bs=32 Photos workers=0 opt=sgd"}
    assert "`train_loop resnet18 bs=32 Photos workers=0 opt=sgd`" in MANUAL.read_text()


class Shrinking:
    """A re-iterable whose every pass is one batch shorter than the one before."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self.count -= 1
        return iter(pairs(self.count))


def test_a_loader_whose_passes_keep_changing_length_is_refused() -> None:
    workload = build_loop(tiny(), Shrinking(12), LoopSpec(batch_size=2), CPU)
    loop = workload.loop
    assert loop is not None
    with pytest.raises(ValueError) as raised:
        time_block(loop.phases, CpuClock(), 30, window=loop)
    assert re.sub(r"after \d+ batches", "after N batches", str(raised.value)) == (
        "the Shrinking ended inside the timed steps 4 times, its last pass after N batches: "
        "its passes change length, so the timed steps cannot be kept inside one; give "
        "train_loop a loader whose passes keep their length, such as a DataLoader over a "
        "map-style dataset"
    )
