"""The gate's decision on one benchmark: a verdict, the comparisons behind it, and its reasons
(``model.conditions`` and ``model.findings``)."""

from __future__ import annotations

from dataclasses import dataclass

from .because import Because
from .comparison import Comparison, CompileComparison, Verdict
from .conditions import NoBaseline, Remark
from .findings import Creep
from .identity import Against
from .profile import Attribution
from .sample import Measurement

#: a decision's reason: any :class:`Because` with a ``kind``, ``model.conditions``' and
#: ``model.findings``' (imported above: ``Because.kinds()`` lists them once they are defined)
Reason = Because


def is_creep(reason: Reason) -> bool:
    return isinstance(reason, Creep) or (isinstance(reason, Remark) and reason.role == "creep")


@dataclass(frozen=True)
class Decision:
    """The gate's verdict on one benchmark, with the evidence for it."""

    verdict: Verdict
    throughput: Comparison | None = None
    memory: Comparison | None = None
    environment_changes: tuple[str, ...] = ()
    reasons: tuple[Reason, ...] = ()
    baseline_file: str | None = None
    failed: bool = False
    #: compiled benchmarks: graph breaks, recompiles and compile time against the baseline
    compile: CompileComparison | None = None
    #: which operators account for the change (regressed or improved verdicts)
    attribution: Attribution | None = None
    #: gated against another revision measured in the same run (``--cnnperf-against``): which,
    #: and its samples
    against: Against | None = None
    reference: Measurement | None = None
    #: ``--cnnperf-metric=instructions``: instructions per step against the reference's, which
    #: gate throughput in place of the step time (then reported beside, not gated)
    instructions: Comparison | None = None

    @property
    def creep(self) -> Reason | None:
        """The creep gate's reason, when it failed the benchmark."""
        return next((r for r in self.reasons if is_creep(r)), None)

    @property
    def no_baseline(self) -> NoBaseline | None:
        return next((r for r in self.reasons if isinstance(r, NoBaseline)), None)
