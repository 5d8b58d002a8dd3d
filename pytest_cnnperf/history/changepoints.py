"""Change points of a series of runs: where its level stepped, how far, and how sure we are.

Detection is ``ruptures``' PELT search for shifts of the mean of the log values (so a step is
relative), with a penalty of ``4 sigma^2 ln n``, ``sigma`` the run-to-run noise estimated
robustly from the differences of neighbouring runs (their median absolute deviation), so one
step does not inflate it. ruptures finds where the series most likely changed; it says nothing
of whether the change is real. Each candidate is therefore tested on its own: among the runs
between its neighbouring change points, the largest mean shift any split could show is compared
with the largest shift the same runs show in random order (a permutation test). Testing the two
sides of the split that was *chosen* to differ most (a t-test or Mann-Whitney test of before and
after) would be optimistic: every series has some split that looks significant. A candidate
needs a p-value of at most ``ALPHA`` and a step of at least ``MIN_STEP``; the weakest failing
one is dropped and the rest tested again, until all hold.

Why ruptures (maintained, numpy and scipy only) rather than an E-divisive implementation:
docs/history.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: a change point's p-value bound and least step; permutations tested; fewest runs a side
ALPHA = 0.01
MIN_STEP = 0.02
PERMUTATIONS = 999
MIN_SIZE = 3


@dataclass(frozen=True)
class ChangePoint:
    """A step in a series: the level of the runs before it and from ``index`` on."""

    #: the first run after the step (0-based position in the series)
    index: int
    #: medians of the values between the neighbouring change points, before and after
    before: float
    after: float
    #: permutation p-value of a shift this large in those runs
    p_value: float

    @property
    def change(self) -> float:
        """``after / before - 1``."""
        return self.after / self.before - 1


def noise(x: np.ndarray) -> float:
    """Run-to-run standard deviation of ``x``, from its neighbours' differences (robust to a
    few steps)."""
    if len(x) < 3:
        return 0.0
    diffs = np.diff(x)
    return float(np.median(np.abs(diffs - np.median(diffs))) / (0.6745 * math.sqrt(2)))


def _max_shift(windows: np.ndarray) -> np.ndarray:
    """For each row: the largest ``l2`` cost reduction of one split into two segments of at
    least ``MIN_SIZE`` (``n_l n_r / n (mean_l - mean_r)^2``)."""
    n = windows.shape[1]
    t = np.arange(MIN_SIZE, n - MIN_SIZE + 1)
    sums = np.cumsum(windows, axis=1)
    total = sums[:, -1:]
    left = sums[:, t - 1] / t
    right = (total - sums[:, t - 1]) / (n - t)
    gain = t * (n - t) / n * (left - right) ** 2
    result: np.ndarray = gain.max(axis=1)
    return result


def p_value(x: np.ndarray, rng: np.random.Generator) -> float:
    """How often the runs in random order show a split as large as ``x`` does."""
    observed = _max_shift(x[None, :])[0]
    shuffled = rng.permuted(np.tile(x, (PERMUTATIONS, 1)), axis=1)
    hits = int(np.sum(_max_shift(shuffled) >= observed * (1 - 1e-12)))
    return (hits + 1) / (PERMUTATIONS + 1)


def candidates(x: np.ndarray) -> list[int]:
    """ruptures' PELT change points of ``x`` (indices of the first value after each)."""
    import ruptures

    sigma = noise(x)
    if sigma == 0:
        sigma = max(float(np.std(x)), 1e-12) / 10  # a noiseless series: any step stands out
    penalty = 4 * sigma**2 * math.log(len(x))
    found = ruptures.Pelt(model="l2", min_size=MIN_SIZE, jump=1).fit(x).predict(pen=penalty)
    return [int(i) for i in found[:-1]]  # the last "change point" is the series' end


def find(values: Sequence[float]) -> list[ChangePoint]:
    """The change points of ``values`` (positive figures such as throughputs), oldest first."""
    data = np.asarray(values, dtype=float)
    if len(data) < 2 * MIN_SIZE or np.any(data <= 0):
        return []
    x = np.log(data)
    rng = np.random.default_rng(0)  # the same history, the same change points
    kept = candidates(x)
    while kept:
        bounds = [0, *kept, len(x)]
        tested = []
        for i, index in enumerate(kept):
            lo, hi = bounds[i], bounds[i + 2]
            p = p_value(x[lo:hi], rng)
            point = ChangePoint(
                index=index,
                before=float(np.median(data[lo:index])),
                after=float(np.median(data[index:hi])),
                p_value=p,
            )
            tested.append(point)
        failing = [c for c in tested if c.p_value > ALPHA or abs(c.change) < MIN_STEP]
        if not failing:
            return tested
        weakest = max(failing, key=lambda c: (c.p_value, -abs(c.change)))
        kept.remove(weakest.index)
    return []
