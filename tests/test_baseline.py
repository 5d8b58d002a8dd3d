"""Baseline files: format, errors that name the file, atomic merging saves."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from factories import result

from pytest_cnnperf.model import BenchConfig, Decision, Result, Verdict
from pytest_cnnperf.store import noise as noise_file
from pytest_cnnperf.store.baseline import (
    BASELINE,
    BaselineFile,
    BaselineFileError,
    BaselineSaveError,
    BaselineStore,
    render,
)
from pytest_cnnperf.store.locations import module_key

SAFE_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-%"

SCHEMA = BASELINE.schema

CONFIG = BenchConfig(kind="train_step", model="resnet18", batch_size=8, image_size=(64, 64))


def entry(step: float = 0.04, memory: int = 100 << 20) -> Result:
    """A measured result of three samples, as a save is given it (with its steps)."""
    return result((step, step * 1.01, step * 0.99), memory=memory, config=CONFIG)


def test_round_trip_and_diff_friendly_layout(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    saved = dataclasses.replace(entry(), decision=Decision(Verdict.SAVED))
    store.save("cpu-test-2t", "tests/test_perf", {"test_a": {CONFIG.key: saved}})
    path = tmp_path / "cpu-test-2t" / "tests" / "test_perf.json"
    text = path.read_text()
    lines = text.splitlines()
    samples = lines[lines.index('          "samples": [') + 1 :][:3]
    memory = '"allocated_bytes": 104857600, "reserved_bytes": 104857600, "source": "test"'
    assert [line.strip().rstrip(",") for line in samples] == [  # one line each, rounded
        f'{{"calibration_s": 0.001, "memory": {{{memory}}}, "step_time_s": {step}}}'
        for step in ("0.04", "0.0404", "0.0396")
    ]
    data = json.loads(text)
    assert data["schema"] == SCHEMA
    assert data["schema_version"] == 2
    assert data["module"] == "tests/test_perf"
    assert list(data) == sorted(data)
    fresh = BaselineStore(tmp_path)
    stored = fresh.entry("cpu-test-2t", "tests/test_perf", "test_a", CONFIG.key)
    assert stored == BaselineStore(tmp_path).load(path).entries["test_a"][CONFIG.key]
    # the entry is the result without its decision, each sample without its steps; its test
    # id comes from the file's module and keys
    assert stored is not None
    assert stored.test_id == "tests/test_perf.py::test_a"
    assert stored.decision is None
    assert stored.measured.step_times == pytest.approx(entry().measured.step_times)
    assert {s.step_times_s for s in stored.measured.samples} == {()}


def test_saving_keeps_entries_that_were_not_remeasured(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("m", "mod", {"test_a": {"k": entry(0.04)}, "test_b": {"k": entry(0.05)}})
    outcome = BaselineStore(tmp_path).save("m", "mod", {"test_a": {"k": entry(0.06)}})
    assert outcome.written == 1
    document = BaselineStore(tmp_path).load(store.path("m", "mod"))
    assert document is not None
    assert set(document.entries) == {"test_a", "test_b"}
    assert document.entries["test_a"]["k"].measured.samples[0].step_time_s == pytest.approx(0.06)


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
            "written by a newer pytest-cnnperf (schema version 7; this one reads up to 2)",
        ),
        (
            json.dumps({"schema": SCHEMA, "schema_version": 0, "machine": "m", "entries": {}}),
            "its schema_version 0 was never written by pytest-cnnperf",
        ),
        (  # version 1, written before 0.1.0
            json.dumps({"schema": SCHEMA, "schema_version": 1, "machine": "m", "entries": {}}),
            "its schema_version 1 is older than this pytest-cnnperf reads (schema version 2)",
        ),
        (
            json.dumps(
                {
                    "schema": SCHEMA,
                    "schema_version": 2,
                    "machine": "m",
                    "entries": {
                        "t": {
                            "k": {
                                "config": {
                                    "kind": "train_step",
                                    "model": "m",
                                    "batch_size": 1,
                                    "image_size": None,
                                },
                                "measurement": {
                                    "items_per_step": 1,
                                    "samples": [{"step_time_s": "fast"}],
                                },
                            }
                        }
                    },
                }
            ),
            "it is malformed: file.entries['t']['k'].measurement.samples[0].step_time_s: "
            "expected a positive number, found str 'fast'",
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
    assert module_key(["..", "we ird", "a/b", "ü"]) == "%2E%2E/we%20ird/a%2Fb/%C3%BC"
    assert module_key([".hidden", "trailing.", "", "%"]) == "%2Ehidden/trailing%2E/%/%25"


def test_two_modules_never_share_a_file() -> None:
    """``perf 1/test_x.py`` and ``perf_1/test_x.py`` once both mapped to ``perf_1/test_x``;
    names that were already safe still map as before, so existing files still apply."""
    assert module_key(["perf 1", "test_x"]) != module_key(["perf_1", "test_x"])
    assert module_key(["perf_1", "test_x"]) == "perf_1/test_x"
    names = ["a b", "a_b", "a%20b", "a%b", "a.", "a%2E", ".a", "%2Ea", "..", ".", "", "_", "ü", "u"]
    keys = [module_key([name]) for name in names]
    assert len(set(keys)) == len(names), keys
    assert all(set(key) <= set(SAFE_CHARACTERS) and not key.startswith(".") for key in keys)


def test_render_is_stable() -> None:
    document = BaselineFile("m", {"b": {"k": entry()}, "a": {"k": entry()}})
    assert render(document) == render(document)
    assert render(document).index('"a"') < render(document).index('"b"')


def test_a_save_keeps_what_it_does_not_know(tmp_path: Path) -> None:
    """Fields of a newer version (at the top, in an entry, in a config, in a sample) and entries
    that were not re-measured stay as they are in the file when another test is saved."""
    store = BaselineStore(tmp_path)
    store.save("m", "mod", {"test_a": {"k": entry(0.04)}, "test_b": {"k": entry(0.05)}})
    path = store.path("m", "mod")
    data = json.loads(path.read_text())
    data["reviewed_by"] = "someone"
    kept = data["entries"]["test_b"]["k"]
    kept["comment"] = "measured on the quiet runner"
    kept["config"]["compile_mode"] = "max-autotune"
    kept["measurement"]["samples"][0]["step_time_s"] = 0.050000001  # as a hand edit left it
    kept["measurement"]["samples"][1]["tokens_per_step"] = 512
    data["entries"]["test_a"]["k"]["comment"] = "replaced with the entry"
    path.write_text(json.dumps(data))
    BaselineStore(tmp_path).save("m", "mod", {"test_a": {"k": entry(0.06)}})
    after = json.loads(path.read_text())
    assert after["reviewed_by"] == "someone"
    assert after["entries"]["test_b"]["k"] == kept
    assert "comment" not in after["entries"]["test_a"]["k"]
    assert after["entries"]["test_a"]["k"]["measurement"]["samples"][0][
        "step_time_s"
    ] == pytest.approx(0.06)


def test_a_save_removes_what_killed_saves_left(tmp_path: Path) -> None:
    """A save killed between writing its temporary file and the rename leaves the file; the
    next save of the same baseline file removes it (files of live writers stay)."""
    store = BaselineStore(tmp_path)
    store.save("m", "mod", {"test_a": {"k": entry()}})
    folder = store.path("m", "mod").parent
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    leftovers = [
        folder / f".mod.json.{dead.stdout.strip()}.0a1b2c3d.tmp",
        folder / ".mod.json.k2j3h4x1.tmp",  # named by an earlier version, without its process
    ]
    live = folder / f".mod.json.{os.getpid()}.feedbeef.tmp"
    other = folder / ".other.json.1.tmp"
    for path in [*leftovers, live, other]:
        path.write_text("{")
    BaselineStore(tmp_path).save("m", "mod", {"test_b": {"k": entry()}})
    assert sorted(p.name for p in folder.iterdir()) == sorted([live.name, other.name, "mod.json"])


def test_baseline_files_get_the_mode_of_any_new_file(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        store = BaselineStore(tmp_path)
        store.save("m", "mod", {"test_a": {"k": entry()}})
        assert stat.S_IMODE(store.path("m", "mod").stat().st_mode) == 0o644
    finally:
        os.umask(previous)


def test_a_folder_of_a_dead_session_is_removed(tmp_path: Path) -> None:
    from pytest_cnnperf.store.leftovers import remove_folders_of_dead

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = tmp_path / f"pytest-cnnperf-{dead.stdout.strip()}-x1y2z3"
    live = tmp_path / f"pytest-cnnperf-{os.getpid()}-a1b2c3"
    keep = [live, tmp_path / "pytest-cnnperf-locks", tmp_path / "pytest-cnnperf-k2j3h4x1"]
    for folder in [gone, *keep]:
        folder.mkdir()
        (folder / "sample-1.json").write_text("{}")
    remove_folders_of_dead(tmp_path, "pytest-cnnperf-")
    assert sorted(tmp_path.iterdir()) == sorted(keep)


def test_a_file_in_the_place_of_a_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "m").write_text("a file where the machine's folder goes")
    with pytest.raises(
        BaselineFileError, match=f"it cannot be read: {tmp_path}/m is a file, not a folder"
    ):
        BaselineStore(tmp_path).entry("m", "mod", "t", "k")
    with pytest.raises(
        BaselineSaveError, match=f"cannot save baselines to {tmp_path}/m/mod.json: File exists"
    ):
        BaselineStore(tmp_path).check_writable(BaselineStore(tmp_path).path("m", "mod"))
    # the machine's noise profile, beside its baselines, is read the same way
    with pytest.raises(
        noise_file.NoiseProfileError,
        match=f"noise profile {tmp_path}/m/noise-profile.json cannot be used: it cannot be read: "
        f"{tmp_path}/m is a file, not a folder. Record it again",
    ):
        noise_file.read_file(tmp_path, "m")
