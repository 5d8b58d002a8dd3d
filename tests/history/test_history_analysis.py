"""Change points and creep on series with known answers: real runs of this machine with a +8%
step at run 25, a creep of 1% a run, or nothing (see ``known``), read back from a history."""

from __future__ import annotations

from pathlib import Path

import known
import numpy as np
import pytest

from pytest_cnnperf.history import changepoints, trend
from pytest_cnnperf.history.series import Analysis, analyse, build
from pytest_cnnperf.history.store import open_store


@pytest.fixture(scope="module")
def analyses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Analysis]:
    path = tmp_path_factory.mktemp("known") / "history.db"
    with open_store(path, create=True) as store:
        for run, results in known.history():
            store.append(run, results)
        entries = store.entries()
    found = {s.test_id.rsplit("_", 1)[-1]: analyse(s) for s in build(entries)}
    assert set(found) == set(known.KINDS)
    return found


def test_a_step_of_8_percent_is_found_at_its_run(analyses: dict[str, Analysis]) -> None:
    analysis = analyses["step"]
    assert len(analysis.series.points) == known.RUNS
    (point,) = analysis.change_points
    assert abs(point.index - (known.STEP_RUN - 1)) <= 1
    assert point.p_value <= changepoints.ALPHA
    assert -0.12 < point.change < -0.04  # a throughput loss of 1 - 1/1.08 = 7.4%, within noise
    before, after = (known.commit(i)[:7] for i in (point.index - 1, point.index))
    assert analysis.commit_range(point.index) == f"{before}..{after}"


def test_a_step_is_not_called_a_creep(analyses: dict[str, Analysis]) -> None:
    creep = analyses["step"].creep
    assert creep is not None
    assert not creep.creeping


def test_a_creep_of_1_percent_a_run_is_reported_by_the_creep_view(
    analyses: dict[str, Analysis],
) -> None:
    creep = analyses["creep"].creep
    assert creep is not None
    assert creep.creeping
    assert creep.runs == trend.WINDOW
    assert -0.02 < creep.slope < -0.005  # throughput: 1/1.01 a run, about -1%
    assert creep.slope_low < -0.0099 < creep.slope_high
    assert creep.loss > 0.1  # the latest runs against the best of the last 20
    assert creep.best_index < known.RUNS - trend.WINDOW + 10


def test_a_flat_series_has_no_change_point_and_no_creep(analyses: dict[str, Analysis]) -> None:
    analysis = analyses["flat"]
    assert analysis.change_points == ()
    assert analysis.creep is not None
    assert not analysis.creep.creeping
    assert analysis.environment_changes == ()
    assert analysis.memory_changes == ()


def test_flat_noise_rarely_has_a_change_point() -> None:
    """The permutation test holds its level where a test of the chosen split would not: of 50
    series of pure noise, at most 2 get a change point (p <= 0.01 each)."""
    rng = np.random.default_rng(7)
    found = [changepoints.find(rng.lognormal(0, 0.05, 40)) for _ in range(50)]
    assert sum(bool(f) for f in found) <= 2


def test_steps_are_located_in_synthetic_noise() -> None:
    rng = np.random.default_rng(3)
    located = 0
    for _ in range(20):
        values = rng.lognormal(0, 0.03, 40) * np.where(np.arange(40) >= 24, 1 / 1.08, 1)
        found = changepoints.find(values)
        located += any(abs(c.index - 24) <= 1 for c in found)
    assert located >= 18


def test_a_noiseless_series_steps_where_it_changes() -> None:
    (point,) = changepoints.find([100.0] * 10 + [90.0] * 10)
    assert point.index == 10
    assert point.change == pytest.approx(-0.1)
    assert changepoints.find([100.0] * 20) == []


def test_too_short_a_series_has_no_findings() -> None:
    assert changepoints.find([1.0, 2.0, 3.0]) == []
    assert trend.view([1.0, 0.9, 0.8]) is None


def test_small_steps_are_not_change_points() -> None:
    """A significant step smaller than 2% is not reported (min_step)."""
    assert changepoints.find([100.0] * 10 + [99.0] * 10) == []


def test_environment_and_memory_changes_are_found(tmp_path: Path) -> None:
    import dataclasses

    env = known.environment()
    newer = dataclasses.replace(env, torch="2.15.0")
    with open_store(tmp_path / "h.db", create=True) as store:
        for run in range(10):
            result = known.result("flat", run, newer if run >= 6 else env)
            if run >= 4:
                m = result.measurement
                assert m is not None
                samples = tuple(
                    dataclasses.replace(
                        s,
                        memory=dataclasses.replace(
                            s.memory, allocated_bytes=s.memory.allocated_bytes + (32 << 20)
                        ),
                    )
                    if s.memory
                    else s
                    for s in m.samples
                )
                result = dataclasses.replace(
                    result, measurement=dataclasses.replace(m, samples=samples)
                )
            store.append(known.run_info(run), [result])
        (series,) = build(store.entries())
    analysis = analyse(series)
    (change,) = analysis.environment_changes
    assert change.index == 6
    assert change.changes == (f"torch {env.torch} -> 2.15.0",)
    (memory,) = analysis.memory_changes
    assert memory.index == 4
    assert memory.after - memory.before == 32 << 20
