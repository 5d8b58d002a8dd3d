"""Which commit: ``cnnperf bisect GOOD BAD -- PYTEST_ARGS`` finds the first commit between GOOD
and BAD at which a benchmark got slower, or hungrier for memory, than at GOOD.

Git chooses the commits (``git rev-list --bisect-all``, the midpoints ``git bisect`` would take,
skipped ones avoided); each is measured in a worktree of its own against GOOD in the same run
(``pytest --cnnperf --cnnperf-against=GOOD``), so that the machine's drift over a long bisection
does not decide. First BAD is measured that way (the confirmation: without a regression there is
nothing to look for); a commit is bad when it regressed against GOOD at the smaller of the gate's
threshold and half the change the confirmation measured; one that cannot tell (inconclusive),
cannot be collected or imported, or lacks the test is skipped, as ``git bisect skip`` would.
The first bad commit is then measured against its parent, with its operators named. The user's
checkout (branch, index, working tree, refs, ``git bisect`` state) is never touched.

:func:`bisect` runs the search with a ``measure`` function, so that it is tested with scripted
verdicts; :func:`measure_in_worktree` is the real one.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model import Result, Revision, Verdict
from .git import GitProblem, Worktree, resolve, revision, run_git
from .pytest_run import pytest_command, results_of, run_to_the_end, why

#: exit statuses of ``cnnperf bisect``
FOUND, NOTHING, USAGE, RANGE, UNSURE, INTERRUPTED = 0, 1, 2, 3, 4, 130


class BisectProblem(Exception):
    """A usage error, or GOOD or BAD could not be measured; the message says why."""


@dataclass(frozen=True)
class Run:
    """One ``pytest --cnnperf --cnnperf-against=...`` run: its results, or why it has none."""

    results: tuple[Result, ...] = ()
    error: str | None = None
    seconds: float = 0.0


#: (throughput, memory) thresholds a run is judged at; ``None``: the gate's own
Thresholds = tuple[float, float] | None
#: ``measure(commit, against, thresholds)``: a run of the commit against the other, both
#: measured in the same run
Measure = Callable[[Revision, Revision, Thresholds], Run]


@dataclass(frozen=True)
class Step:
    """One commit measured, and what the search made of it."""

    #: ``confirm`` (BAD against GOOD), ``bisect`` (a midpoint against GOOD), ``explain`` (the
    #: first bad commit against its parent)
    role: str
    commit: Revision
    against: Revision
    #: bad, good, or ``None``: skipped (``why`` says why)
    bad: bool | None
    why: str | None = None
    #: the benchmark's result in that run, when it has one
    result: Result | None = None
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        if self.result is not None and self.result.verdict is not None:
            return str(self.result.verdict)
        return "skipped"


@dataclass(frozen=True)
class Bisection:
    """What ``cnnperf bisect`` found."""

    good: Revision
    bad: Revision
    #: the benchmark bisected: its test id and configuration key
    test_id: str
    key: str
    steps: tuple[Step, ...]
    #: the first bad commit; ``None`` when none was found
    first_bad: Revision | None = None
    #: when skipped commits leave only a range: the commits it holds, the last the first known
    #: bad one
    suspects: tuple[Revision, ...] = ()
    #: the exit status (:data:`FOUND` ...)
    status: int = FOUND

    @property
    def confirmation(self) -> Step:
        return self.steps[0]

    @property
    def explanation(self) -> Step | None:
        return next((s for s in self.steps if s.role == "explain"), None)


def thresholds_for(result: Result) -> tuple[float, float]:
    """The thresholds a midpoint is judged at: the smaller of the gate's and half the change the
    confirmation measured, for throughput and for memory."""
    decision = result.decision
    assert decision is not None
    throughput, memory = decision.throughput, decision.memory
    t = throughput.threshold if throughput else 0.10
    m = memory.threshold if memory else 0.05
    if throughput is not None and throughput.verdict is Verdict.REGRESSED:
        t = min(t, throughput.change / 2)
    if memory is not None and memory.verdict is Verdict.REGRESSED:
        m = min(m, memory.change / 2)
    return t, m


def pick(results: Sequence[Result], benchmark: str | None) -> Result:
    """The confirmation's benchmark to bisect: ``benchmark`` (a key, a test id or ``TEST[KEY]``)
    or the only one that regressed; :class:`BisectProblem` otherwise."""
    if benchmark is not None:
        found = [r for r in results if benchmark in (r.key, r.test_id, f"{r.test_id}[{r.key}]")]
        if not found:
            names = ", ".join(f"{r.test_id} [{r.key}]" for r in results) or "none"
            raise BisectProblem(
                f"--benchmark={benchmark}: the confirmation measured no such benchmark (it "
                f"measured: {names}); give a configuration key or a test id it measured"
            )
        if len(found) > 1:
            names = ", ".join(f"{r.test_id} [{r.key}]" for r in found)
            raise BisectProblem(
                f"--benchmark={benchmark} names several benchmarks ({names}); give one "
                "configuration key"
            )
        return found[0]
    regressed = [r for r in results if r.verdict is Verdict.REGRESSED]
    if len(regressed) > 1:
        names = "; ".join(f"{r.test_id} [{r.key}]" for r in regressed)
        raise BisectProblem(
            f"{len(regressed)} benchmarks regressed between GOOD and BAD ({names}); bisect one "
            "of them: --benchmark KEY, or select its test in the pytest arguments"
        )
    if regressed:
        return regressed[0]
    measured = [r for r in results if r.measurement is not None]
    if len(measured) == 1:
        return measured[0]
    if not measured:
        raise BisectProblem("the pytest arguments select no benchmark that could be measured")
    names = "; ".join(f"{r.test_id} [{r.key}]" for r in measured)
    raise BisectProblem(
        f"no benchmark regressed between GOOD and BAD, and the pytest arguments select several "
        f"({names}); give --benchmark KEY to say which to report"
    )


def classify(run: Run, test_id: str, key: str) -> tuple[bool | None, str | None, Result | None]:
    """Bad, good or skipped (with why) for the benchmark ``test_id`` [``key``] in ``run``."""
    result = next((r for r in run.results if r.test_id == test_id and r.key == key), None)
    if result is None:
        return None, run.error or "it lacks the benchmark", None
    verdict = result.verdict
    if verdict is Verdict.REGRESSED:
        return True, None, result
    if verdict in (Verdict.OK, Verdict.IMPROVED):
        return False, None, result
    if verdict is Verdict.ERROR:
        return None, result.error or "it failed to run", result
    if verdict is Verdict.NEW:
        return None, "GOOD lacks the benchmark", result
    return None, "the comparison was inconclusive", result


def candidates(top: Path, bad: str, goods: Sequence[str]) -> list[tuple[str, int]]:
    """The commits left between the good ones and ``bad`` (``bad`` excluded), each with how well
    it halves them (git's ``dist``: the larger, the nearer the middle)."""
    done = run_git(top, "rev-list", "--bisect-all", bad, "--not", *goods)
    found = []
    for line in done.stdout.splitlines():
        sha, _, rest = line.partition(" ")
        if sha == bad:
            continue
        distance = int(rest.strip("()").split("=")[1]) if "dist=" in rest else 0
        found.append((sha, distance))
    return found


def bisect(
    top: Path,
    good: Revision,
    bad: Revision,
    measure: Measure,
    benchmark: str | None = None,
    progress: Callable[[Step, int], None] = lambda step, left: None,
    announce: Callable[[str, Revision, Revision], None] = lambda role, commit, against: None,
) -> Bisection:
    """Confirm, search, explain; ``announce(role, commit, against)`` before each commit is
    measured, ``progress(step, steps_left)`` after."""

    def measured(role: str, commit: Revision, against: Revision, t: Thresholds) -> Run:
        announce(role, commit, against)
        return measure(commit, against, t)

    confirm = measured("confirm", bad, good, None)
    if confirm.error and not confirm.results:
        raise BisectProblem(f"measuring {bad} against {good} failed: {confirm.error}")
    chosen = pick(confirm.results, benchmark)
    test_id, key = chosen.test_id, chosen.key
    is_bad, why, result = classify(confirm, test_id, key)
    first = Step("confirm", bad, good, is_bad, why, result, confirm.seconds)
    steps = [first]
    left = math.ceil(math.log2(max(2, len(candidates(top, bad.sha, [good.sha])) + 1)))
    progress(first, left)
    if result is not None and result.verdict is Verdict.ERROR:
        raise BisectProblem(f"measuring {bad} against {good} failed: {result.error}")
    if result is not None and result.verdict is Verdict.NEW:
        raise BisectProblem(
            f"GOOD ({good}) lacks {test_id} [{key}], so nothing can be compared with it; give "
            "a GOOD that has the benchmark"
        )
    if is_bad is not True:
        unsure = result is not None and result.verdict is Verdict.INCONCLUSIVE
        status = UNSURE if unsure else NOTHING
        return Bisection(good, bad, test_id, key, tuple(steps), status=status)
    thresholds = thresholds_for(chosen)
    first_bad, goods, skipped = bad.sha, [good.sha], set()
    while True:
        left_commits = [(s, d) for s, d in candidates(top, first_bad, goods) if s not in skipped]
        if not left_commits:
            break
        # of the commits that halve the range best, the oldest: the same choice whatever the
        # commits' ids and dates
        oldest = run_git(top, "rev-list", "--reverse", "--topo-order", first_bad, "--not", *goods)
        age = {sha: i for i, sha in enumerate(oldest.stdout.split())}
        sha, _ = max(left_commits, key=lambda c: (c[1], -age.get(c[0], 0)))
        commit = revision(top, sha)
        run = measured("bisect", commit, good, thresholds)
        is_bad, why, result = classify(run, test_id, key)
        step = Step("bisect", commit, good, is_bad, why, result, run.seconds)
        steps.append(step)
        if is_bad is True:
            first_bad = sha
        elif is_bad is False:
            goods.append(sha)
        else:
            skipped.add(sha)
        remaining = len(candidates(top, first_bad, goods)) - len(skipped)
        progress(step, math.ceil(math.log2(remaining + 1)) if remaining > 0 else 0)
    suspects = [s for s, _ in candidates(top, first_bad, goods)]
    culprit = revision(top, first_bad)
    if suspects:  # only skipped commits are left before the first known bad one
        between = run_git(top, "rev-list", "--reverse", first_bad, "--not", *goods).stdout.split()
        chain = tuple(revision(top, sha) for sha in between)
        return Bisection(good, bad, test_id, key, tuple(steps), None, chain, RANGE)
    parent_sha = run_git(top, "rev-parse", f"{first_bad}^").stdout.strip()
    parent = revision(top, parent_sha)
    run = measured("explain", culprit, parent, thresholds)
    is_bad, why, result = classify(run, test_id, key)
    steps.append(Step("explain", culprit, parent, is_bad, why, result, run.seconds))
    return Bisection(good, bad, test_id, key, tuple(steps), culprit, status=FOUND)


def check_range(top: Path, good_name: str, bad_name: str) -> tuple[Revision, Revision]:
    """GOOD and BAD resolved, GOOD an ancestor of BAD; :class:`BisectProblem` otherwise."""
    try:
        good = resolve(top, good_name, f"GOOD={good_name}")
        bad = resolve(top, bad_name, f"BAD={bad_name}")
    except GitProblem as exc:
        raise BisectProblem(str(exc)) from None
    if good.sha == bad.sha:
        raise BisectProblem(f"GOOD and BAD are the same commit ({good.short}); nothing between")
    done = run_git(top, "merge-base", "--is-ancestor", good.sha, bad.sha, check=False)
    if done.returncode != 0:
        raise BisectProblem(
            f"GOOD={good_name} ({good.short}) is not an ancestor of BAD={bad_name} "
            f"({bad.short}); give GOOD an older commit of BAD's history (git log {bad_name})"
        )
    return good, bad


#: the most samples a side each commit may take: a commit that cannot tell is skipped, and a
#: skip costs a whole other commit, so each is given the room of the thorough effort (the
#: pytest arguments may say otherwise: they come after)
SAMPLES = 24


def measure_in_worktree(top: Path, invocation: Path, pytest_args: Sequence[str]) -> Measure:
    """The real ``measure``: ``pytest --cnnperf --cnnperf-against=OTHER PYTEST_ARGS`` in a
    worktree of the commit, from the folder there that ``invocation`` is in the checkout."""

    def measure(commit: Revision, against: Revision, thresholds: Thresholds) -> Run:
        started = time.perf_counter()
        tree = Worktree.add(top, commit)
        report = Path(tempfile.mkstemp(prefix="cnnperf-bisect-", suffix=".json")[1])
        try:
            inside = tree.to_worktree(invocation)
            cwd = inside if inside is not None and inside.is_dir() else tree.path
            command = pytest_command(
                f"--cnnperf-against={against.sha}",
                f"--cnnperf-json={report}",
                f"--cnnperf-samples={SAMPLES}",
            )
            if thresholds is not None:
                command += [f"--cnnperf-threshold={thresholds[0]:.6f}"]
                command += [f"--cnnperf-memory-threshold={thresholds[1]:.6f}"]
            done = run_to_the_end([*command, *pytest_args], cwd)
            results = results_of(report)
            return Run(results, None if results else why(done), time.perf_counter() - started)
        finally:
            report.unlink(missing_ok=True)
            tree.remove()

    return measure
