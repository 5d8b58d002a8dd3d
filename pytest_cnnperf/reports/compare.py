"""``cnnperf compare OLD NEW``: two runs' benchmarks matched by test and configuration.

The usual pair is one environment against another (a driver, CUDA, cuDNN or torch upgrade, or
another GPU): each row shows both throughputs, the speedup, both peak memories and the change,
and the gate's verdict on the per-sample figures (Mann-Whitney with the practical threshold,
exactly as a pytest run decides against its baseline, without the machine-speed allowance,
which only applies within one machine). The two environments are shown side by side.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import gate, units
from ..results import Comparison, Environment, Verdict
from . import table, text
from .records import Loaded, Matching, Record, distinct, match


@dataclass(frozen=True)
class Pair:
    old: Record
    new: Record
    throughput: Comparison | None
    memory: Comparison | None
    verdict: Verdict

    @property
    def speedup(self) -> float:
        """New throughput over old (above 1: faster)."""
        return self.new.items_per_second / self.old.items_per_second

    @property
    def memory_change(self) -> float | None:
        old, new = self.old.peak_allocated_bytes, self.new.peak_allocated_bytes
        return new / old - 1 if old and new is not None else None


def settings_for(records: Sequence[Record], threshold: float | None) -> gate.GateSettings:
    """The gate's policy for the device the new run measured on, with ``threshold`` (or the
    device's default) as the throughput threshold."""
    from ..policy import gate_policy
    from ..settings import MEMORY_THRESHOLD, THRESHOLD

    device = next((r.environment.device for r in records if r.environment), "cpu")
    kind = device.split(":")[0]
    return gate.GateSettings(
        policy=gate_policy(kind),
        throughput_threshold=threshold or THRESHOLD.default_for(kind) or 0.1,
        memory_threshold=MEMORY_THRESHOLD.default_for(kind) or 0.05,
        strict=False,
    )


def pair(old: Record, new: Record, settings: gate.GateSettings) -> Pair:
    throughput = gate.compare_throughput(old.step_times_s, new.step_times_s, settings)
    memory = (
        gate.compare_memory(old.peak_bytes, new.peak_bytes, settings)
        if old.peak_bytes and new.peak_bytes
        else None
    )
    verdicts = [throughput.verdict, *([memory.verdict] if memory else [])]
    return Pair(old, new, throughput, memory, gate.combine(*verdicts))


def compare(
    old: Sequence[Record], new: Sequence[Record], settings: gate.GateSettings
) -> tuple[list[Pair], Matching]:
    matching = match(old, new)
    return [pair(o, n, settings) for o, n in matching.pairs], matching


_ENVIRONMENT: tuple[tuple[str, Callable[[Environment], str | None]], ...] = (
    ("machine", lambda e: e.machine),
    ("device", lambda e: e.device_name),
    ("driver", lambda e: e.driver),
    ("CUDA", lambda e: e.cuda),
    ("cuDNN", lambda e: e.cudnn),
    ("torch", lambda e: e.torch),
    ("torchvision", lambda e: e.torchvision),
    ("Python", lambda e: e.python),
    ("platform", lambda e: e.platform),
    ("CPU", lambda e: e.cpu),
    ("threads", lambda e: str(e.threads)),
    ("cuDNN mode", lambda e: e.flags.cudnn_mode),
    ("TF32 (cuDNN)", lambda e: None if e.flags.cudnn_tf32 is None else str(e.flags.cudnn_tf32)),
    ("TF32 (matmul)", lambda e: None if e.flags.matmul_tf32 is None else str(e.flags.matmul_tf32)),
    ("matmul precision", lambda e: e.flags.matmul_precision),
    ("deterministic", lambda e: str(e.flags.deterministic_algorithms)),
)


def environment_lines(old: Loaded, new: Loaded) -> list[str]:
    """The two runs' environments side by side, marking what changed."""
    olds = [r.environment for r in old.records if r.environment]
    news = [r.environment for r in new.records if r.environment]
    body = []
    shown: dict[str, tuple[str, str]] = {}
    for name, read in _ENVIRONMENT:
        a, b = distinct([read(e) for e in olds]), distinct([read(e) for e in news])
        if (a, b) == ("-", "-") or (name == "CPU" and shown.get("device") == (a, b)):
            continue  # nothing to show, or a CPU run's device again
        shown[name] = (a, b)
        body.append([name, a, b, "changed" if a != b else ""])
    return text.columns(["environment", f"OLD {old.path}", f"NEW {new.path}", ""], body)


def _pair_row(p: Pair, flops: bool = False) -> list[str]:
    unit = p.new.unit
    row = [
        p.new.test,
        table.short_key(p.new.config),
        units.rate(p.old.items_per_second, unit),
        units.rate(p.new.items_per_second, unit),
        f"{p.speedup:.2f}x",
        units.nbytes(p.old.peak_allocated_bytes),
        units.nbytes(p.new.peak_allocated_bytes),
        units.change(p.memory_change),
    ]
    if flops:
        row += [units.flops(p.old.achieved_flops_per_s), units.flops(p.new.achieved_flops_per_s)]
    return [*row, str(p.verdict)]


HEADERS = [
    "test",
    "benchmark",
    "old",
    "new",
    "speedup",
    "old mem",
    "new mem",
    "change",
    "verdict",
]
FLOPS_HEADERS = ["old FLOP/s", "new FLOP/s"]


def lines(
    old: Loaded,
    new: Loaded,
    pairs: Sequence[Pair],
    matching: Matching,
    settings: gate.GateSettings,
) -> list[str]:
    """The comparison as the command prints it."""
    out = [*environment_lines(old, new), ""]
    # achieved FLOP/s of each side, where either side's results file has them
    flops = any(r.flops_per_item is not None for p in pairs for r in (p.old, p.new))
    headers = [*HEADERS[:-1], *FLOPS_HEADERS, HEADERS[-1]] if flops else HEADERS
    rows = [_pair_row(p, flops) for p in pairs]
    out += text.columns(headers, rows, right=range(2, len(headers) - 1))
    counts = Counter(p.verdict for p in pairs)
    verdicts = ", ".join(f"{counts[v]} {v}" for v in table.VERDICT_ORDER if counts[v])
    geomean = math.exp(statistics.fmean(math.log(p.speedup) for p in pairs))
    n = len(pairs)
    threshold, memory_threshold = settings.throughput_threshold, settings.memory_threshold
    out += [
        "",
        f"{n} benchmark{'' if n == 1 else 's'} in both: {verdicts}; geometric mean speedup "
        f"{geomean:.2f}x",
        f"speedup: NEW throughput / OLD throughput. regressed: slower beyond "
        f"{units.percent(threshold)} (one-sided Mann-Whitney test on the per-sample step times) "
        f"or peak memory grown beyond {units.percent(memory_threshold)}",
    ]
    if flops:
        out.append(
            "FLOP/s: each side's counted FLOPs per step (torch.utils.flop_counter) over its "
            "step time"
        )
    for label, records in (("OLD", matching.only_old), ("NEW", matching.only_new)):
        if records:
            out.append(f"only in {label}: " + ", ".join(f"{r.test} [{r.key}]" for r in records))
    return out
