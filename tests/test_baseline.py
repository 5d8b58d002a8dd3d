"""Baseline files: format, errors that name the file, atomic merging saves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import ENV

from pytest_cnnperf.baseline import BaselineFileError, BaselineStore, render
from pytest_cnnperf.formats import BASELINE
from pytest_cnnperf.location import module_key
from pytest_cnnperf.results import BaselineEntry, BaselineFile, BenchConfig

SCHEMA = BASELINE.schema

CONFIG = BenchConfig(kind="train_step", model="resnet18", batch_size=8, image_size=(64, 64))


def entry(step: float = 0.04, memory: int = 100 << 20) -> BaselineEntry:
    return BaselineEntry(
        recorded="2026-11-30T00:00:00Z",
        config=CONFIG,
        environment=ENV,
        items_per_step=8,
        step_time_s=(step, step * 1.01, step * 0.99),
        calibration_s=(0.001, 0.001, 0.001),
        peak_allocated_bytes=(memory, memory, memory),
    )


def test_round_trip_and_diff_friendly_layout(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("cpu-test-2t", "tests/test_perf", {"test_a": {CONFIG.key(): entry()}})
    path = tmp_path / "cpu-test-2t" / "tests" / "test_perf.json"
    text = path.read_text()
    assert '"step_time_s": [0.04, 0.0404, 0.0396]' in text  # one line, rounded
    data = json.loads(text)
    assert data["schema"] == SCHEMA
    assert data["schema_version"] == 1
    assert list(data) == sorted(data)
    fresh = BaselineStore(tmp_path)
    assert (
        fresh.entry("cpu-test-2t", "tests/test_perf", "test_a", CONFIG.key())
        == BaselineStore(tmp_path).load(path).entries["test_a"][CONFIG.key()]
    )


def test_saving_keeps_entries_that_were_not_remeasured(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("m", "mod", {"test_a": {"k": entry(0.04)}, "test_b": {"k": entry(0.05)}})
    outcome = BaselineStore(tmp_path).save("m", "mod", {"test_a": {"k": entry(0.06)}})
    assert outcome.written == 1
    document = BaselineStore(tmp_path).load(store.path("m", "mod"))
    assert document is not None
    assert set(document.entries) == {"test_a", "test_b"}
    assert document.entries["test_a"]["k"].step_time_s[0] == pytest.approx(0.06)


def test_pruning_removes_named_tests_only(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("m", "mod", {"test_a": {"k": entry()}, "test_gone": {"k": entry()}})
    outcome = BaselineStore(tmp_path).save("m", "mod", {}, remove_tests=["test_gone", "test_never"])
    assert outcome.removed == ("test_gone",)
    document = BaselineStore(tmp_path).load(store.path("m", "mod"))
    assert document is not None
    assert set(document.entries) == {"test_a"}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "it is not valid JSON"),
        ('{"results": []}', "it is not a pytest-cnnperf baseline file"),
        (
            json.dumps({"schema": SCHEMA, "schema_version": 7, "machine": "m", "entries": {}}),
            "written by a newer pytest-cnnperf (schema version 7; this one reads up to 1)",
        ),
        (
            json.dumps(
                {
                    "schema": SCHEMA,
                    "schema_version": 1,
                    "machine": "m",
                    "entries": {"t": {"k": {"step_time_s": "fast"}}},
                }
            ),
            "it is malformed: file.entries['t']['k']",
        ),
    ],
)
def test_unusable_files_are_named_and_never_overwritten(
    tmp_path: Path, content: str, problem: str
) -> None:
    store = BaselineStore(tmp_path)
    path = store.path("m", "mod")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(BaselineFileError) as info:
        store.entry("m", "mod", "t", "k")
    assert str(path) in str(info.value)
    assert problem in str(info.value)
    assert "--cnnperf-save" in str(info.value)
    with pytest.raises(BaselineFileError):
        BaselineStore(tmp_path).save("m", "mod", {"t": {"k": entry()}})
    assert path.read_text() == content


def test_a_file_of_another_machine_is_foreign(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("m", "mod", {"t": {"k": entry()}})
    path = store.path("m", "mod")
    with pytest.raises(BaselineFileError, match="holds baselines of machine 'm', not 'other'"):
        BaselineStore(tmp_path).load(path, "other")


def test_module_keys_never_make_strange_file_names() -> None:
    assert module_key(["tests", "perf", "test_models"]) == "tests/perf/test_models"
    assert module_key(["..", "we ird", "a/b", "ü"]) == "_/we_ird/a_b/_"


def test_render_is_stable() -> None:
    document = BaselineFile("m", {"b": {"k": entry()}, "a": {"k": entry()}})
    assert render(document) == render(document)
    assert render(document).index('"a"') < render(document).index('"b"')
