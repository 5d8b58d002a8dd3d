"""The slow-creep view of a series: how far its latest runs are from the best of its recent ones,
and whether they drift steadily.

Change-point detection is the wrong tool for a creep: a benchmark that loses 1% a run is cut
into a staircase of "steps", none of which is the story. So over the last ``window`` runs:

* ``best``: the highest throughput of a run; ``latest``: the median of the last ``LATEST`` runs
  (one run is too noisy to stand for "now"); ``loss``: how far the latest are below the best;
* the trend: the Theil-Sen slope of log throughput per run (robust to odd runs), with its 95%
  confidence interval, and Kendall's tau test of "no trend";
* it is *creeping* when the trend is significant (``p < ALPHA``), downward, adds up to at least
  ``MIN_DRIFT`` over the window, and a straight line fits the runs better than one step does
  (a single step looks like a trend to Kendall's test too; the change points report it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

WINDOW = 20
LATEST = 3
ALPHA = 0.01
MIN_DRIFT = 0.05
#: fewer runs than this in the window tell nothing about a trend
MIN_RUNS = 6


@dataclass(frozen=True)
class CreepView:
    """The last ``runs`` runs of a series against their best."""

    runs: int
    #: position of the best run in the whole series (0-based)
    best_index: int
    best: float
    #: median of the last ``latest_runs`` runs
    latest: float
    latest_runs: int
    #: relative throughput change per run (Theil-Sen; negative: slower), with its 95% bounds
    slope: float
    slope_low: float
    slope_high: float
    #: the trend's throughput at the window's first run (Theil-Sen's intercept)
    start: float
    #: Kendall's tau test of "no trend", two-sided
    p_value: float
    #: a straight line fits the window better than one step
    steady: bool
    creeping: bool

    @property
    def loss(self) -> float:
        """How far the latest runs are below the best: ``1 - latest / best``."""
        return 1 - self.latest / self.best

    @property
    def drift(self) -> float:
        """The trend's change over the whole window: ``(1 + slope) ** (runs - 1) - 1``."""
        return (1 + self.slope) ** (self.runs - 1) - 1


def _step_fits_better(y: np.ndarray) -> bool:
    """Whether one step (two levels) explains ``y`` with less error than a straight line."""
    n = len(y)
    x = np.arange(n)
    line = np.polyval(np.polyfit(x, y, 1), x)
    line_error = float(np.sum((y - line) ** 2))
    step_error = min(
        float(np.sum((y[:t] - y[:t].mean()) ** 2) + np.sum((y[t:] - y[t:].mean()) ** 2))
        for t in range(2, n - 1)
    )
    return step_error < line_error


def view(values: Sequence[float], window: int = WINDOW) -> CreepView | None:
    """The creep view of a series of throughputs (higher is better); ``None`` with fewer than
    :data:`MIN_RUNS` runs."""
    from scipy import stats

    data = np.asarray(values, dtype=float)
    recent = data[-window:]
    n = len(recent)
    if n < MIN_RUNS or np.any(recent <= 0):
        return None
    offset = len(data) - n
    y = np.log(recent)
    fit = stats.theilslopes(y, np.arange(n), alpha=0.95)
    tau = stats.kendalltau(np.arange(n), y)
    p = float(tau.pvalue) if math.isfinite(tau.pvalue) else 1.0
    slope = math.expm1(fit.slope)
    steady = not _step_fits_better(y)
    drift = (1 + slope) ** (n - 1) - 1
    count = min(LATEST, n)
    return CreepView(
        runs=n,
        best_index=offset + int(np.argmax(recent)),
        best=float(recent.max()),
        latest=float(np.median(recent[-count:])),
        latest_runs=count,
        slope=slope,
        slope_low=math.expm1(fit.low_slope),
        slope_high=math.expm1(fit.high_slope),
        start=math.exp(fit.intercept),
        p_value=p,
        steady=steady,
        creeping=p < ALPHA and slope < 0 and -drift >= MIN_DRIFT and steady,
    )
