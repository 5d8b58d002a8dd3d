"""Exact, distribution-free comparison of two sets of per-process step times.

Each value is one sample (a fresh process's step time); consecutive steps inside one process are
not independent, so they are never the unit of the test. The shift between the two sets is
estimated on log-times with the Hodges-Lehmann estimator (the median of all pairwise
differences) and bounded with the exact null distribution of the Mann-Whitney U statistic; the
one-sided p-values come from the same distribution, so "significant at alpha" and "the bound
at 1 - alpha excludes no change" are one statement. Nothing here assumes a shape for the noise:
skewed timing noise and the odd slow process do not break it.
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
    #: upper confidence bound of the ratio at ``1 - beta`` (``inf`` when too few samples)
    high: float
    #: exact one-sided p-values of "current is slower" and "current is faster" (ties count
    #: against the claim, so they never make a p-value smaller)
    p_slower: float
    p_faster: float


@functools.lru_cache(maxsize=512)
def null_cdf(m: int, n: int) -> np.ndarray:
    """``P(U <= u)`` for ``u = 0 .. m*n`` under the null (no shift, no ties), for sets of ``m``
    and ``n`` values.

    The counts of U are the coefficients of the Gaussian binomial ``[m+n choose m]_q``, built
    one factor ``(1 - q^(n+j)) / (1 - q^j)`` at a time in one array of ``m*n + 1`` floats. The
    coefficients below ``n + 1`` come from sums alone, so the small lower tails that decisions
    read are as exact as floats allow; upper tails are read through the symmetry
    ``P(U >= u) = P(U <= m*n - u)``."""
    if m < 0 or n < 0:
        raise ValueError(f"sample sizes must be whole numbers >= 0, not {m} and {n}")
    small, large = min(m, n), max(m, n)
    counts = np.zeros(small * large + 1)
    counts[0] = 1.0
    for j in range(1, small + 1):
        top = large + j
        if top < counts.size:  # times (1 - q^top)
            counts[top:] -= counts[:-top].copy()
        for r in range(j):  # divided by (1 - q^j): running sums with stride j
            counts[r::j] = np.cumsum(counts[r::j])
        counts /= top / j  # keeps the total 1: C(large + j, j) / C(large + j - 1, j - 1)
    cdf = np.cumsum(counts)
    cdf /= cdf[-1]
    cdf.setflags(write=False)
    return cdf


def smallest_p(m: int, n: int) -> float:
    """The smallest one-sided p-value ``m`` against ``n`` values can give: ``1 / C(m+n, m)``."""
    return 1.0 / math.comb(m + n, m)


def _rank_of_bound(m: int, n: int, level: float) -> int:
    """The largest ``k`` with ``P(U <= k - 1) <= level`` (0 if even ``k = 1`` is too likely):
    the ``k``-th smallest pairwise difference bounds the shift from below at ``1 - level``."""
    return int(np.searchsorted(null_cdf(m, n), level, side="right"))


def compare(
    baseline: Sequence[float], current: Sequence[float], alpha: float, beta: float
) -> Shift:
    """Compare two sets of positive durations: the shift's lower bound at ``1 - alpha`` and its
    upper bound at ``1 - beta``. Needs at least one value on each side."""
    if len(baseline) == 0 or len(current) == 0:
        raise ValueError("comparing step times needs at least one sample on each side")
    b = np.log(np.asarray(baseline, dtype=float))
    c = np.log(np.asarray(current, dtype=float))
    diffs = np.sort(np.subtract.outer(c, b).ravel())
    m, n, total = c.size, b.size, diffs.size
    cdf = null_cdf(m, n)
    k_low, k_high = _rank_of_bound(m, n, alpha), _rank_of_bound(m, n, beta)
    slower, faster = int(np.count_nonzero(diffs > 0)), int(np.count_nonzero(diffs < 0))
    return Shift(
        ratio=math.exp(float(np.median(diffs))),
        low=math.exp(diffs[k_low - 1]) if k_low else 0.0,
        high=math.exp(diffs[total - k_high]) if k_high else math.inf,
        p_slower=float(cdf[total - slower]),
        p_faster=float(cdf[total - faster]),
    )


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))
