"""A pytest run of the benchmarks in a child process, as ``cnnperf bisect`` and ``cnnperf noise``
start them: run to the end (interrupted, it cleans up first), the results its JSON file holds,
and why it measured nothing, in a line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..model import Result
from ..store.results_file import RESULTS

#: how long an interrupted pytest run may take to clean up (its worktree, its processes)
CLEANUP_S = 60.0


def pytest_command(*options: str, start: Sequence[str] = ("-m", "pytest")) -> list[str]:
    """``pytest --cnnperf OPTIONS`` in this interpreter, quiet, writing no cache into the
    checkout; ``start``: how the interpreter starts pytest."""
    return [sys.executable, *start, "-p", "no:cacheprovider", "-q", "--cnnperf", *options]


def run_to_the_end(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run pytest; interrupted, let it end in order (it removes its own worktree and ends its
    processes) before the interrupt goes on."""
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = process.communicate()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)  # a terminal's Ctrl-C reached it too; a kill did not
        try:
            process.wait(timeout=CLEANUP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def results_of(path: Path) -> tuple[Result, ...]:
    """The results a run's ``--cnnperf-json`` file holds; none where it wrote none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    if not isinstance(data, dict) or RESULTS.version_problem(data):
        return ()
    return RESULTS.load(data).results


def why(done: subprocess.CompletedProcess[str]) -> str:
    """Why a run measured nothing, in a line: the error pytest named, or the end of what it
    said."""
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    collecting = any("error during collection" in line for line in lines)
    if errors and collecting:
        return f"its tests cannot be collected: {errors[-1]}"
    if errors:
        return f"pytest exited with status {done.returncode}: {errors[-1]}"
    return f"pytest exited with status {done.returncode}: {lines[-1] if lines else 'no output'}"
