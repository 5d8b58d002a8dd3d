"""Robust comparison of two sets of per-process step times.

Each value is one sample (a fresh process's median step time); consecutive steps inside one
process are not independent, so they are never the unit of the test. The shift between the two
sets is estimated on log-times with the Hodges-Lehmann estimator (the median of all pairwise
differences), bounded with the exact distribution of the Mann-Whitney U statistic, and tested
with scipy's one-sided Mann-Whitney U test. All of it is distribution-free: skewed timing noise
and the odd slow process do not break it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Shift:
    """How much slower ``current`` is than ``baseline``, as a ratio of step times."""

    #: Hodges-Lehmann estimate of current / baseline
    ratio: float
    #: lower confidence bound of the ratio at ``1 - alpha`` (``0.0`` when too few samples)
    low: float
    #: upper confidence bound of the ratio at the "ok" confidence (``inf`` when too few samples)
    high: float
    #: one-sided p-values of "current is slower" and "current is faster"
    p_slower: float
    p_faster: float


@functools.cache
def _u_cdf(m: int, n: int) -> tuple[float, ...]:
    """Exact null CDF of the Mann-Whitney U statistic for sample sizes ``m`` and ``n``.

    Counts, for each u, the ways ``m`` values can rank among ``m + n`` with ``u`` pairs in
    favour (the classic recursion over the largest observation)."""
    # ways[i][j] is the count polynomial for sizes (i, j), as an array over u
    ways = [[np.ones(1, dtype=float) for _ in range(n + 1)] for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            # the largest value comes from the first set (adds j pairs) or from the second
            a = np.concatenate([np.zeros(j), ways[i - 1][j]])
            b = ways[i][j - 1]
            size = max(a.size, b.size)
            ways[i][j] = np.pad(a, (0, size - a.size)) + np.pad(b, (0, size - b.size))
    counts = ways[m][n]
    return tuple(np.cumsum(counts) / counts.sum())


def _rank_of_bound(m: int, n: int, alpha: float) -> int:
    """The largest ``k`` with ``P(U <= k - 1) <= alpha`` (0 if even ``k = 1`` is too likely)."""
    cdf = _u_cdf(m, n)
    k = 0
    while k < len(cdf) and cdf[k] <= alpha:
        k += 1
    return k


def compare(
    baseline: Sequence[float], current: Sequence[float], alpha: float, ok_confidence: float
) -> Shift:
    """Compare two sets of positive durations. Needs at least one value on each side."""
    from scipy.stats import mannwhitneyu

    if len(baseline) == 0 or len(current) == 0:
        raise ValueError("comparing step times needs at least one sample on each side")
    b = np.log(np.asarray(baseline, dtype=float))
    c = np.log(np.asarray(current, dtype=float))
    diffs = np.sort(np.subtract.outer(c, b).ravel())
    total = diffs.size
    k_low = _rank_of_bound(c.size, b.size, alpha)
    k_high = _rank_of_bound(c.size, b.size, 1 - ok_confidence)
    low = math.exp(diffs[k_low - 1]) if k_low else 0.0
    high = math.exp(diffs[total - k_high]) if k_high else math.inf
    if c.size + b.size > 2:
        p_slower = float(mannwhitneyu(c, b, alternative="greater").pvalue)
        p_faster = float(mannwhitneyu(c, b, alternative="less").pvalue)
    else:
        p_slower = p_faster = 1.0
    return Shift(
        ratio=math.exp(float(np.median(diffs))),
        low=low,
        high=high,
        p_slower=p_slower,
        p_faster=p_faster,
    )


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))
