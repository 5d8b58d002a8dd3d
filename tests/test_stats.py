"""Shift estimates and their bounds on synthetic samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_cnnperf.gate import stats


def lognormal(n: int, center: float, spread: float, seed: int) -> list[float]:
    return list(center * np.exp(np.random.default_rng(seed).normal(0, spread, n)))


def test_identical_distributions_give_a_ratio_near_one_and_no_significance() -> None:
    shift = stats.compare(lognormal(12, 0.04, 0.03, 1), lognormal(12, 0.04, 0.03, 2), 0.01, 0.9)
    assert shift.ratio == pytest.approx(1.0, abs=0.05)
    assert shift.p_slower > 0.01
    assert shift.low < 1 < shift.high


def test_a_large_slowdown_is_significant_and_bounded() -> None:
    shift = stats.compare(lognormal(12, 0.04, 0.02, 1), lognormal(8, 0.05, 0.02, 2), 0.01, 0.9)
    assert shift.ratio == pytest.approx(1.25, rel=0.05)
    assert shift.p_slower < 0.001
    assert 1.1 < shift.low <= shift.ratio <= shift.high


def test_too_few_samples_cannot_bound_the_ratio() -> None:
    shift = stats.compare([0.04, 0.041], [0.08], 0.01, 0.9)
    assert shift.low == 0.0
    assert shift.high == math.inf
    assert shift.p_slower > 0.01


def test_exact_u_distribution_matches_tables() -> None:
    # one-sided alpha 0.01 for 6 + 6 samples: critical U = 3, so the bound is the 4th difference
    assert stats._rank_of_bound(6, 6, 0.01) == 4
    cdf = stats._u_cdf(3, 3)
    assert cdf[0] == pytest.approx(1 / 20)
    assert cdf[-1] == pytest.approx(1.0)


def test_comparing_needs_samples_on_both_sides() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        stats.compare([], [1.0], 0.01, 0.9)
