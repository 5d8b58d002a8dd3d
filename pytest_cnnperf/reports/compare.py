"""``cnnperf compare OLD NEW``: two runs' benchmarks matched by test and configuration.

The usual pair is one environment against another (a driver, CUDA, cuDNN or torch upgrade, or
another GPU): each row shows both throughputs, the speedup, both peak memories and the change,
and a verdict on what the files hold: every sample's step time and peak, allowing for how much
runs differ on the kind of machine (its noise profile, as a pytest run against a stored
baseline does, without the calibration's allowance, which only applies within one machine).
The two environments are shown side by side.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..gate import noise, structure
from ..gate.attribute import attribute
from ..gate.decide import MEMORY_CONFIRMATIONS, combine, compare_memory
from ..gate.policy import GateSettings, gate_policy
from ..gate.throughput import compare_measured
from ..model import (
    Attribution,
    Comparison,
    Environment,
    NoiseProfile,
    Reason,
    Result,
    Verdict,
    units,
)
from ..model.because import plural
from ..settings import MEMORY_THRESHOLD, THRESHOLD
from ..store import noise as noise_file
from ..store.results_file import FileProblem, Loaded, load
from . import table, text


@dataclass(frozen=True)
class Matching:
    pairs: tuple[tuple[Result, Result], ...]
    only_old: tuple[Result, ...]
    only_new: tuple[Result, ...]


def match(old: Sequence[Result], new: Sequence[Result]) -> Matching:
    """Pair benchmarks by test id and configuration key; those left over are then paired by
    test module name, test name and key, so that runs from different folders (or a results
    file against a baseline file) still match."""
    pairs: list[tuple[Result, Result]] = []
    left_old, left_new = list(old), list(new)
    keys: list[Callable[[Result], tuple[str, ...]]] = [
        lambda r: (r.test_id, r.key),
        lambda r: (r.module, r.test, r.key),
    ]
    for key in keys:
        new_by_key: dict[tuple[str, ...], list[Result]] = {}
        for result in left_new:
            new_by_key.setdefault(key(result), []).append(result)
        old_count = Counter(key(result) for result in left_old)
        unmatched = []
        for result in left_old:
            k = key(result)
            candidates = new_by_key.get(k, [])
            if len(candidates) == 1 and old_count[k] == 1:
                pairs.append((result, candidates[0]))
                left_new.remove(candidates[0])
            else:
                unmatched.append(result)
        left_old = unmatched
    return Matching(tuple(pairs), tuple(left_old), tuple(left_new))


def baselines_of(
    results: Sequence[Result], folders: Iterable[Path]
) -> dict[tuple[str, str], Result]:
    """The baseline each result was gated against, by ``(test_id, key)``, read from the
    baseline file its decision names (relative to the first of ``folders`` that has it); files
    that cannot be read are passed over."""
    current = [r for r in results if r.measurement is not None]
    found: dict[tuple[str, str], Result] = {}
    for file in dict.fromkeys(r.decision.baseline_file for r in results if r.decision):
        if not file:
            continue
        for folder in folders:
            try:
                document = load(folder / file)
            except FileProblem:
                continue
            for old, new in match(document.measured, current).pairs:
                found.setdefault((new.test_id, new.key), old)
            break
    return found


def distinct(values: Sequence[str | None]) -> str:
    """Different values joined (``2.5, 2.6``), one value as it is, nothing as ``-``."""
    seen = list(dict.fromkeys(v for v in values if v))
    return ", ".join(seen) if seen else "-"


@dataclass(frozen=True)
class Pair:
    old: Result
    new: Result
    throughput: Comparison | None
    memory: Comparison | None
    verdict: Verdict
    #: which operators changed, where the verdict is a change and both sides have a profile
    attribution: Attribution | None = None
    #: the exact counts and the first steps' numbers that differ, where both sides have them
    structure: tuple[Reason, ...] = ()
    #: samples something else disturbed, and what they did to the verdict
    disturbed: Reason | None = None
    #: which runs those samples are in: OLD, NEW or OLD and NEW
    disturbed_runs: str = ""

    @property
    def speedup(self) -> float:
        """New throughput over old (above 1: faster)."""
        return self.new.measured.items_per_second / self.old.measured.items_per_second

    @property
    def memory_change(self) -> float | None:
        old, new = self.old.measured.peak_allocated_bytes, self.new.measured.peak_allocated_bytes
        return new / old - 1 if old and new is not None else None


def settings_for(results: Sequence[Result], threshold: float | None) -> GateSettings:
    """The gate's policy for the device the new run measured on, with ``threshold`` (or the
    device's default) as the throughput threshold."""
    device = next((r.environment.device for r in results if r.environment), "cpu")
    kind = device.split(":")[0]
    return GateSettings(
        policy=gate_policy(kind),
        throughput_threshold=threshold or THRESHOLD.default_for(kind) or 0.1,
        memory_threshold=MEMORY_THRESHOLD.default_for(kind) or 0.05,
        strict=False,
    )


def pair(old: Result, new: Result, settings: GateSettings, profile: NoiseProfile) -> Pair:
    """The two runs of one benchmark, decided with what their files hold: every sample's step
    time, allowing for the kind of machine's noise ``profile``, and every sample's peak."""
    before, after = old.measured, new.measured
    throughput, disturbed, runs = compare_measured(before, after, settings, profile)
    memory = None
    if before.memory_peaks and after.memory_peaks:
        confirmations = min(MEMORY_CONFIRMATIONS, len(after.memory_peaks))
        memory = compare_memory(before.memory_peaks, after.memory_peaks, settings, confirmations)
    verdict = combine(throughput.verdict, *([memory.verdict] if memory else []))
    attribution = None
    old_profile, new_profile = before.profile, after.profile
    if (
        verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
        and old_profile
        and new_profile
        and old_profile.clock == new_profile.clock  # CPU time against device time says nothing
    ):
        # as the verdicts, without allowing for the machine's speed: the environments differ
        grew = memory is not None and memory.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
        peaks = (before.peak_parts, after.peak_parts)
        attribution = attribute(old_profile, new_profile, grew, peaks)
    _, found = structure.judge(after, before, settings)
    return Pair(old, new, throughput, memory, verdict, attribution, found, disturbed, runs)


def compare(
    old: Sequence[Result], new: Sequence[Result], settings: GateSettings, profile: NoiseProfile
) -> tuple[list[Pair], Matching]:
    matching = match(old, new)
    return [pair(o, n, settings, profile) for o, n in matching.pairs], matching


def profile_for(results: Sequence[Result], baselines: Path) -> NoiseProfile:
    """The noise profile of the kind of machine the new run measured on, from the baselines
    folder, or the device's default where none was recorded."""
    environment = next((r.environment for r in results if r.environment), None)
    if environment is None:
        return noise.default("cpu")
    return noise_file.read(baselines, environment.machine) or noise.default(environment.device)


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
    olds = [r.environment for r in old.measured if r.environment]
    news = [r.environment for r in new.measured if r.environment]
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
    old, new = p.old.measured, p.new.measured
    row = [
        p.new.test,
        table.short_key(p.new.config),
        units.rate(old.items_per_second, unit),
        units.rate(new.items_per_second, unit),
        f"{p.speedup:.2f}x",
        units.nbytes(old.peak_allocated_bytes),
        units.nbytes(new.peak_allocated_bytes),
        units.change(p.memory_change),
    ]
    if flops:
        row += [units.flops(old.achieved_flops_per_s), units.flops(new.achieved_flops_per_s)]
    return [*row, str(p.verdict)]


HEADERS = ["test", "benchmark", "old", "new", "speedup", "old mem", "new mem", "change", "verdict"]
FLOPS_HEADERS = ["old FLOP/s", "new FLOP/s"]


def lines(
    old: Loaded,
    new: Loaded,
    pairs: Sequence[Pair],
    matching: Matching,
    settings: GateSettings,
    profile: NoiseProfile,
) -> list[str]:
    """The comparison as the command prints it."""
    out = [*environment_lines(old, new), ""]
    # achieved FLOP/s of each side, where either side's results file has them
    flops = any(r.measured.flops is not None for p in pairs for r in (p.old, p.new))
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
        f"{plural(n, 'benchmark')} in both: {verdicts}; geometric mean speedup {geomean:.2f}x",
        f"speedup: NEW throughput / OLD throughput. regressed: slower beyond "
        f"{units.percent(threshold)} with {1 - settings.policy.alpha:.0%} confidence, "
        f"allowing for each run's samples and for how much runs differ on this kind of machine "
        f"({profile.describe()}), or peak memory grown beyond {units.percent(memory_threshold)} "
        "in every sample",
    ]
    if flops:
        out.append(
            "FLOP/s: each side's counted FLOPs per step (torch.utils.flop_counter) over its "
            "step time"
        )
    for p in pairs:
        if p.disturbed is not None:
            out += ["", f"{p.new.test} [{p.new.key}], {p.disturbed_runs}: {p.disturbed}"]
        if p.attribution is not None:
            out += ["", f"operators of {p.new.test} [{p.new.key}], OLD -> NEW:"]
            every = len(p.attribution.changes) + len(p.attribution.allocations)
            out += [f"  {line}" for line in p.attribution.lines(limit=every)]
        if p.structure:
            out += ["", f"what {p.new.test} [{p.new.key}] calls and computes, OLD -> NEW:"]
            out += [f"  {reason}" for reason in p.structure]
    for label, results in (("OLD", matching.only_old), ("NEW", matching.only_new)):
        if results:
            out.append(f"only in {label}: " + ", ".join(f"{r.test} [{r.key}]" for r in results))
    return out
