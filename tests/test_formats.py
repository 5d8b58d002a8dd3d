"""The files and messages, written and read through their explicit mappings: every field mapped,
bad values refused with their path, and files written before the mappings existed (golden
files from the earlier, reflection-based writer) loading, comparing and gating identically."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_cnnperf import formats, gate, workers
from pytest_cnnperf.baseline import BaselineStore, parse
from pytest_cnnperf.cli import main
from pytest_cnnperf.policy import CPU
from pytest_cnnperf.results import ResultsFile
from pytest_cnnperf.sampling import messages

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"
BASELINE_FILE = DATA / "baselines/cpu-amd-epyc-2t/pytest_cnnperf/zoo/test_zoo.json"


@pytest.mark.parametrize(
    "record",
    [
        *formats.RECORDS,
        messages.SITE,
        messages.TAKEN,
        messages.JOB.body,
        messages.CHILD_REPORT.body,
        workers.WORKER_REPORT.body,
    ],
    ids=lambda record: record.cls.__name__,
)
def test_every_field_of_every_record_is_mapped(record: formats.ObjectOf[Any]) -> None:
    assert formats.unmapped(record) == set()


def added_fields(original: Any, written: Any, path: str = "") -> list[str]:
    """Where ``written`` has fields ``original`` lacks; any other difference fails."""
    if isinstance(original, dict):
        assert isinstance(written, dict), path
        assert set(original) <= set(written), (path, set(original) - set(written))
        added = [f"{path}.{key}" for key in set(written) - set(original)]
        for key, value in original.items():
            added += added_fields(value, written[key], f"{path}.{key}")
        return added
    if isinstance(original, list):
        assert isinstance(written, list), path
        assert len(written) == len(original), path
        return [
            added
            for i, (a, b) in enumerate(zip(original, written, strict=True))
            for added in added_fields(a, b, f"{path}[{i}]")
        ]
    assert (original, type(original)) == (written, type(written)), path
    return []


@pytest.mark.parametrize("name", ["zoo-save.json", "zoo-gate.json", "modes.json"])
def test_results_files_of_the_earlier_writer_read_and_write_back_unchanged(name: str) -> None:
    """Written back, a results file keeps every value; it gains only the fields added since it
    was written (with their defaults)."""
    data = json.loads((DATA / name).read_text())
    document = formats.RESULTS.load(data)
    added = added_fields(data, formats.RESULTS.dump(document))
    assert {path.rsplit(".", 1)[-1] for path in added} <= {
        "remeasure",
        "cpu_contention",
        "flops",
        "peak",
        "energy",
    }


def test_baseline_files_of_the_earlier_writer_read_and_write_back_unchanged() -> None:
    text = BASELINE_FILE.read_text()
    document = parse(text, BASELINE_FILE)
    assert added_fields(json.loads(text), formats.BASELINE.dump(document)) == [".module"]


COMMANDS = {
    "compare-save-gate.txt": ["compare", "zoo-save.json", "zoo-gate.json"],
    "compare-baseline-gate.txt": [
        "compare",
        "baselines/cpu-amd-epyc-2t/pytest_cnnperf/zoo/test_zoo.json",
        "zoo-gate.json",
    ],
    "show-gate.txt": ["show", "zoo-gate.json"],
    "show-gate.md": ["show", "--markdown", "zoo-gate.json"],
    "show-baseline.txt": ["show", "baselines/cpu-amd-epyc-2t/pytest_cnnperf/zoo/test_zoo.json"],
    "modes.txt": ["modes", "modes.json"],
    "epoch-gate.txt": ["epoch", "zoo-gate.json"],
}


@pytest.mark.parametrize("golden", sorted(COMMANDS))
def test_the_command_shows_golden_files_as_the_earlier_version_did(
    golden: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(DATA)
    out = io.StringIO()
    assert main(COMMANDS[golden], out=out) == 0
    assert out.getvalue() == (GOLDEN / golden).read_text()


def test_golden_runs_gate_as_the_earlier_version_decided() -> None:
    """The gating run's samples against the golden baseline file: the same verdicts, figures and
    notes as the earlier version gave (``golden/decisions-gate.json``)."""
    document: ResultsFile = formats.RESULTS.load(json.loads((DATA / "zoo-gate.json").read_text()))
    store = BaselineStore(DATA / "baselines")
    settings = gate.GateSettings(
        CPU.gate, throughput_threshold=0.10, memory_threshold=0.05, strict=False
    )
    decided = []
    for result in document.results:
        assert result.measurement is not None
        assert result.environment is not None
        test = result.test_id.split("::", 1)[1]
        entry = store.entry(
            result.environment.machine, "pytest_cnnperf/zoo/test_zoo", test, result.key
        )
        decision = gate.decide(
            result.measurement, result.environment, entry, settings, result.decision.baseline_file
        )
        decided.append(
            {
                "test_id": result.test_id,
                "key": result.key,
                "decision": formats.DECISION.dump(decision),
            }
        )
    assert decided == json.loads((GOLDEN / "decisions-gate.json").read_text())


def test_a_bad_number_is_refused_with_its_path() -> None:
    data = json.loads(BASELINE_FILE.read_text())
    test, entries = next(iter(data["entries"].items()))
    key = next(iter(entries))
    entries[key]["step_time_s"][1] = -0.04
    with pytest.raises(formats.DataError) as caught:
        formats.BASELINE.load(data)
    assert str(caught.value) == (
        f"file.entries[{test!r}][{key!r}].step_time_s[1]: expected a positive number, "
        "found float -0.04"
    )


def test_messages_round_trip() -> None:
    document = formats.RESULTS.load(json.loads((DATA / "zoo-gate.json").read_text()))
    result = document.results[0]
    assert result.measurement is not None
    assert result.environment is not None
    job = messages.Job(
        site=messages.Site("t.py::test_a", "/p/t.py", 1, result.key),
        replay=(result,),
        out="/tmp/sample-1.json",
        rank=1,
        world_size=2,
        rendezvous="/tmp/sample-1.store",
        parent_pid=42,
        memory=False,
    )
    assert messages.JOB.load(json.loads(json.dumps(messages.JOB.dump(job)))) == job
    report = messages.ChildReport(
        taken=messages.TakenSample(result.measurement.samples[0], result.environment),
        rank=1,
    )
    text = json.dumps(messages.CHILD_REPORT.dump(report))
    assert messages.CHILD_REPORT.load(json.loads(text)) == report
    share = workers.WorkerReport(results=(result,), collected={"m": ("test_a",)}, machine="x")
    text = json.dumps(workers.WORKER_REPORT.dump(share))
    assert workers.WORKER_REPORT.load(json.loads(text)) == dataclasses.replace(share)
