"""How a fresh measurement compares with its reference, metric by metric: the verdict, the
figures, and the look of the sequential comparison that decided it."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from . import units
from .values import Count, NonNegative, Positive, PositiveInt, Probability


class Verdict(str, enum.Enum):
    """The outcome of one benchmark against its baseline."""

    OK = "ok"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    SAVED = "saved"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


#: the statistical rules a look can apply, as the reports name them
TESTS = {"mann-whitney": "exact one-sided Mann-Whitney test"}


@dataclass(frozen=True)
class Look:
    """The look of a sequential comparison that decided it: which of how many planned, the
    shares of the two error rates it spent, and the rule it applied (``gate.sequential``)."""

    number: PositiveInt
    of: PositiveInt
    #: the share of the false-alarm rate ("regressed" on unchanged code) this look spent, and
    #: the share of the rate of calling a slowdown of the threshold's size "ok"
    alpha: Probability
    beta: Probability
    test: str = "mann-whitney"
    spending: str = "bonferroni"

    def __str__(self) -> str:
        """``look 1 of 3``."""
        return f"look {self.number} of {self.of}"

    def rates(self) -> str:
        """``1% false alarms and 5% misses over 3 looks, split equally``."""
        looks = "1 look" if self.of == 1 else f"{self.of} looks"
        return (
            f"{units.percent(self.alpha * self.of)} false alarms and "
            f"{units.percent(self.beta * self.of)} missed slowdowns over {looks}"
            + (", split equally" if self.of > 1 and self.spending == "bonferroni" else "")
        )


@dataclass(frozen=True)
class Comparison:
    """One metric of a fresh measurement against its baseline.

    ``change`` is relative and signed so that positive is worse: for throughput the fractional
    loss of items per second, for memory the fractional growth. ``low`` and ``high`` bound it
    with the gate's confidence; ``p_value`` is the one-sided test for "worse", at the ``look``
    that decided it.
    """

    metric: str
    baseline: NonNegative
    current: NonNegative
    change: float
    threshold: Positive
    verdict: Verdict
    p_value: NonNegative | None = None
    low: float | None = None
    high: float | None = None
    baseline_samples: Count = 0
    current_samples: Count = 0
    #: throughput: how much slower the machine ran than for the baseline (calibration workload,
    #: current / baseline); ``change`` allows for it, ``raw_change`` does not
    machine_factor: Positive = 1.0
    raw_change: float | None = None
    #: throughput: the look of the sequential comparison that decided it
    look: Look | None = None
    #: throughput against a stored baseline: the standard deviation (log) of what moves a whole
    #: run, which ``low`` and ``high`` allow for beside the samples' own (``gate.noise``)
    between: NonNegative | None = None

    def evidence(self) -> tuple[str, ...]:
        """The statistics behind a throughput verdict, a sentence a line: the samples, the look,
        the test against the look's boundary and the bound that decided; then the error rates
        the design fixed in advance (none for memory)."""
        look = self.look
        if self.metric != "throughput" or look is None or self.p_value is None:
            return ()
        last = ", the last" if look.number == look.of and look.of > 1 else ""
        within = "at most" if self.p_value <= look.alpha else "above"
        test = (
            f"{self.current_samples} samples now against {self.baseline_samples} ({look}{last}): "
            f"{TESTS.get(look.test, look.test)} p = {self.p_value:.2g}, "
            f"{within} this look's {look.alpha:.2g}"
        )
        allowing = (
            f", allowing for +-{units.percent(self.between)} between the two runs beside their "
            "samples,"
            if self.between
            else ""
        )
        if self.verdict is Verdict.REGRESSED and self.low is not None:
            bound = (
                f"with {_confidence(look.alpha)} confidence{allowing} the loss is at least "
                f"{units.percent(max(self.low, 0.0))}"
            )
        elif self.high is not None and self.high < 1:  # 1: no bound (a loss of everything)
            needs = (
                " (ok needs it below the threshold)" if self.verdict is Verdict.INCONCLUSIVE else ""
            )
            bound = (
                f"with {_confidence(look.beta)} confidence{allowing} the loss is at most "
                f"{units.percent(max(self.high, 0.0))}{needs}"
            )
        else:
            bound = "too few samples to bound the loss"
        return f"{test}; {bound}", f"error rates fixed in advance: {look.rates()}"


@dataclass(frozen=True)
class CompileComparison:
    """A compiled benchmark's compiler figures against its baseline's (``None``: no baseline,
    or it did not have the figure). Graph breaks and recompiles are counts, so any change
    counts; compile time fails only past its own threshold, when one is set."""

    graph_breaks: Count
    baseline_graph_breaks: Count | None
    #: frames compiled again during the timed steps, and frames run eagerly after giving up
    recompiles: Count
    eager_frames: Count = 0
    #: frames compiled again before the timed steps (reported, not failed)
    warmup_recompiles: Count = 0
    #: the compile times compared: the cold ones where both have them, else the warm ones
    cache: str | None = None
    compile_s: NonNegative | None = None
    baseline_compile_s: NonNegative | None = None
    #: compile-time growth that fails (``None``: it never does)
    threshold: Positive | None = None
    verdict: Verdict = Verdict.OK

    @property
    def compile_change(self) -> float | None:
        """Fractional growth of the compile time."""
        if self.compile_s is None or not self.baseline_compile_s:
            return None
        return self.compile_s / self.baseline_compile_s - 1


def _confidence(level: float) -> str:
    """``99.7%`` for a level of 0.0033: the confidence a bound at that level has."""
    return f"{(1 - level) * 100:.3g}%"
