"""``cnnperf noise``: record how much a kind of machine's runs of unchanged code differ.

Runs the selected benchmarks again and again, each run a fresh ``pytest --cnnperf
--cnnperf-save`` process into a folder of its own (the project's baselines are not touched),
summarises every run of every benchmark (its level and spreads, with the instance it ran on),
fits each benchmark's profile from its runs and the kind's widest (``gate.noise``), and writes
them beside the kind of machine's baselines, where stored-baseline verdicts on that kind read
them. Runs are added to the profile already there, from whichever instance of the kind they ran
on: a profile recorded over several instances, days and machine states is worth more than one
recorded in an hour. ``--record`` also keeps every sample (what ``scripts/gate-simulation``
replays).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import socket
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..gate.noise import (
    Run,
    across_instances,
    benchmark_name,
    fit_runs,
    instances_of,
    summarise,
    term,
    widest,
)
from ..model import NoiseProfile, Result, units
from ..model.because import plural
from ..model.noise import BenchmarkNoise, NoiseRun
from ..store import noise as noise_file
from ..store.results_file import now
from .pytest_run import pytest_command, results_of, run_to_the_end, why

#: what a recording file says it holds (the format ``scripts/gate-simulation`` reads)
WHAT = (
    "per-sample step times, calibration times and denied CPU of pytest --cnnperf --cnnperf-save "
    "runs, each a fresh pytest process with fresh sample processes, in the order they ran, "
    "with the instance each ran on"
)


class NoiseProblem(Exception):
    """Recording cannot go on: a run measured nothing, or the recording file is unusable."""


@dataclass(frozen=True)
class Recorded:
    """What a recording gave: the kind's profile, where it was written, its machine, each
    benchmark's profile and runs, and this recording's runs' samples by benchmark."""

    profile: NoiseProfile
    machine: str
    path: Path
    runs: dict[str, list[dict[str, Any]]]
    benchmarks: tuple[tuple[str, BenchmarkNoise], ...] = ()
    #: the instance this recording ran on, and the runs the profile held before it
    instance: str = ""
    earlier: int = 0


def instance_name() -> str:
    """This machine instance: its host name and boot id (a fresh instance boots afresh; two
    instances may share a host name), or the host name alone where there is no boot id."""
    host = socket.gethostname() or "host"
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return host
    return f"{host}/{boot[:8]}"


def one_run(pytest_args: Sequence[str], cwd: Path) -> tuple[Result, ...]:
    """One ``pytest --cnnperf --cnnperf-save`` run into a throw-away baselines folder: its
    measured results."""
    with tempfile.TemporaryDirectory(prefix="cnnperf-noise-") as folder:
        report = Path(folder) / "results.json"
        command = pytest_command(
            "--cnnperf-save",
            f"--cnnperf-baselines={Path(folder) / 'baselines'}",
            f"--cnnperf-json={report}",
            *pytest_args,
        )
        done = run_to_the_end(command, cwd)
        results = tuple(r for r in results_of(report) if r.measurement and r.environment)
        if not results:
            raise NoiseProblem(f"a run measured no benchmark: {why(done)}")
        return results


def _entry(result: Result, instance: str) -> dict[str, Any]:
    samples = result.measured.samples
    return {
        "started": result.recorded or now(),
        "instance": instance,
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


def _run(entry: dict[str, Any]) -> NoiseRun:
    """A kept run's summary (a recording of before instances were kept: instance ``""``)."""
    samples = Run(entry["step_time_s"], entry.get("calibration_s") or [])
    return summarise(samples, str(entry.get("instance", "")), entry.get("started"))


def profiles_of(
    runs: dict[str, list[NoiseRun]], command: str
) -> tuple[NoiseProfile, tuple[tuple[str, BenchmarkNoise], ...]]:
    """Each benchmark's profile fitted from its runs, and the kind's widest."""
    when = now()
    kind = instances_of(list(runs.values()))
    fitted: list[tuple[str, BenchmarkNoise]] = []
    for name, series in sorted(runs.items()):
        try:
            profile: NoiseProfile | None = fit_runs(series, recorded=when, command=command)
        except ValueError:  # too few runs yet: kept, to be fitted once there are enough
            profile = None
        if profile is not None and kind is not None:
            profile = across_instances(profile, kind)
        fitted.append((name, BenchmarkNoise(profile, tuple(series))))
    profiles = [b.profile for _, b in fitted if b.profile is not None]
    if not profiles:
        name, few = min(fitted, key=lambda nb: len(nb[1].runs))
        usable = sum(1 for r in few.runs if r.samples >= 2)
        raise NoiseProblem(
            f"{name} has {plural(usable, 'usable run')}, and a noise profile "
            "needs at least 3 of a benchmark, with 2 samples or more each; record more runs of "
            "it (--runs 3 or more)"
        )
    return widest(profiles, recorded=when, command=command), tuple(fitted)


def record(
    pytest_args: Sequence[str],
    runs: int,
    baselines: Path,
    keep: Path | None = None,
    progress: Callable[[int, tuple[Result, ...]], None] = lambda i, results: None,
    cwd: Path | None = None,
    run: Callable[[Sequence[str], Path], tuple[Result, ...]] = one_run,
    instance: str | None = None,
    replace: bool = False,
) -> Recorded:
    """Record ``runs`` runs of the benchmarks ``pytest_args`` select on this ``instance``, add
    them to the runs the profile under ``baselines`` holds (``replace``: start a new one), fit
    every benchmark's profile and write them for the machine they ran on. ``keep``: a file that
    keeps every sample, added to. ``run`` takes one run (a pytest process of its own)."""
    cwd = cwd or Path.cwd()
    instance = instance or instance_name()
    kept = load_recording(keep) if keep is not None else {}
    new: dict[str, list[dict[str, Any]]] = {}
    environment = None
    for i in range(runs):
        results = run(pytest_args, cwd)
        progress(i, results)
        for result in results:
            assert result.environment is not None
            if environment is not None and result.environment.machine != environment.machine:
                raise NoiseProblem(
                    f"the runs measured on two kinds of machine ({environment.machine} and "
                    f"{result.environment.machine}); record each kind on its own"
                )
            environment = result.environment
            name = benchmark_name(result.module, result.test, result.key)
            new.setdefault(name, []).append(_entry(result, instance))
    assert environment is not None
    machine = environment.machine
    earlier = _earlier(baselines, machine, kept, replace)
    series = {name: list(old) for name, old in earlier.items()}
    for name, entries in new.items():
        series.setdefault(name, []).extend(_run(e) for e in entries)
    command = "cnnperf noise " + shlex.join([f"--runs={runs}", "--", *pytest_args])
    if keep is not None:  # first: the samples are kept even where no profile can be fitted
        from ..store.codec import dump

        for name, entries in new.items():
            kept.setdefault(name, []).extend(entries)
        document = {
            "what": WHAT,
            "recorded": now(),
            "command": command,
            "environment": dump(environment),
            "benchmarks": {name: {"runs": entries} for name, entries in kept.items()},
        }
        keep.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    profile, benchmarks = profiles_of(series, command)
    path = noise_file.write(baselines, machine, profile, benchmarks)
    held = sum(map(len, earlier.values()))
    return Recorded(profile, machine, path, new, benchmarks, instance, held)


def refit(baselines: Path) -> list[Recorded]:
    """Fit every noise profile under ``baselines`` again from the runs it holds, measuring
    nothing: after an upgrade of pytest-cnnperf that fits them otherwise."""
    found = []
    for path in sorted(baselines.glob(f"*/{noise_file.FILE_NAME}")):
        machine = path.parent.name
        try:
            document = noise_file.read_file(baselines, machine)
        except noise_file.NoiseProfileError as exc:
            raise NoiseProblem(f"{exc}; or record it again with --replace") from None
        assert document is not None
        runs = {name: list(b.runs) for name, b in document.benchmarks if b.runs}
        if not runs:
            raise NoiseProblem(
                f"{path} keeps no runs to fit again; record it again: "
                "cnnperf noise --replace -- PYTEST_ARGS"
            )
        command = document.profile.command or "cnnperf noise"
        profile, benchmarks = profiles_of(runs, command)
        written = noise_file.write(baselines, document.machine, profile, benchmarks)
        found.append(Recorded(profile, document.machine, written, {}, benchmarks, "", 0))
    if not found:
        raise NoiseProblem(
            f"no noise profile under {baselines} to fit again; record one: cnnperf noise -- "
            "PYTEST_ARGS"
        )
    return found


def _earlier(
    baselines: Path, machine: str, kept: dict[str, list[dict[str, Any]]], replace: bool
) -> dict[str, list[NoiseRun]]:
    """The runs a recording adds to: those of the profile beside the baselines, and those of
    the recording file it lacks; none with ``replace``."""
    if replace:
        return {}
    try:
        document = noise_file.read_file(baselines, machine)
    except noise_file.NoiseProfileError as exc:
        raise NoiseProblem(f"{exc}; or give --replace to record a new one over it") from None
    held = {name: list(b.runs) for name, b in document.benchmarks} if document else {}
    for name, entries in kept.items():
        series = held.setdefault(name, [])
        known = {(r.instance, r.started) for r in series}
        series += [run for run in map(_run, entries) if (run.instance, run.started) not in known]
    return {name: series for name, series in held.items() if series}


def lines(found: Recorded) -> list[str]:
    """What the command prints once the profile is written: a line a benchmark, the spread its
    verdicts allow for, and the kind's widest, which a benchmark it never saw is given."""
    p = found.profile
    added = f"added to the {found.earlier} runs it held" if found.earlier else "a new profile"
    out = [
        f"{found.machine}: {sum(map(len, found.runs.values()))} runs recorded on instance "
        f"{found.instance}, {added}"
        if found.instance
        else f"{found.machine}: fitted again from the {p.runs} runs it holds"
    ]
    for name, benchmark in found.benchmarks:
        if benchmark.profile is None:
            out.append(
                f"  {name}: {plural(len(benchmark.runs), 'run')}, 3 needed for its own spread: "
                "the kind's widest until then"
            )
        else:
            out.append(f"  {name}: {describe_benchmark(benchmark.profile)}")
    out.append(
        f"  a benchmark it never saw: {describe_benchmark(p)} (the widest of the {p.benchmarks})"
    )
    out.append(f"wrote {found.path}; commit it beside the baselines")
    return out


def describe_benchmark(p: NoiseProfile) -> str:
    """``runs differ by 8.3% as measured, 2.1% after calibration, over 20 runs on 1 instance``:
    the terms a verdict allows for, their uncertainty included."""
    said = f"runs differ by {units.percent(term(p, calibrated=False))} as measured"
    if p.between_calibrated is not None:
        said += f", {units.percent(term(p, calibrated=True))} after calibration"
    said += f", over {p.runs} runs on {plural(p.instances, 'instance')}"
    if p.instances_borrowed:
        said += " (and the instances' part of the kind's other benchmarks)"
    if p.modes > 1 and p.mode_gap is not None:
        said += (
            f"; two speeds {units.percent(math.exp(p.mode_gap) - 1)} apart ({p.fast_runs} of "
            f"{p.runs} runs the faster)"
        )
    return said
