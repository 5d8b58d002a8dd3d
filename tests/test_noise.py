"""A kind of machine's noise profile: fitted from recorded runs, written beside the baselines by
``cnnperf noise``, read back by the gate; a file that cannot be used is refused naming it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from factories import ENV, result

from pytest_cnnperf.cli import main
from pytest_cnnperf.gate import noise
from pytest_cnnperf.model import Result
from pytest_cnnperf.revision import noise as recording
from pytest_cnnperf.store import noise as noise_file


def runs_of(levels: Sequence[float], spread: float, seed: int) -> list[noise.Run]:
    """Runs of 15 samples around each level (log-normal ``spread``), with a calibration that
    follows the run's level exactly."""
    rng = np.random.default_rng(seed)
    runs = []
    for level in levels:
        steps = 0.04 * np.exp(level + rng.normal(0, spread, 15))
        calibrations = 1e-3 * np.exp(level + rng.normal(0, spread, 15))
        runs.append(noise.Run(tuple(steps), tuple(calibrations)))
    return runs


def test_the_between_run_spread_is_what_the_samples_do_not_explain() -> None:
    """Runs whose levels move by 8% while their samples spread by 2%: the profile's between-run
    spread is the 8%, after dividing by a calibration that follows the runs almost nothing; and
    that division is what lowers a verdict's variance."""
    levels = np.random.default_rng(0).normal(0, 0.08, 40)
    profile = noise.fit([runs_of(levels, 0.02, seed=1)], recorded="now", command="test")
    assert profile.between == pytest.approx(0.08, rel=0.25)
    assert profile.within == pytest.approx(0.02, rel=0.25)
    assert profile.between_calibrated is not None
    assert profile.between_calibrated < 0.01
    assert profile.drift_covered == pytest.approx(np.ptp(levels), rel=0.2)
    assert noise.calibrates(profile, 12, 6)
    # runs that do not move: the samples explain all, the floor stands, no calibration helps
    steady = noise.fit([runs_of([0.0] * 40, 0.02, seed=2)], recorded="now", command="test")
    assert steady.between == noise.FLOOR
    assert not noise.calibrates(steady, 12, 6)


def test_too_few_runs_cannot_make_a_profile() -> None:
    with pytest.raises(ValueError, match="at least 3 runs of each benchmark"):
        noise.fit([runs_of([0.0, 0.1], 0.02, seed=1)], recorded="now", command="test")


def fake_runs(levels: Sequence[float]) -> Callable[[Sequence[str], Path], tuple[Result, ...]]:
    """A stand-in for a pytest run: the next level's samples of one benchmark."""
    pending = list(levels)

    def run(pytest_args: Sequence[str], cwd: Path) -> tuple[Result, ...]:
        level = pending.pop(0)
        steps = list(0.04 * np.exp(level + np.random.default_rng(len(pending)).normal(0, 0.02, 12)))
        return (result(steps, calibration=1e-3 * np.exp(level)),)

    return run


def test_recording_writes_the_profile_beside_the_baselines_and_keeps_the_runs(
    tmp_path: Path,
) -> None:
    baselines, keep = tmp_path / "baselines", tmp_path / "runs.json"
    found = recording.record(["t.py"], 4, baselines, keep, run=fake_runs([0, 0.05, -0.05, 0.1]))
    assert found.path == baselines / ENV.machine / "noise-profile.json"
    assert noise_file.read(baselines, ENV.machine) == found.profile
    assert found.profile.runs == 4
    kept = json.loads(keep.read_text())
    (series,) = kept["benchmarks"].values()
    assert len(series["runs"]) == 4
    # the next recording adds to the runs kept
    more = recording.record(["t.py"], 2, baselines, keep, run=fake_runs([0.02, -0.02]))
    assert more.profile.runs == 6
    assert recording.lines(more)[-1] == (
        f"wrote {baselines / ENV.machine / 'noise-profile.json'}; commit it beside the baselines"
    )


def test_a_run_that_measured_nothing_stops_the_recording_saying_why(tmp_path: Path) -> None:
    def nothing(pytest_args: Sequence[str], cwd: Path) -> tuple[Result, ...]:
        raise recording.NoiseProblem("a run measured no benchmark: its tests cannot be collected")

    with pytest.raises(recording.NoiseProblem, match="measured no benchmark"):
        recording.record(["t.py"], 3, tmp_path, run=nothing)


def test_the_command_needs_the_pytest_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["noise", "--runs", "3"]) == 2
    assert capsys.readouterr().err == (
        "cnnperf noise: give the pytest arguments that select the benchmarks after --, e.g. "
        "cnnperf noise --runs 10 -- tests/perf\n"
    )


def test_a_profile_file_that_cannot_be_used_is_refused_naming_it_and_the_fix(
    tmp_path: Path,
) -> None:
    where = noise_file.write(tmp_path, "cpu-x-2t", noise.default("cpu"))
    data = json.loads(where.read_text())
    data["profile"]["between"] = -0.1
    where.write_text(json.dumps(data))
    with pytest.raises(noise_file.NoiseProfileError) as caught:
        noise_file.read(tmp_path, "cpu-x-2t")
    assert str(caught.value) == (
        f"noise profile {where} cannot be used: it is malformed: file.profile.between: expected a "
        "number of at least 0, found float -0.1. Record it again with `cnnperf noise -- "
        "PYTEST_ARGS`, or delete it to gate with the device's default noise"
    )
    copied = tmp_path / "cpu-y-2t" / "noise-profile.json"
    copied.parent.mkdir()
    copied.write_text(where.read_text().replace("-0.1", "0.1"))
    with pytest.raises(noise_file.NoiseProfileError, match="the profile of machine 'cpu-x-2t'"):
        noise_file.read(tmp_path, "cpu-y-2t")


def test_the_gate_reads_the_profile_of_its_kind_of_machine(tmp_path: Path) -> None:
    recorded = dataclasses.replace(noise.default("cpu"), source="recorded", runs=12)
    noise_file.write(tmp_path, ENV.machine, recorded)
    assert noise_file.read(tmp_path, ENV.machine) == recorded
    assert noise_file.read(tmp_path, "cpu-other-2t") is None
