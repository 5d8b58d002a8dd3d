"""The exact statistics: shift estimates, their bounds and p-values from one distribution."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from pytest_cnnperf.gate import stats


def lognormal(n: int, center: float, spread: float, seed: int) -> list[float]:
    return list(center * np.exp(np.random.default_rng(seed).normal(0, spread, n)))


def test_identical_distributions_give_a_ratio_near_one_and_no_significance() -> None:
    shift = stats.compare(lognormal(12, 0.04, 0.03, 1), lognormal(12, 0.04, 0.03, 2), 0.01, 0.1)
    assert shift.ratio == pytest.approx(1.0, abs=0.05)
    assert shift.p_slower > 0.01
    assert shift.low < 1 < shift.high


def test_a_large_slowdown_is_significant_and_bounded() -> None:
    shift = stats.compare(lognormal(12, 0.04, 0.02, 1), lognormal(8, 0.05, 0.02, 2), 0.01, 0.1)
    assert shift.ratio == pytest.approx(1.25, rel=0.05)
    assert shift.p_slower < 0.001
    assert 1.1 < shift.low <= shift.ratio <= shift.high


def test_too_few_samples_cannot_bound_the_ratio() -> None:
    shift = stats.compare([0.04, 0.041], [0.08], 0.01, 0.1)
    assert shift.low == 0.0
    assert shift.high == math.inf
    assert shift.p_slower == pytest.approx(1 / 3)  # the smallest p that 1 against 2 can give


def test_the_null_distribution_matches_counting_every_arrangement() -> None:
    """For small sizes, U's distribution by brute force: every way the m values can take their
    ranks among m + n."""
    for m, n in [(1, 1), (2, 3), (3, 3), (4, 2), (3, 5)]:
        counts = [0] * (m * n + 1)
        for ranks in itertools.combinations(range(m + n), m):
            counts[sum(r - i for i, r in enumerate(ranks))] += 1
        expected = np.cumsum(counts) / math.comb(m + n, m)
        assert stats.null_cdf(m, n) == pytest.approx(expected, abs=1e-15)
        assert stats.null_cdf(n, m) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(("m", "n"), [(3, 12), (6, 6), (2, 9), (7, 5), (8, 8)])
def test_p_values_equal_scipys_exact_test(m: int, n: int) -> None:
    rng = np.random.default_rng(m * 100 + n)
    for _ in range(20):
        base, current = rng.lognormal(0, 0.1, n), rng.lognormal(0.05, 0.1, m)
        shift = stats.compare(base, current, 0.01, 0.1)
        slower = mannwhitneyu(current, base, alternative="greater", method="exact").pvalue
        faster = mannwhitneyu(current, base, alternative="less", method="exact").pvalue
        assert shift.p_slower == pytest.approx(slower, rel=1e-12)
        assert shift.p_faster == pytest.approx(faster, rel=1e-12)


def test_significance_and_the_bound_are_one_statement() -> None:
    """p <= alpha exactly when the lower bound at 1 - alpha excludes no change."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        base, current = rng.lognormal(0, 0.05, 12), rng.lognormal(0.03, 0.05, 3)
        shift = stats.compare(base, current, 0.0033, 0.0167)
        assert (shift.p_slower <= 0.0033) == (shift.low > 1)


def test_the_distribution_fits_in_memory_at_a_hundred_samples_a_side() -> None:
    """About m * n floats: the old recursion kept every count polynomial (gigabytes here)."""
    cdf = stats.null_cdf(100, 100)
    assert cdf.size == 100 * 100 + 1
    assert cdf[0] == pytest.approx(1 / math.comb(200, 100))
    assert cdf[-1] == 1.0


def test_the_smallest_p_value_is_one_arrangement_of_all() -> None:
    assert stats.smallest_p(3, 12) == pytest.approx(1 / 455)
    assert stats.null_cdf(3, 12)[0] == pytest.approx(stats.smallest_p(3, 12))


def test_comparing_needs_samples_on_both_sides() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        stats.compare([], [1.0], 0.01, 0.1)
