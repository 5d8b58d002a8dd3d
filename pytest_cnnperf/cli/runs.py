"""The ``cnnperf`` commands that run pytest themselves, as the terminal shows them: ``bisect``
(a commit's run after another's, then the report) and ``noise`` (a run after another, then the
profile). The parsing is ``parser``'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..history.commands import bisect_range
from ..model import Result, Revision, units
from ..model.because import plural
from ..reports import bisect as report
from ..reports import table
from ..revision import bisect as bisecting
from ..revision import noise as noise_run
from ..revision.git import GitProblem, toplevel


class RunProblem(Exception):
    """What the command cannot do with what it was given; exit status 2."""


def noise(
    pytest_args: Sequence[str],
    runs: int,
    baselines: Path,
    record: Path | None,
    stream: TextIO,
    *,
    instance: str | None = None,
    replace: bool = False,
    refit: bool = False,
) -> int:
    """``cnnperf noise``: a line a run, then the profile written; ``refit``: every profile
    under ``baselines`` fitted again, measuring nothing."""
    if refit:
        try:
            fitted = noise_run.refit(baselines)
        except noise_run.NoiseProblem as exc:
            raise RunProblem(str(exc)) from None
        for each in fitted:
            stream.write("\n".join(noise_run.lines(each)) + "\n")
        return 0
    if not pytest_args:
        raise RunProblem(
            "give the pytest arguments that select the benchmarks after --, e.g. cnnperf noise "
            "--runs 10 -- tests/perf"
        )

    def progress(i: int, results: tuple[Result, ...]) -> None:
        steps = ", ".join(
            f"{table.short_key(r.config)} {units.seconds(r.measured.step_time_s)}" for r in results
        )
        stream.write(f"run {i + 1}/{runs}: {steps}\n")
        stream.flush()

    try:
        found = noise_run.record(
            pytest_args, runs, baselines, record, progress, instance=instance, replace=replace
        )
    except noise_run.NoiseProblem as exc:
        raise RunProblem(str(exc)) from None
    stream.write("\n".join(noise_run.lines(found)) + "\n")
    return 0


def bisect(
    revisions: Sequence[str],
    history: str | None,
    branch: str | None,
    benchmark: str | None,
    pytest_args: Sequence[str],
    stream: TextIO,
    json_path: Path | None = None,
    markdown_path: Path | None = None,
) -> int:
    """``cnnperf bisect``: the progress as it goes, then the report."""
    if history is not None or branch is not None:
        if len(revisions) != 1:
            raise RunProblem(
                "--history takes the benchmark's test id, not GOOD and BAD: cnnperf bisect "
                "--history TARGET TEST_ID -- PYTEST_ARGS"
            )
    elif len(revisions) != 2:
        raise RunProblem(
            f"give GOOD and BAD (got {plural(len(revisions), 'revision')}"
            "): cnnperf bisect GOOD BAD -- PYTEST_ARGS, or cnnperf bisect --history TARGET "
            "TEST_ID -- PYTEST_ARGS"
        )
    if not pytest_args:
        raise RunProblem(
            "give the pytest arguments that select the benchmark after --, e.g. cnnperf bisect "
            "main~10 main -- tests/perf/test_training.py::test_resnet50"
        )
    cwd = Path.cwd()
    try:
        top = toplevel(cwd, "cnnperf bisect")
    except GitProblem as exc:
        raise RunProblem(str(exc)) from None
    if history is not None or branch is not None:
        good_name, bad_name, said = bisect_range(history, revisions[0], branch)
        stream.write(said + "\n")
    else:
        good_name, bad_name = revisions
    try:
        good, bad = bisecting.check_range(top, good_name, bad_name)
    except bisecting.BisectProblem as exc:
        raise RunProblem(str(exc)) from None
    stream.write(f"measuring {bad} against {good}, then the commits between them\n")
    stream.flush()

    def progress(step: bisecting.Step, left: int) -> None:
        stream.write(report.step_line(step, left) + "\n")
        stream.flush()

    def announce(role: str, commit: Revision, against: Revision) -> None:
        stream.write(f"  measuring {commit.short} {commit.subject[:60]} against {against.short}\n")
        stream.flush()

    measure = bisecting.measure_in_worktree(top, cwd, pytest_args)
    try:
        found = bisecting.bisect(top, good, bad, measure, benchmark, progress, announce)
    except bisecting.BisectProblem as exc:
        raise RunProblem(str(exc)) from None
    except KeyboardInterrupt:
        stream.write("interrupted: nothing is left behind\n")
        return bisecting.INTERRUPTED
    stream.write("\n".join(["", *report.lines(found)]) + "\n")
    if json_path is not None:
        json_path.write_text(json.dumps(report.document(found), indent=1) + "\n")
    if markdown_path is not None:
        markdown_path.write_text(report.render_markdown(found))
    return found.status
