"""The design of sequential decisions: look after a few samples, stop as soon as the verdict
is clear, with the error rates over all looks fixed in advance.

A :class:`Design` is fixed before a benchmark's first sample: how many samples the measured side
has at each look, and the two error rates over all looks together. Each look spends an equal
share of them (a Bonferroni split, valid whatever the looks have in common): "regressed" (or
"improved") needs the exact test at the look's share of ``alpha``, and "ok" the upper bound of
the slowdown at the look's share of ``beta`` below the threshold. So on unchanged code a
regression is called at most ``alpha`` of the time however many looks are taken, and a slowdown
of the threshold's size is called "ok" at most ``beta`` of the time. No look is planned that
cannot reach its share of ``alpha`` against the reference it compares with (the exact test's
smallest p-value is ``1 / C(m + n, m)``). ``gate.sequential`` runs a design for one benchmark;
the manual's "How the gate decides" page has the rates and what they cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model import Look
from .stats import smallest_p


def doubling(first: int, cap: int) -> tuple[int, ...]:
    """Looks at ``first`` samples, then twice as many each time, ending at ``cap`` (a last step
    shorter than half the one before it is merged into it)."""
    if first >= cap:
        return (cap,)
    looks = [first]
    while looks[-1] * 2 < cap:
        looks.append(looks[-1] * 2)
    if len(looks) > 1 and cap - looks[-1] < looks[-1] - looks[-2]:
        looks.pop()
    return (*looks, cap)


@dataclass(frozen=True)
class Design:
    """A sequential comparison's looks and error rates, fixed in advance."""

    #: the measured side's samples at each look, increasing
    looks: tuple[int, ...]
    #: the rate of calling a regression (and, separately, an improvement) on unchanged code,
    #: over all looks
    alpha: float
    #: the rate of calling a slowdown of the threshold's size "ok", over all looks
    beta: float

    def __post_init__(self) -> None:
        if not self.looks or list(self.looks) != sorted(set(self.looks)) or self.looks[0] < 1:
            raise ValueError(f"looks must be increasing sample counts, not {self.looks}")

    @property
    def cap(self) -> int:
        return self.looks[-1]

    def look(self, index: int) -> Look:
        """The ``index``-th look (from 0), with its shares of the error rates (it is taken
        after ``looks[index]`` samples)."""
        count = len(self.looks)
        return Look(number=index + 1, of=count, alpha=self.alpha / count, beta=self.beta / count)

    def reachable(self, reference: int | None = None) -> Design:
        """This design against a reference of ``reference`` samples (``None``: as many as each
        look's, two sides sampled alike): without the first looks that could not reach their
        share of ``alpha`` (dropping a look raises the others' shares, so it is asked again).
        The last look stays, whatever it can reach."""
        looks = self.looks
        while len(looks) > 1:
            against = looks[0] if reference is None else reference
            if smallest_p(looks[0], against) <= self.alpha / len(looks):
                break
            looks = looks[1:]
        return Design(looks, self.alpha, self.beta)

    def paired(self) -> Design:
        """This design for a revision gated against another in the same run, as many samples
        of each side at every look."""
        return self.reachable()

    def smallest_reference(self) -> int:
        """The fewest reference samples against which every look can reach its share of
        ``alpha``: what a saved baseline keeps at least."""
        share, first = self.alpha / len(self.looks), self.looks[0]
        n = 1
        while smallest_p(first, n) > share:
            n += 1
        return n


def median_bounds(values: list[float] | tuple[float, ...], level: float) -> tuple[float, float]:
    """A distribution-free confidence interval of the median at ``1 - level`` (two order
    statistics, from the binomial distribution); the whole range when too few values."""
    ordered = sorted(values)
    n = len(ordered)
    # the largest k with P(Binomial(n, 1/2) < k) <= level / 2
    k, below = 0, 0.0
    while k < n:
        below += math.comb(n, k) / 2**n
        if below > level / 2:
            break
        k += 1
    if k == 0:
        return ordered[0], ordered[-1]
    return ordered[k - 1], ordered[n - k]
