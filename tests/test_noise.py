"""A kind of machine's noise profile: fitted from recorded runs, written beside the baselines by
``cnnperf noise``, read back by the gate; a file that cannot be used is refused naming it."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from factories import ENV, one_look, result

from pytest_cnnperf.cli import main
from pytest_cnnperf.gate import noise
from pytest_cnnperf.gate.decide import decide
from pytest_cnnperf.gate.policy import CPU, GateSettings
from pytest_cnnperf.gate.throughput import throughput_at
from pytest_cnnperf.model import Decision, NoiseProfile, Result, Verdict, units
from pytest_cnnperf.model.noise import NoiseRun
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


def fit(benchmarks: Sequence[Sequence[noise.Run]]) -> NoiseProfile:
    """The widest profile of runs recorded on one instance, by benchmark (what a benchmark the
    profile never saw is given)."""
    fitted = [
        noise.fit_runs([noise.summarise(r, "") for r in series], recorded="now", command="test")
        for series in benchmarks
    ]
    return noise.widest(fitted, recorded="now", command="test")


def test_the_between_run_spread_is_what_the_samples_do_not_explain() -> None:
    """Runs whose levels move by 8% while their samples spread by 2%: the profile's between-run
    spread is the 8%, after dividing by a calibration that follows the runs almost nothing; and
    that division is what lowers a verdict's variance."""
    levels = np.random.default_rng(0).normal(0, 0.08, 40)
    profile = fit([runs_of(levels, 0.02, seed=1)])
    assert profile.between == pytest.approx(0.08, rel=0.25)
    assert profile.within == pytest.approx(0.02, rel=0.25)
    assert profile.between_calibrated is not None
    assert profile.between_calibrated < 0.01
    assert profile.drift_covered == pytest.approx(np.ptp(levels), rel=0.2)
    assert noise.calibrates(profile, 12, 6)
    # runs that do not move: the samples explain all, the floor stands, no calibration helps
    steady = fit([runs_of([0.0] * 40, 0.02, seed=2)])
    assert steady.between == noise.FLOOR
    assert not noise.calibrates(steady, 12, 6)


def test_too_few_runs_cannot_make_a_profile() -> None:
    with pytest.raises(ValueError, match="at least 3 runs of each benchmark"):
        fit([runs_of([0.0, 0.1], 0.02, seed=1)])


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


# ---- per benchmark, instances, modes, the improved bound, the old form (issue 51) ----

QUIET_NET = "test_m::test_quiet [train_step m bs=8 64x64 opt=sgd]"
NOISY_NET = "test_m::test_noisy [train_step m bs=8 64x64 opt=sgd]"
LOOK = one_look(CPU.gate.alpha, CPU.gate.beta)
SETTINGS = GateSettings(CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False)


def kept_runs(
    levels: Sequence[float],
    instance: str = "vm/aaaa",
    residual: float = 0.01,
    follows: bool = True,
) -> list[NoiseRun]:
    """Runs of 12 samples at ``levels`` (log), each with a calibration that follows the run's
    level (or, not ``follows``, stays put) but for ``residual`` of noise of its own."""
    rng = np.random.default_rng(len(levels))
    return [
        NoiseRun(
            instance,
            12,
            level,
            0.02,
            calibration_level=(level if follows else 0.0) + float(rng.normal(0, residual)) - 3.0,
            calibration_spread=0.02,
            residual_spread=0.015,
        )
        for level in levels
    ]


def spread_levels(n: int, sd: float, seed: int) -> list[float]:
    """``n`` levels whose spread is exactly ``sd`` (log)."""
    raw = np.random.default_rng(seed).normal(0, 1, n)
    return list(-3.2 + sd * (raw - raw.mean()) / raw.std(ddof=1))


def profile_file(tmp_path: Path, **runs: list[NoiseRun]) -> Path:
    """A profile of each named benchmark's runs, written as ``cnnperf noise`` writes it."""
    found = {QUIET_NET if k == "quiet" else NOISY_NET: v for k, v in runs.items()}
    kind, benchmarks = recording.profiles_of(found, "cnnperf noise -- t.py")
    noise_file.write(tmp_path, ENV.machine, kind, benchmarks)
    return tmp_path


def gated(factor: float, profile: NoiseProfile | None, seed: int = 2) -> Decision:
    """12 samples ``factor`` times the baseline's step time, against it, at one look."""
    base = result(list(0.04 * np.exp(np.random.default_rng(1).normal(0, 0.02, 12)))).as_baseline()
    steps = list(0.04 * factor * np.exp(np.random.default_rng(seed).normal(0, 0.02, 12)))
    current = result(steps)
    throughput = throughput_at(current, base, SETTINGS, LOOK, profile)
    return decide(current, base, SETTINGS, LOOK, throughput=throughput)


def test_each_benchmark_allows_for_its_own_spread(tmp_path: Path) -> None:
    """Two benchmarks of one kind of machine, one whose runs differ by 1% after calibration and
    one by 6%: each verdict allows for its own, not one term for the kind; the same samples are
    ok for the first and inconclusive for the second."""
    root = profile_file(
        tmp_path,
        quiet=kept_runs(spread_levels(20, 0.08, 1), residual=0.01),
        noisy=kept_runs(spread_levels(20, 0.08, 2), residual=0.06),
    )
    quiet = noise_file.read(root, ENV.machine, QUIET_NET)
    noisy = noise_file.read(root, ENV.machine, NOISY_NET)
    assert quiet is not None
    assert noisy is not None
    assert quiet.source == noisy.source == "recorded"
    assert quiet.between_calibrated is not None
    assert noisy.between_calibrated is not None
    assert quiet.between_calibrated < 0.02 < 0.04 < noisy.between_calibrated
    assert gated(1.0, quiet).verdict is Verdict.OK
    assert gated(1.0, noisy).verdict is Verdict.INCONCLUSIVE


def test_the_term_allows_for_how_few_runs_the_profile_holds() -> None:
    """The same spread from 5 runs and from 40: the term from 5 is wider (the chi-square bound
    at 80%), and both are wider than the estimate itself."""
    few = noise.fit_runs(kept_runs(spread_levels(5, 0.05, 3)), recorded="", command="")
    many = noise.fit_runs(kept_runs(spread_levels(40, 0.05, 3)), recorded="", command="")
    assert few.freedom == 4
    assert many.freedom == 39
    assert noise.term(few, calibrated=False) > noise.term(many, calibrated=False) > many.between
    assert noise.uncertainty(4) == pytest.approx(1.54, abs=0.02)
    assert noise.uncertainty(39) == pytest.approx(1.12, abs=0.01)


def test_a_benchmark_the_profile_never_saw_gets_the_widest_spread_and_says_so(
    tmp_path: Path,
) -> None:
    root = profile_file(
        tmp_path,
        quiet=kept_runs(spread_levels(20, 0.08, 1), residual=0.01),
        noisy=kept_runs(spread_levels(20, 0.08, 2), residual=0.06),
    )
    other = noise_file.read(root, ENV.machine, "test_m::test_other [train_step m bs=8]")
    noisy = noise_file.read(root, ENV.machine, NOISY_NET)
    assert other is not None
    assert noisy is not None
    assert other.source == "widest"
    assert noise.term(other, calibrated=True) == pytest.approx(noise.term(noisy, calibrated=True))
    decision = gated(1.0, other)
    (said,) = [str(r) for r in decision.reasons if str(r).startswith("no noise profile")]
    assert said == (
        "no noise profile for this benchmark: the kind's widest spread assumed (runs differ by "
        f"{units.percent(noise.term(noisy, calibrated=True))} after calibration, the widest of 2 "
        "benchmarks recorded); `cnnperf noise -- PYTEST_ARGS` with arguments that select this "
        "test records its own"
    )
    # a benchmark the profile recorded says nothing of the kind
    assert not any(str(r).startswith("no noise profile") for r in gated(1.0, noisy).reasons)


def test_runs_at_two_speeds_are_found_allowed_for_and_named_in_the_verdict() -> None:
    """14 runs at one speed and 6 about 35% faster, the calibration following neither: two
    modes, and a term that spans them, so a run in the fast mode against a baseline recorded in
    the slow one is neither improved nor ok, and says why."""
    rng = np.random.default_rng(5)
    levels = [-3.0 + float(rng.normal(0, 0.02)) for _ in range(14)]
    levels += [-3.0 - 0.3 + float(rng.normal(0, 0.02)) for _ in range(6)]
    profile = noise.fit_runs(kept_runs(levels, follows=False), recorded="now", command="t")
    assert (profile.modes, profile.fast_runs) == (2, 6)
    assert profile.mode_gap == pytest.approx(0.3, abs=0.03)
    assert noise.term(profile, calibrated=True) > 0.15
    decision = gated(math.exp(-0.3), profile)  # the fast mode against a slow baseline
    assert decision.verdict is Verdict.INCONCLUSIVE
    (said,) = [str(r) for r in decision.reasons if "two speeds" in str(r)]
    term = units.percent(noise.term(profile, calibrated=True))
    assert said == (
        f"this benchmark runs at two speeds {units.percent(math.exp(profile.mode_gap) - 1)} "
        "apart on this kind of machine (6 of 20 runs of its noise profile the faster), so its "
        f"verdicts allow for a run in either: runs differ by {term}; find what sets its speed, "
        "or gate it against the base revision in the same job (--cnnperf-against=REV), whose "
        "samples meet the same speeds"
    )
    # one mode: levels of one normal spread are never split
    one = noise.fit_runs(kept_runs(spread_levels(60, 0.05, 4)), recorded="", command="")
    assert one.modes == 1
    assert one.mode_gap is None


def test_the_term_covers_instances_not_only_runs() -> None:
    """Two instances whose runs each differ by 2% but sit 8% apart: the spread within one
    instance understates what a baseline recorded on the other meets; the profile of both holds
    the instances' part, with the freedom of two instances."""
    a = kept_runs(spread_levels(10, 0.02, 6), instance="vm/aaaa")
    b = kept_runs([level + 0.08 for level in spread_levels(10, 0.02, 7)], instance="vm/bbbb")
    one = noise.fit_runs(a, recorded="", command="")
    both = noise.fit_runs([*a, *b], recorded="", command="")
    assert (one.instances, both.instances) == (1, 2)
    assert one.between == pytest.approx(0.02, abs=0.005)
    assert both.between > 0.05
    assert both.freedom is not None
    assert both.freedom < 5
    assert noise.term(both, calibrated=False) > 2 * both.between


def test_a_recording_on_another_instance_adds_to_the_profile_keeping_where_each_ran(
    tmp_path: Path,
) -> None:
    first = recording.record(
        ["t.py"], 4, tmp_path, run=fake_runs([0, 0.05, -0.05, 0.1]), instance="vm/aaaa"
    )
    assert (first.profile.instances, first.earlier) == (1, 0)
    second = recording.record(
        ["t.py"], 3, tmp_path, run=fake_runs([0.3, 0.35, 0.25]), instance="vm/bbbb"
    )
    assert second.earlier == 4
    document = noise_file.read_file(tmp_path, ENV.machine)
    assert document is not None
    ((name, benchmark),) = document.benchmarks
    assert name == "test_m::test_m [train_step m bs=8 64x64]"
    assert [r.instance for r in benchmark.runs] == ["vm/aaaa"] * 4 + ["vm/bbbb"] * 3
    assert benchmark.profile.instances == 2
    assert benchmark.profile.between > first.profile.between
    assert recording.lines(second)[:2] == [
        f"{ENV.machine}: 3 runs recorded on instance vm/bbbb, added to the 4 runs it held",
        f"  {name}: {recording.describe_benchmark(benchmark.profile)}",
    ]
    # --replace starts afresh
    fresh = recording.record(
        ["t.py"], 3, tmp_path, run=fake_runs([0, 0.01, 0.02]), instance="vm/cccc", replace=True
    )
    assert (fresh.earlier, fresh.profile.instances) == (0, 1)


def test_improved_needs_the_gain_beyond_the_threshold_after_every_term() -> None:
    """12% faster than the baseline, the bounds allowing for runs that differ by 3%: the gain's
    bound at the false-alarm level is not beyond 10%, so ok, not improved; 40% faster is
    improved."""
    steady = NoiseProfile(
        within=0.02, between=0.03, between_calibrated=0.03, calibration_within=0.02
    )
    near = gated(1 / 1.12, steady)
    assert near.throughput is not None
    assert near.throughput.change < -0.10  # the estimate is past the threshold
    assert near.verdict is Verdict.OK
    assert gated(1 / 1.4, steady).verdict is Verdict.IMPROVED


def test_a_profile_of_a_version_no_release_wrote_is_refused_with_the_fix(tmp_path: Path) -> None:
    """Version 1 (one profile for the kind) came before 0.1.0: it is not read, and the message
    says how to get one that is."""
    where = tmp_path / ENV.machine / "noise-profile.json"
    where.parent.mkdir()
    version_1 = {"machine": ENV.machine, "profile": {"between": 0.1}}
    version_1 |= {"schema": "pytest-cnnperf/noise-profile", "schema_version": 1}
    where.write_text(json.dumps(version_1))
    with pytest.raises(noise_file.NoiseProfileError) as caught:
        noise_file.read(tmp_path, ENV.machine, QUIET_NET)
    assert str(caught.value) == (
        f"noise profile {where} cannot be used: its schema_version 1 is older than this "
        "pytest-cnnperf reads (noise profile schema version 2). Record it again with `cnnperf "
        "noise -- PYTEST_ARGS`, or delete it to gate with the device's default noise"
    )


def test_a_benchmark_with_too_few_runs_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(recording.NoiseProblem) as caught:
        recording.record(["t.py"], 2, tmp_path, run=fake_runs([0, 0.05]), instance="vm/aaaa")
    assert str(caught.value) == (
        "test_m::test_m [train_step m bs=8 64x64] has 2 usable runs, and a noise profile needs "
        "at least 3 of a benchmark, with 2 samples or more each; record more runs of it "
        "(--runs 3 or more)"
    )


def test_a_benchmark_with_too_few_runs_yet_is_kept_until_it_has_enough(tmp_path: Path) -> None:
    """Beside a benchmark with a profile, another recorded twice: its runs are kept, it gets the
    kind's widest meanwhile, and a third run gives it its own."""
    recording.record(["t.py"], 3, tmp_path, run=fake_runs([0, 0.05, 0.1]), instance="vm/a")
    other = "tests/test_m.py::test_other"

    def second(levels: Sequence[float]) -> Callable[[Sequence[str], Path], tuple[Result, ...]]:
        runs = fake_runs(levels)
        return lambda args, cwd: tuple(
            dataclasses.replace(r, test_id=other) for r in runs(args, cwd)
        )

    two = recording.record(["t.py"], 2, tmp_path, run=second([0, 0.2]), instance="vm/a")
    name = "test_m::test_other [train_step m bs=8 64x64]"
    assert f"  {name}: 2 runs, 3 needed for its own spread: the kind's widest until then" in (
        recording.lines(two)
    )
    widest = noise_file.read(tmp_path, ENV.machine, name)
    assert widest is not None
    assert widest.source == "widest"
    recording.record(["t.py"], 1, tmp_path, run=second([0.1]), instance="vm/b")
    own = noise_file.read(tmp_path, ENV.machine, name)
    assert own is not None
    assert (own.source, own.runs, own.instances) == ("recorded", 3, 2)


def test_a_profile_that_cannot_be_added_to_says_how_to_start_a_new_one(tmp_path: Path) -> None:
    where = tmp_path / ENV.machine / "noise-profile.json"
    where.parent.mkdir()
    where.write_text("{")
    with pytest.raises(recording.NoiseProblem) as caught:
        recording.record(["t.py"], 3, tmp_path, run=fake_runs([0, 0.05, 0.1]), instance="vm/a")
    message = str(caught.value)
    assert message.startswith(f"noise profile {where} cannot be used: it is not valid JSON (")
    assert message.endswith("; or give --replace to record a new one over it")
    replaced = recording.record(
        ["t.py"], 3, tmp_path, run=fake_runs([0, 0.05, 0.1]), instance="vm/a", replace=True
    )
    assert replaced.profile.runs == 3


def test_a_benchmark_recorded_on_one_instance_takes_the_instances_part_of_the_kind() -> None:
    """One benchmark recorded on two instances 8% apart, another on one: the second's term
    holds the instances' part the first showed, and says where it came from."""
    a = kept_runs(spread_levels(10, 0.02, 6), instance="vm/aaaa")
    b = kept_runs([level + 0.08 for level in spread_levels(10, 0.02, 7)], instance="vm/bbbb")
    alone = kept_runs(spread_levels(10, 0.02, 8), instance="vm/aaaa")
    _, fitted = recording.profiles_of({QUIET_NET: [*a, *b], NOISY_NET: alone}, "t")
    own = noise.fit_runs(alone, recorded="", command="")
    (profile,) = [b.profile for name, b in fitted if name == NOISY_NET]
    assert profile is not None
    assert own.instances == profile.instances == 1
    assert profile.instances_borrowed
    assert profile.between > 2 * own.between
    assert noise.term(profile, calibrated=False) > noise.term(own, calibrated=False)
    assert recording.describe_benchmark(profile).endswith(
        "over 10 runs on 1 instance (and the instances' part of the kind's other benchmarks)"
    )
    assert profile.describe().endswith(
        "over 10 runs on 1 instance and the instances' part of the kind's other benchmarks"
    )


def test_refit_fits_every_profile_again_from_its_runs_measuring_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording.record(["t.py"], 4, tmp_path, run=fake_runs([0, 0.05, -0.05, 0.1]), instance="a")
    before = noise_file.read_file(tmp_path, ENV.machine)
    assert main(["noise", "--refit", "--baselines", str(tmp_path)]) == 0
    after = noise_file.read_file(tmp_path, ENV.machine)
    assert before is not None
    assert after is not None
    assert [b.runs for _, b in after.benchmarks] == [b.runs for _, b in before.benchmarks]
    assert capsys.readouterr().out.startswith(
        f"{ENV.machine}: fitted again from the 4 runs it holds\n"
    )
    assert main(["noise", "--refit", "--baselines", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == (
        f"cnnperf noise: no noise profile under {tmp_path / 'none'} to fit again; record one: "
        "cnnperf noise -- PYTEST_ARGS\n"
    )
