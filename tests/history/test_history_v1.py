"""A history recorded before the reshaping, whose result JSON has no ``schema_version``: today's
pytest-cnnperf reads its runs, analyses them, shows them with ``cnnperf history``, gates on them
and appends to it.

``tests/data/history-v1.db.gz`` is a SQLite history written by pytest-cnnperf at d1feeb5 (the
main branch before the reshaping; gzipped, 190 KB unpacked): 12 runs of ``pytest --cnnperf`` on
this project's 2-core CPU machine, each on a commit of its own, of a tiny conv net whose forward
sleeps 50 ms (``test_a``, ``test_b``) and one that raises (``test_c``). Run 1 saved the
baselines; from run 7 on, ``test_a`` slept 400 ms and ``test_b`` kept 16 MiB more alive; run 12
re-saved ``test_a`` with ``--cnnperf-creep-accept``. ``cnnperf_creep = 30%`` was on, so the
rows hold the old creep sentences as well as error, saved, ok, inconclusive and regressed
results with their samples, calibration, FLOP counts and peaks.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import sqlite3
from pathlib import Path

import known
import pytest

from pytest_cnnperf.cli import main
from pytest_cnnperf.gate import creep
from pytest_cnnperf.gate.design import one_look
from pytest_cnnperf.gate.policy import CPU, GateSettings
from pytest_cnnperf.history.record import HistoryLink
from pytest_cnnperf.history.runs import Entry
from pytest_cnnperf.history.store import open_store
from pytest_cnnperf.model import Creep, Decision, Remark, Verdict

DATA = Path(__file__).resolve().parent.parent / "data" / "history-v1.db.gz"
KEY = "train_step Sleepy bs=2 8x8 opt=sgd"
MACHINE = "cpu-intel-xeon-2t"


@pytest.fixture
def old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The old history, unpacked as ``history.db`` in the current folder (a copy: opening a
    history may write to it)."""
    path = tmp_path / "history.db"
    path.write_bytes(gzip.decompress(DATA.read_bytes()))
    monkeypatch.chdir(tmp_path)
    return path


def rows(path: Path) -> list[tuple[int, str, str, float | None, int | None, dict[str, object]]]:
    """The stored rows as the old version wrote them: run, test, verdict, figures, result JSON."""
    conn = sqlite3.connect(path)
    try:
        found = conn.execute(
            "SELECT run_id, test_id, verdict, items_per_second, peak_allocated_bytes, result "
            "FROM cnnperf_results ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    return [(*row[:5], json.loads(row[5])) for row in found]


def entries(path: Path) -> list[Entry]:
    with open_store(path) as history:
        return history.entries()


def test_every_old_row_reads_as_the_result_it_recorded(old: Path) -> None:
    stored = rows(old)
    assert all("schema_version" not in data for *_, data in stored)  # version 1's rows
    read = entries(old)
    assert len(read) == len(stored) == 3 * 11 + 1
    for entry, (run_id, test_id, verdict, rate, peak, _) in zip(read, stored, strict=True):
        result = entry.result
        assert (entry.run_id, result.test_id, str(result.verdict)) == (run_id, test_id, verdict)
        if result.measurement is None:  # the columns were computed from the same samples
            assert (rate, peak) == (None, None)
        else:
            assert result.measurement.items_per_second == pytest.approx(rate, rel=1e-12)
            assert result.measurement.peak_allocated_bytes == peak
    assert [e.run.accepted for e in read if e.result.test == "test_a"] == [False] * 11 + [True]


def test_old_results_keep_their_errors_samples_and_sentences(old: Path) -> None:
    read = entries(old)
    failed = [e.result for e in read if e.result.test == "test_c"]
    assert len(failed) == 11
    assert {(r.verdict, r.measurement) for r in failed} == {(Verdict.ERROR, None)}
    assert failed[0].error == (
        "measuring train_step Broken bs=2 8x8 opt=sgd on cpu failed: RuntimeError: boom: this "
        "model cannot run (raised at test_bench.py:31 in forward)"
    )
    first = read[0].result
    assert (first.test, first.key, first.verdict) == ("test_a", KEY, Verdict.SAVED)
    assert first.environment is not None
    assert first.environment.machine == MACHINE
    samples = first.measured.samples
    assert len(samples) == 6  # a saving run's
    assert all(s.calibration_unit == "cpu-convnet-v1" for s in samples)
    assert samples[0].flops is not None  # counted once, in the first sample
    assert samples[0].flops.method == "meta"
    assert [s.memory.source if s.memory else None for s in samples] == [
        *["cpu-profiler"] * 3,  # the samples that measured the peak
        *[None] * 3,
    ]
    assert {p for s in samples for p in s.phases} == {"forward", "backward", "optimizer"}
    # the old creep sentences are remarks that still say they are the creep gate's
    crept = next(e.result for e in read if e.run_id == 7 and e.result.test == "test_b")
    assert crept.decision is not None
    reason = crept.decision.creep
    assert isinstance(reason, Remark)
    assert str(reason).startswith(
        "creep: worse than the best of its last 6 runs on this machine in the history"
    )


def test_cnnperf_history_shows_the_step_and_the_growth(
    old: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["history", "--history", "history.db", "--rows", "2"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "history history.db: 12 runs, 2 series"
    a = lines.index(f"test_bench.py::test_a [{KEY}] on {MACHINE}: 12 runs")
    assert lines[a + 1] == "  change points:"
    assert re.fullmatch(
        r"    run 7 \(3aa0e39\.\.7e64aac\): throughput -83\.6% \(29\.8 images/s -> 4\.87 "
        r"images/s\), p = 0\.00\d",
        lines[a + 2],
    ), lines[a + 2]
    assert lines[a + 3].endswith(": a step rather than a creep (see the change points)")
    assert lines[a + 4] == "  memory: unchanged at 36.8 KiB"
    b = lines.index(f"test_bench.py::test_b [{KEY}] on {MACHINE}: 11 runs")
    assert lines[b + 1] == "  change points: none"
    assert lines[b + 3] == "  memory: run 7 (3aa0e39..7e64aac): +44425.1% (36.8 KiB -> 16.0 MiB)"
    assert [line.split()[:4] for line in lines[b + 6 : b + 8]] == [
        ["10", "849d956", "main", "2026-12-01"],
        ["11", "4116653", "main", "2026-12-01"],
    ]
    assert "test_c" not in out  # it never measured: no series


def test_the_creep_gate_compares_with_old_runs(old: Path) -> None:
    link = HistoryLink(old)
    # run 12 accepted test_a: the gate starts there
    assert [r.commit for r in link.recent("test_bench.py::test_a", KEY, MACHINE, 10) or []] == [
        "014adf7e9ed3b33598acf64e2430f7c3697c98b3"
    ]
    recent = link.recent("test_bench.py::test_b", KEY, MACHINE, 3)
    assert recent is not None
    assert [r.commit[:7] for r in recent if r.commit] == ["4116653", "849d956", "59f469e"]
    # test_b's latest run with its peak doubled: past 30% against the best of those three
    latest = recent[0].result
    samples = tuple(
        dataclasses.replace(
            s, memory=dataclasses.replace(s.memory, allocated_bytes=2 * s.memory.allocated_bytes)
        )
        if s.memory
        else s
        for s in latest.measured.samples
    )
    current = dataclasses.replace(
        latest,
        decision=None,
        measurement=dataclasses.replace(latest.measured, samples=samples),
    )
    settings = GateSettings(CPU.gate, throughput_threshold=0.3, memory_threshold=0.3, strict=False)
    last = one_look(CPU.gate.alpha, CPU.gate.beta)
    decision, _ = creep.judge(Decision(Verdict.OK), current, recent, settings, 0.3, last)
    (reason,) = decision.reasons
    assert isinstance(reason, Creep)
    assert [c.metric for c in reason.comparisons] == ["memory"]
    assert reason.runs == 3


def test_runs_appended_after_the_upgrade_read_with_the_old_ones(
    old: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last = entries(old)[-1]
    with open_store(old) as history:
        assert history.append(known.run_info(12), [last.result]) == 13
    stored = rows(old)
    assert "schema_version" not in stored[-2][-1]
    assert stored[-1][-1]["schema_version"] == 2
    read = entries(old)
    assert read[-1].result == last.result
    assert main(["history", "test_a", "--history", "history.db", "--rows", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "history history.db: 13 runs, 1 series"
    assert lines[2] == f"test_bench.py::test_a [{KEY}] on {MACHINE}: 13 runs"
