"""``cnnperf noise``: record how much a kind of machine's runs of unchanged code differ.

Runs the selected benchmarks again and again, each run a fresh ``pytest --cnnperf
--cnnperf-save`` process into a folder of its own (the project's baselines are not touched),
keeps every sample's step and calibration time in the order taken, fits a noise profile
(``gate.noise.fit``) and writes it beside the kind of machine's baselines, where stored-baseline
verdicts on that kind read it. The raw runs can be kept in a file and added to later: a profile
recorded over several days and machine states is worth more than one recorded in an hour.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..gate.noise import Run, fit
from ..model import NoiseProfile, Result, units
from ..store import noise as noise_file
from .pytest_run import results_of, run_to_the_end, why

#: what a recording file says it holds (the format ``scripts/gate-simulation`` reads)
WHAT = (
    "per-sample step times, calibration times and denied CPU of pytest --cnnperf --cnnperf-save "
    "runs, each a fresh pytest process with fresh sample processes, in the order they ran"
)


class NoiseProblem(Exception):
    """Recording cannot go on: a run measured nothing, or the recording file is unusable."""


@dataclass(frozen=True)
class Recorded:
    """What a recording gave: the profile, where it was written, its machine and its runs."""

    profile: NoiseProfile
    machine: str
    path: Path
    runs: dict[str, list[dict[str, Any]]]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def one_run(pytest_args: Sequence[str], cwd: Path) -> tuple[Result, ...]:
    """One ``pytest --cnnperf --cnnperf-save`` run into a throw-away baselines folder: its
    measured results."""
    with tempfile.TemporaryDirectory(prefix="cnnperf-noise-") as folder:
        report = Path(folder) / "results.json"
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--cnnperf"]
        command += ["--cnnperf-save", f"--cnnperf-baselines={Path(folder) / 'baselines'}"]
        command += [f"--cnnperf-json={report}", *pytest_args]
        done = run_to_the_end(command, cwd)
        results = tuple(r for r in results_of(report) if r.measurement and r.environment)
        if not results:
            raise NoiseProblem(f"a run measured no benchmark: {why(done)}")
        return results


def _entry(result: Result) -> dict[str, Any]:
    samples = result.measured.samples
    return {
        "started": result.recorded or _now(),
        "step_time_s": [s.step_time_s for s in samples],
        "calibration_s": [s.calibration_s for s in samples],
        "cpu_contention": [s.cpu_contention for s in samples],
        "load_average": round(os.getloadavg()[0], 2),
    }


def load_recording(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The runs a recording file holds, by benchmark (none where there is no file)."""
    if not path.exists():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {name: list(b["runs"]) for name, b in document["benchmarks"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NoiseProblem(
            f"{path} is not a noise recording ({exc!r}); name another file with --record, or "
            "delete it to start a new recording"
        ) from None


def profile_of(runs: dict[str, list[dict[str, Any]]], command: str) -> NoiseProfile:
    """The profile fitted from recorded runs, by benchmark."""
    series = [
        [Run(r["step_time_s"], r.get("calibration_s") or []) for r in benchmark]
        for benchmark in runs.values()
    ]
    return fit(series, recorded=_now(), command=command)


def record(
    pytest_args: Sequence[str],
    runs: int,
    baselines: Path,
    keep: Path | None = None,
    progress: Callable[[int, tuple[Result, ...]], None] = lambda i, results: None,
    cwd: Path | None = None,
    run: Callable[[Sequence[str], Path], tuple[Result, ...]] = one_run,
) -> Recorded:
    """Record ``runs`` runs of the benchmarks ``pytest_args`` select (added to those ``keep``
    holds), fit the profile and write it under ``baselines`` for the machine they ran on.
    ``run`` takes one run (a pytest process of its own)."""
    cwd = cwd or Path.cwd()
    recorded = load_recording(keep) if keep is not None else {}
    machine = None
    environment = None
    for i in range(runs):
        results = run(pytest_args, cwd)
        progress(i, results)
        for result in results:
            assert result.environment is not None
            if machine is not None and result.environment.machine != machine:
                raise NoiseProblem(
                    f"the runs measured on two kinds of machine ({machine} and "
                    f"{result.environment.machine}); record each kind on its own"
                )
            machine, environment = result.environment.machine, result.environment
            recorded.setdefault(f"{result.test} [{result.key}]", []).append(_entry(result))
    assert machine is not None
    assert environment is not None
    command = "cnnperf noise " + shlex.join([f"--runs={runs}", "--", *pytest_args])
    profile = profile_of(recorded, command)
    path = noise_file.write(baselines, machine, profile)
    if keep is not None:
        from ..store.codec import dump

        document = {
            "what": WHAT,
            "recorded": _now(),
            "command": command,
            "environment": dump(environment),
            "benchmarks": {name: {"runs": series} for name, series in recorded.items()},
        }
        keep.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return Recorded(profile, machine, path, recorded)


def lines(found: Recorded) -> list[str]:
    """What the command prints once the profile is written."""
    p = found.profile
    out = [
        f"{found.machine}: {p.runs} runs of {p.benchmarks} benchmarks",
        f"  a run's samples spread by {units.percent(p.within)} (the median over runs)",
        f"  a run's level moves by {units.percent(p.between)} from run to run, as measured",
    ]
    if p.between_calibrated is not None and p.drift_covered is not None:
        out.append(
            f"  and by {units.percent(p.between_calibrated)} after dividing by the calibration "
            f"workload's (which drifted by up to {units.percent(p.drift_covered)} between runs)"
        )
    out.append(f"wrote {found.path}; commit it beside the baselines")
    return out
