"""``train_loop``'s work: the user's loader feeding the train step, batch by batch.

A loop's step is ``wait`` (the next batch, read through ``unpack=`` where given), ``copy`` (to
the device, ``non_blocking`` on CUDA) and ``train_step``'s phases. The cold step starts the
loader and times its first batch; the warm-up brings the workers' queue to its steady state.
The timed block lies inside passes (:class:`Loop` is the timing's ``Window``): a pass's short
last batch is never timed, its end and restart come between timed parts, and each pass starts
seeded. Afterwards the same step on the first batch, already on the device, times the model alone.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model.parts import Loading
from . import numbers
from .batches import PAIRS, Unpacker, described, is_dataloader, length, loader_name, unpacked
from .cpuload import CpuSnapshot
from .flops import Counts
from .timing import Clock, Phase, TimedSteps, TimingPolicy, time_steps
from .workload import Batch, TrainSpec, Workload, build_train

#: timed parts a sample may lose to passes that end sooner than the last one did
VOIDED_PARTS = 3


@dataclass(frozen=True)
class LoopSpec(TrainSpec):
    """A ``train_loop`` benchmark's step: a train step on the loader's batches."""

    #: the images' size is the loader's: a train step given its batch makes none of this size
    image_size: tuple[int, int] = (1, 1)
    #: timed steps per sample; ``None``: as many as the timing policy asks for
    steps: int | None = None
    #: how a batch that is not an (images, targets) pair is read; not part of the key
    unpack: Unpacker | None = None


def _needed(loader: object) -> int:
    """Batches a pass needs for a step to be timed in it: the rewarm after its restart, the
    timed one, and the pass's last (maybe short, never timed)."""
    return _rewarm(loader) + 2


def _rewarm(loader: object) -> int:
    """Steps after a restart before timing goes on: the workers' queue filled again, and one
    beyond it (the first batch of a pass pays for the restart)."""
    workers = int(getattr(loader, "num_workers", 0) or 0) if is_dataloader(loader) else 0
    prefetch = int(getattr(loader, "prefetch_factor", None) or 2)
    return workers * prefetch + 1


def first_look(loader: object, unpack: Unpacker | None) -> str | None:
    """What is wrong with ``loader`` before it is read (``None``: nothing seen): empty by its
    ``len()``; a list whose first batch gives no (images, targets) pair."""
    batches = length(loader)
    if batches == 0:
        needed = _needed(loader)
        if is_dataloader(loader):
            fix = f"give it a dataset of at least {needed} batches' worth of items"
        elif isinstance(loader, Sequence):
            fix = f"fill it with at least {needed} (images, targets) batches"
        else:
            fix = f"make it yield at least {needed} (images, targets) batches a pass"
        return (
            f"{loader_name(loader)} is empty: len() says it yields no batch; train_loop times "
            f"train steps on the batches it yields, at least {needed} a pass; {fix}"
        )
    if isinstance(loader, Sequence) and batches:  # a list's first batch, read without a pass
        try:
            unpacked(loader, loader[0], unpack)
        except (TypeError, ValueError) as exc:
            return str(exc)
    return None


def _worker_died(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's word that a DataLoader worker process died."""
    text = str(exc)
    return "DataLoader worker" in text and (
        "exited unexpectedly" in text or "killed by signal" in text
    )


def workers_died(name: str, exc: BaseException) -> str:
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"a worker process of {name} died ({said}); train_loop times a loader whose workers "
        "live through the measurement. Run it with num_workers=0 to see the dataset's own "
        "error; a worker killed by a bus error ran out of shared memory (raise /dev/shm: "
        "docker run --shm-size=8g or --ipc=host), and one killed by the system ran out of "
        "memory (use fewer workers or a smaller prefetch_factor)"
    )


class Feed:
    """The user's iterable as the loop reads it: a pass at a time, each pass seeded, the next
    one started when one ends."""

    def __init__(self, loader: Any, batch_size: int, unpack: Unpacker | None = None) -> None:
        self.loader = loader
        self.name = loader_name(loader)
        self.batch_size = batch_size
        self.unpack = unpack
        #: batches in a pass: what ``len()`` says, then what a pass that ended held
        self.length = length(loader)
        #: worker processes (a DataLoader's)
        self.workers = int(getattr(loader, "num_workers", 0) or 0) if is_dataloader(loader) else 0
        #: steps after a restart before timing goes on, and batches a pass needs
        self.rewarm = _rewarm(loader)
        self.needed = _needed(loader)
        self.iterator: Any = None
        self.position = 0  # batches read in this pass
        self.passes = 0  # passes started after the first: the restarts
        self.seeded = False
        self.first_batch_s: float | None = None
        self.host: Any = None  # the batch just read, on the host
        self.in_part = False  # inside a timed part
        self.crossed = False  # a pass ended inside one

    def room(self) -> int | None:
        """Steps that can be timed before the pass's last batch; ``None``: unknown."""
        return None if self.length is None else self.length - self.position - 1

    def read(self) -> None:
        """The ``wait`` phase: the next batch (the first read starts the loader and times its
        first batch); a loader refused here is closed, not left to the traceback."""
        try:
            if self.iterator is None:
                started = time.perf_counter()
                self._begin()
                self.host = self._next()
                self.first_batch_s = time.perf_counter() - started
                self._check_first(self.host)
                self._check_length()
                return
            self.host = self._next()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the loader's workers now, not whenever a garbage collection frees the iterator
        (a DataLoader's iterator shuts its workers down when dropped)."""
        self.iterator = None

    def restart(self) -> None:
        """Start the next pass now, leaving what is left of this one."""
        self.passes += 1
        self._begin()

    def _begin(self) -> None:
        self.seeded = self._seed()
        self.position = 0
        self.iterator = None  # a non-persistent loader's workers end before the next start
        self.iterator = iter(self.loader)

    def _seed(self) -> bool:
        """Seed a DataLoader's generator (given one where it has none) for this pass: its
        sampler and workers' seeds draw from it; ``False``: an iterable of its own order."""
        loader = self.loader
        if not is_dataloader(loader):
            return False
        import torch

        if getattr(loader, "generator", None) is None:
            loader.generator = torch.Generator()
        samplers: list[Any] = [
            getattr(loader, "sampler", None),
            getattr(getattr(loader, "batch_sampler", None), "sampler", None),
        ]
        for sampler in samplers:
            if hasattr(sampler, "generator") and sampler.generator is None:
                sampler.generator = loader.generator
        loader.generator.manual_seed(numbers.SEED + self.passes)
        return True

    def _next(self) -> Any:
        try:
            batch = self._fetch()
        except StopIteration:
            self._ended()
            try:
                batch = self._fetch()
            except StopIteration:
                raise ValueError(self._read_once()) from None
        self.position += 1
        return unpacked(self.loader, batch, self.unpack)

    def _fetch(self) -> Any:
        try:
            return next(self.iterator)
        except RuntimeError as exc:
            if _worker_died(exc):
                raise RuntimeError(workers_died(self.name, exc)) from None
            raise

    def _ended(self) -> None:
        """A pass ended: learn its length, and start the next one (a pass that ends inside a
        timed part makes the part void)."""
        if self.position == 0 and self.passes:
            raise ValueError(self._read_once())
        if self.position == 0:
            raise ValueError(
                f"{self.name} is empty: its first pass yielded no batch; {PAIRS}, at least "
                f"{self.needed} batches a pass; give it a dataset of at least "
                f"{self.needed * self.batch_size} items at batch_size={self.batch_size}"
            )
        self.length = self.position
        self._check_length()
        self.crossed = self.crossed or self.in_part
        self.restart()

    def _read_once(self) -> str:
        return (
            f"{self.name} ended after {self.length} batches and yields none when read again: "
            "iter() of a generator or an iterator returns itself, so it can be read once, and "
            f"a sample reads the loader in several passes; {PAIRS} that can be read again (a "
            "DataLoader, a list) or that never ends; give train_loop a DataLoader or a list of "
            "batches instead"
        )

    def _check_length(self) -> None:
        length = self.length
        if length is None or length >= self.needed:
            return
        workers = self.rewarm - 1  # the batches the workers prepare ahead
        refill = (
            f"{self.rewarm} to fill its workers' queue of {workers} batches again after a restart"
            if workers
            else "1 after a restart"
        )
        raise ValueError(
            f"{self.name} yields {length} batch{'' if length == 1 else 'es'} a pass, too few to "
            f"time a step in it: a pass needs at least {self.needed} ({refill}, 1 timed, and "
            "the pass's last, which may be short and is never timed); use a dataset of at least "
            f"{self.needed * self.batch_size} items at batch_size={self.batch_size}"
            + (", or fewer workers" if workers else "")
        )

    def _check_first(self, batch: Any) -> None:
        import torch

        images = batch[0]
        if not isinstance(images, torch.Tensor) or images.dim() < 2:
            raise TypeError(
                f"{self.name} yielded a pair whose images are {described(images)}, not a tensor "
                f"of a batch of images; {PAIRS}; stack the images into one tensor (N, C, H, W), "
                "as the DataLoader's default collate does"
            )
        if len(images) != self.batch_size:
            raise ValueError(
                f"{self.name} yielded a first batch of {len(images)} images where its batch "
                f"size is {self.batch_size}; a pass's first batch is a whole one; give "
                "train_loop's batch_size= the images each batch holds (a DataLoader says it "
                "itself), or a dataset of at least one whole batch"
            )


class Loop:
    """The loop's phases around a train step, the timing's ``Window`` over the loader's passes,
    and the figures of the loader a sample keeps."""

    def __init__(
        self, feed: Feed, batch: Batch, train: Workload, device: Any, spec: LoopSpec
    ) -> None:
        self.feed = feed
        self.batch = batch
        self.device = device
        self.spec = spec
        self.train_phases = train.phases
        self.phases: list[Phase] = [("wait", feed.read), ("copy", self._copy), *train.phases]
        #: the first batch on the device: what the model alone is timed on
        self.first: tuple[Any, Any] | None = None
        self._restarts_kept = 0
        #: the workers' CPU seconds and the clock when the timed steps began
        self._workers_from: tuple[float, float] | None = None
        self._voided = 0  # timed parts a pass's end made void
        self._layout: Any = None  # channels_last: the memory format the batch is put in
        if spec.channels_last:
            import torch

            self._layout = torch.channels_last

    def close(self) -> None:
        """The samples are over: the loader's workers end now (in-process runs; a sample
        process takes them along when it exits)."""
        self.feed.close()

    def _copy(self) -> None:
        """The ``copy`` phase: the batch just read to the device (``non_blocking`` on CUDA: a
        pinned batch's copy is queued on the stream, a pageable one's is staged by CUDA)."""
        images, targets = self.feed.host
        cuda = self.device.type == "cuda"
        images = images.to(self.device, non_blocking=cuda)
        if self._layout is not None:
            images = images.contiguous(memory_format=self._layout)
        if hasattr(targets, "to"):
            targets = targets.to(self.device, non_blocking=cuda)
        self.batch.images, self.batch.targets = images, targets
        if self.first is None:
            self.first = (images, targets)

    # the timing's Window

    def steps(self, wanted: int) -> int:
        return self.spec.steps or wanted

    def part(self, left: int) -> int:
        feed = self.feed
        if self._workers_from is None:
            self._workers_from = (children_cpu_s(), time.perf_counter())
        room = feed.room()
        if room is not None and room < 1:
            feed.restart()
            for _ in range(feed.rewarm):
                for _, run in self.phases:
                    run()
            room = feed.room()
        feed.in_part = True
        return left if room is None else max(1, min(left, room))

    def crossed(self) -> bool:
        feed = self.feed
        crossed, feed.in_part, feed.crossed = feed.crossed, False, False
        self._voided += crossed
        if self._voided > VOIDED_PARTS:
            raise ValueError(
                f"{feed.name} ended inside the timed steps {self._voided} times, its last pass "
                f"after {feed.length} batches: its passes change length, so the timed steps "
                "cannot be kept inside one; give train_loop a loader whose passes keep their "
                "length, such as a DataLoader over a map-style dataset"
            )
        return crossed

    # what a sample keeps

    def figures(self, timed: TimedSteps, clock: Clock, policy: TimingPolicy) -> Loading:
        feed = self.feed
        wait, copy = timed.phases.get("wait", (0.0,)), timed.phases.get("copy", (0.0,))
        worker_cpu = None  # the workers' CPU while timed, read before the model alone runs
        if self._workers_from is not None and feed.workers and os.path.exists("/proc/self"):
            cpu, started = self._workers_from
            worker_cpu = max(0.0, children_cpu_s() - cpu) / (time.perf_counter() - started)
        self._workers_from = None
        assert self.first is not None  # the loop ran
        self.batch.images, self.batch.targets = self.first
        # timed as train_step times it: on the CPU the median step, robust to a busy neighbour
        alone = time_steps(
            self.train_phases, clock, policy, per_step_wall=self.device.type != "cuda"
        )
        restarts, self._restarts_kept = feed.passes - self._restarts_kept, feed.passes
        return Loading(
            first_batch_s=feed.first_batch_s or 0.0,
            wait_s=statistics.fmean(wait),
            copy_s=statistics.fmean(copy),
            synthetic_step_s=alone.step_time_s,
            restarts=restarts,
            batches=feed.length,
            seeded=feed.seeded,
            cpus=_cpus(),
            worker_cpu=worker_cpu,
        )


def _cpus() -> int | None:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count()


def build_loop(model: Any, loader: Any, spec: LoopSpec, device: Any) -> Workload:
    """The loop of ``model`` reading ``loader`` on ``device``: its phases, its window over the
    loader's passes, and the step's memory and FLOPs as ``train_step`` measures them."""
    batch = Batch()
    train = build_train(model, spec, device, batch)
    loop = Loop(Feed(loader, spec.batch_size, spec.unpack), batch, train, device, spec)
    on_meta = train.count_on_meta

    def count_on_meta() -> Counts:
        assert on_meta is not None
        assert loop.first is not None
        batch.images, batch.targets = loop.first  # a whole batch, not a pass's short last one
        return on_meta()

    return dataclasses.replace(
        train,
        phases=loop.phases,
        count_on_meta=count_on_meta if on_meta else None,
        # the loader's own operators vary with its random transforms, and each step reads
        # another batch: no exact counts, no first steps' numbers
        countable=False,
        first_steps=None,
        loop=loop,
    )


def counting_workers(snapshot: CpuSnapshot | None) -> CpuSnapshot | None:
    """``snapshot`` with the CPU time of the loader's workers counted as the benchmark's own."""
    if snapshot is None:
        return None
    return dataclasses.replace(snapshot, own_s=snapshot.own_s + children_cpu_s())


def children_cpu_s() -> float:
    """CPU seconds of this process's children: those that ended and were waited for, and those
    running (``/proc/<pid>/stat``'s utime and stime)."""
    times = os.times()
    total = times.children_user + times.children_system
    tick = os.sysconf("SC_CLK_TCK")
    for pid in _children():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, ValueError, IndexError):  # it ended since it was listed
            continue
    return total


def _children() -> list[int]:
    pids: list[int] = []
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return pids
    for task in tasks:
        try:
            pids += [int(pid) for pid in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return pids
