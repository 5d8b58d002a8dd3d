"""A ``train_loop`` benchmark's input figures in words: how much of the time the step waited
for data, what the model alone runs at, the input-bound verdict, and the fixes the measurement
points at (and only those).

The bands on the wait share are the TensorFlow profiler's input-pipeline analysis: under 5% the
input is not the bottleneck, from 20% it is. A step that waited little but ran slower than the
model alone was slowed by its loader in another way: its workers took the step's cores, or the
batch was copied again.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..model import Measurement, units
from ..model.config import LoaderSetting

#: wait shares from which a loop is partly, and then wholly, input-bound
PARTLY, BOUND = 0.05, 0.20
#: the model alone this much faster, with little wait: the step ran slower beside its loader
SLOWED = 1.2
#: a copy taking this share of a CUDA step points at pinned memory
COPY_SHARE = 0.10
#: worker start-up taking this share of a pass points at persistent workers
STARTUP_SHARE = 0.05
#: mean wait over the median wait above which the waits come in spikes
SPIKY = 2.0
#: workers using less than this share of a core each wait on something else than the CPU
COMPUTING = 0.5


@dataclass(frozen=True)
class InputFigures:
    """A loop's input figures over its samples (medians of the samples')."""

    #: the share of a step spent waiting for the next batch, and copying it to the device
    wait_share: float
    copy_share: float
    first_batch_s: float
    #: end-to-end step time, and the same step's on a batch already on the device
    step_s: float
    synthetic_step_s: float
    #: whether the waits come in spikes (a mean well above the median), where steps were kept
    spiky: bool
    batches: int | None
    cpus: int | None
    seeded: bool
    #: cores' worth of CPU the workers used while timed (``None``: not measured)
    worker_cpu: float | None = None

    @classmethod
    def of(cls, m: Measurement | None) -> InputFigures | None:
        """The figures of a ``train_loop`` measurement; ``None`` for any other."""
        if m is None:
            return None
        samples = [(s, s.loading) for s in m.samples if s.loading is not None]
        if not samples:
            return None
        # each step's wait, where the samples kept their steps (a baseline keeps a median)
        waits = [t for s, _ in samples for t in s.phases.get("wait", ())]
        mean_wait = statistics.median(lo.wait_s for _, lo in samples)
        median_wait = statistics.median(waits) if len(waits) > len(samples) else mean_wait
        last = samples[-1][1]
        worker_cpu = [lo.worker_cpu for _, lo in samples if lo.worker_cpu is not None]
        return cls(
            wait_share=statistics.median(lo.wait_s / s.step_time_s for s, lo in samples),
            copy_share=statistics.median(lo.copy_s / s.step_time_s for s, lo in samples),
            first_batch_s=statistics.median(lo.first_batch_s for _, lo in samples),
            step_s=statistics.median(s.step_time_s for s, _ in samples),
            synthetic_step_s=statistics.median(lo.synthetic_step_s for _, lo in samples),
            spiky=mean_wait > SPIKY * median_wait,
            batches=last.batches,
            cpus=last.cpus,
            seeded=all(lo.seeded for _, lo in samples),
            worker_cpu=statistics.median(worker_cpu) if worker_cpu else None,
        )

    @property
    def speedup(self) -> float:
        """How much faster the model alone runs than the loop."""
        return self.step_s / self.synthetic_step_s

    @property
    def bound(self) -> str:
        """``input-bound``, ``partly input-bound`` or ``not input-bound``."""
        if self.wait_share >= BOUND:
            return "input-bound"
        return "partly input-bound" if self.wait_share >= PARTLY else "not input-bound"

    def verdict(self) -> str:
        """``input-bound: the step waited 63% of the time for data; the model alone runs 2.7x
        faster``."""
        waited = f"the step waited {self.wait_share:.0%} of the time for data"
        alone = (
            f"the model alone runs {self.speedup:.1f}x faster"
            if self.speedup >= 1.05
            else "the model alone runs no faster"
        )
        if self.wait_share < PARTLY and self.speedup >= SLOWED:
            return (
                f"not input-bound ({waited}), yet {alone}: the step itself ran slower beside "
                "its loader (its workers take the step's cores, or the batch is copied again)"
            )
        return f"{self.bound}: {waited}; {alone}"

    def fixes(self, loader: LoaderSetting | None, cuda: bool) -> list[str]:
        """The usual fixes the figures point at, each with the figure that points at it."""
        found = []
        workers = loader.workers if loader else None
        if self.wait_share >= PARTLY:
            if workers is None:
                found.append(
                    "a DataLoader with workers (this iterable makes each batch between steps)"
                )
            elif workers == 0:
                found.append("num_workers > 0 (with 0, each batch is made between two steps)")
            elif self.worker_cpu is not None and self.worker_cpu < COMPUTING * workers:
                found.append(
                    f"more workers (num_workers={workers} used {self.worker_cpu:.1f} cores' "
                    "worth of CPU: they wait on something else, such as storage)"
                )
            elif self.cpus is None or workers < self.cpus:
                cpus = f" of {self.cpus} CPUs" if self.cpus else ""
                found.append(f"more workers (num_workers={workers}{cpus})")
            else:
                found.append(f"cheaper transforms ({workers} workers already use every CPU)")
            if workers and self.spiky:
                prefetch = (loader.prefetch_factor if loader else None) or 2
                found.append(f"a larger prefetch_factor (now {prefetch}: the waits come in spikes)")
        if cuda and self.copy_share >= COPY_SHARE and loader and not loader.pin_memory:
            found.append(
                f"pin_memory=True (copying the batch took {self.copy_share:.0%} of the time, "
                "from pageable memory)"
            )
        if workers and loader and not loader.persistent_workers and self.batches:
            share = self.first_batch_s / (self.batches * self.step_s)
            if share >= STARTUP_SHARE:
                found.append(
                    f"persistent_workers=True (each pass waits {units.seconds(self.first_batch_s)}"
                    f" for its workers to start, {share:.0%} of a pass)"
                )
        return found

    def describe(self, loader: LoaderSetting | None, cuda: bool) -> str:
        """The verdict, the fixes it points at, and the time to the first batch."""
        text = self.verdict()
        fixes = self.fixes(loader, cuda)
        if fixes:
            text += "; try " + ", ".join(fixes)
        text += f"; first batch after {units.seconds(self.first_batch_s)} (not gated)"
        if not self.seeded:
            text += "; the iterable's order is its own (not seeded)"
        return text


def note(m: Measurement | None, loader: LoaderSetting | None, device: str | None) -> str | None:
    """A loop's input figures as a note beside its verdict; ``None`` for another benchmark."""
    figures = InputFigures.of(m)
    if figures is None:
        return None
    return figures.describe(loader, cuda=bool(device and device.startswith("cuda")))


def wait_cell(m: Measurement | None) -> str:
    """The wait share as a table shows it: ``63%``; ``-`` for a benchmark without a loader."""
    figures = InputFigures.of(m)
    return f"{figures.wait_share:.0%}" if figures else "-"
