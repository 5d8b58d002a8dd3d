"""What the pytest process and its sample processes tell each other, and how it is written.

The pytest process asks for a sample with a :class:`Job` (which benchmark call of which test,
the results of the calls before it, where to write the answer); the sample process answers with
a :class:`ChildReport` (the sample and its environment, or the error). Both are JSON documents
with a schema and a version, written by ``store.codec``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..measuring.sample import SamplePlan
from ..model import Environment, Result, Sample
from ..model.values import Count, PositiveInt
from ..store.codec import Document
from ..store.locations import display_path


class BenchmarkError(Exception):
    """A benchmark could not be measured; the message says what was being measured and why.
    ``problem``: ``absent`` when the code measured does not make the benchmark call asked for
    (the test is not there, or makes other calls), ``leak`` when the revision gated against
    imported the project from outside its worktree (``revision.imports``)."""

    def __init__(self, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem


@dataclass(frozen=True)
class Site:
    """A benchmark call: the test that makes it, and which of its calls it is."""

    nodeid: str
    #: the test's file
    path: str
    #: the call's position among the test's benchmark calls
    index: Count
    #: the configuration key the call measures; :data:`ANY_KEY`: whichever it is (a count
    #: taken ahead of the test, whose calls the pytest process has not seen yet)
    key: str


#: ``Site.key`` of a call measured whatever its configuration
ANY_KEY = ""


@dataclass(frozen=True)
class TakenSample:
    """One sample as a sample process took it, with the environment it belongs to."""

    sample: Sample
    environment: Environment


@dataclass(frozen=True)
class Job:
    """What a sample process is asked to do."""

    site: Site
    #: the results of the test's benchmark calls before this one, which the process answers
    #: with instead of measuring them
    replay: tuple[Result, ...]
    #: the file to write the report to
    out: str
    rank: Count = 0
    world_size: PositiveInt = 1
    #: the file the ranks of a data-parallel sample meet through
    rendezvous: str | None = None
    #: the pytest process, which NVML must not count as another user of the GPU
    parent_pid: int = 0
    #: whether this sample also measures peak memory
    memory: bool = True
    #: whether this sample also counts the step's FLOPs and operators and computes its first
    #: steps' numbers (the benchmark's first)
    counted: bool = False
    #: whether this sample also profiles the step's operators (the benchmark's first)
    profile: bool = False
    #: how to take the sample, when it is not the sample process's own (the revision gated
    #: against takes the head's)
    plan: SamplePlan | None = None


@dataclass(frozen=True)
class ChildReport:
    """What a sample process answers: its sample, or why it has none (``problem``: its kind,
    see :class:`BenchmarkError`)."""

    taken: TakenSample | None = None
    error: str | None = None
    rank: Count = 0
    #: when the error happened (``time.time()``): among ranks, the earliest is the cause
    failed_at: float | None = None
    problem: str | None = None
    #: the configuration key of the call measured
    key: str | None = None


JOB: Document[Job] = Document("pytest-cnnperf/job", 2, Job, "job")
CHILD_REPORT: Document[ChildReport] = Document(
    "pytest-cnnperf/sample-report", 2, ChildReport, "sample report"
)


def write_report(job: Job, report: ChildReport) -> None:
    """Write the report where the job said, atomically (the reader may be waiting for it)."""
    path = Path(job.out)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(CHILD_REPORT.dump(report)), encoding="utf-8")
    os.replace(temporary, path)


def read_report(path: Path) -> ChildReport:
    """The report a sample process wrote; ``OSError`` or ``ValueError`` when there is none."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("a sample report is a JSON object")
    return CHILD_REPORT.load(data)


def describe_error(exc: BaseException) -> str:
    """The exception and where in the user's code it came from, without torch's frames: the
    line of the user's that raised it, or, when it was raised in ours (a check of what the
    user's model gave), the user's line that called us (the caller must be in the ``except``
    block that caught it, below that line)."""
    import traceback

    from ..measuring.compiled import CompileFailed

    if isinstance(exc, CompileFailed):  # the compiler's own message, already trimmed
        return str(exc)
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    ours = os.path.dirname(os.path.dirname(__file__))
    torch_dir = f"{os.sep}torch{os.sep}"

    def users(frames: traceback.StackSummary) -> list[traceback.FrameSummary]:
        return [
            f for f in frames if not f.filename.startswith(ours) and torch_dir not in f.filename
        ]

    raised = users(traceback.extract_tb(exc.__traceback__))
    called = users(traceback.extract_stack(sys._getframe(1)))
    if raised:
        frame, how = raised[-1], "raised"
    elif called:
        frame, how = called[-1], "called"
    else:
        return text
    return f"{text} ({how} at {display_path(frame.filename)}:{frame.lineno} in {frame.name})"


#: the error of a rank stopped because another one failed
STOPPED = "stopped because another rank failed"


def cause(errors: list[ChildReport]) -> ChildReport:
    """Of the failed processes of one sample (the first to exit first), the one whose error
    caused the others'. A process that died without reporting its error (a crash, a kill) died
    the moment it failed, so when the first to exit did, it is the cause; otherwise the earliest
    reported failure is, since the ranks it left waiting exit in any order."""
    first = errors[0]
    if first.failed_at is None:
        return first
    return min((e for e in errors if e.failed_at is not None), key=lambda e: e.failed_at or 0.0)
