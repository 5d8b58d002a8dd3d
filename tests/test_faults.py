"""Faults and bad input through pytest: what a deselected test, a save that cannot be written,
an interrupted run, two modules with similar names, a bad argument or a model that returns the
wrong thing do to baselines and messages. Never a lost baseline, never "saved" when nothing
was, never a traceback. (Signals to real processes: test_interrupts.)"""

from __future__ import annotations

import errno
import json
import tempfile
from pathlib import Path

import pytest
from scripted import Scripted

from pytest_cnnperf.store import baseline

BENCH = """
import pytest

from models import Sleepy

def test_a(cnnperf):
    cnnperf.train_step(Sleepy(name="a"), batch_size=2, image_size=8)
    assert not __import__("os").path.exists("FAIL-a")

@pytest.mark.heavy
def test_b(cnnperf):
    cnnperf.train_step(Sleepy(name="b"), batch_size=2, image_size=8)

class TestC:
    def test_c(self, cnnperf):
        cnnperf.train_step(Sleepy(name="c"), batch_size=2, image_size=8)

class TestD:
    def test_d(self, cnnperf):
        cnnperf.train_step(Sleepy(name="d"), batch_size=2, image_size=8)

def test_plain():
    assert not __import__("os").path.exists("FAIL-plain")
"""
TESTS = {"test_a", "test_b", "TestC::test_c", "TestD::test_d"}
STALE = "*baseline entr* belong* to no test*"


def entries(project: pytest.Pytester) -> set[str]:
    (path,) = (project.path / "baselines").glob("*/test_bench.json")
    return set(json.loads(path.read_text())["entries"])


@pytest.fixture
def saved(scripted_project: pytest.Pytester) -> pytest.Pytester:
    """Scripted baselines of four benchmarks."""
    project = scripted_project
    project.makepyfile(test_bench=BENCH)
    ini = project.path.joinpath("tox.ini").read_text()
    project.makeini(ini + "\nmarkers =\n    heavy: a heavy one\n")
    project.runpytest("--cnnperf", "--cnnperf-save").assert_outcomes(passed=5)
    assert entries(project) == TESTS
    return project


# ---- item 2: only a test that no longer exists is stale ----


@pytest.mark.parametrize(
    "selection",
    [
        ["test_bench.py::test_a"],
        ["-k", "test_a"],
        ["-m", "not heavy"],
        ["--deselect", "test_bench.py::test_b"],
        ["test_bench.py::TestC::test_c"],
        ["test_bench.py::TestC"],
    ],
    ids=["node id", "-k", "-m", "--deselect", "a class's test", "a class"],
)
def test_a_test_left_out_of_the_run_is_not_stale_and_never_pruned(
    saved: pytest.Pytester, selection: list[str]
) -> None:
    """The regression message's own accept command names one test; with --cnnperf-prune it
    once removed the module's other entries."""
    result = saved.runpytest("--cnnperf", "--cnnperf-save", "--cnnperf-prune", *selection)
    assert result.ret == 0
    result.stdout.no_fnmatch_line(STALE)
    result.stdout.no_fnmatch_line("*removed * stale test*")
    assert entries(saved) == TESTS


def test_a_test_left_out_by_last_failed_is_not_stale(saved: pytest.Pytester) -> None:
    """--lf leaves the tests that passed out of the module as it is collected."""
    (saved.path / "FAIL-a").write_text("1")
    saved.runpytest("--cnnperf").assert_outcomes(passed=4, failed=1)
    result = saved.runpytest("--cnnperf", "--cnnperf-save", "--lf", "--cnnperf-prune")
    result.stdout.fnmatch_lines(["*run-last-failure: rerun previous 1 failure*"])
    result.assert_outcomes(failed=1)
    result.stdout.no_fnmatch_line(STALE)
    assert entries(saved) == TESTS


def test_tests_that_are_gone_are_stale_and_pruned_on_request(saved: pytest.Pytester) -> None:
    gone = BENCH.replace("def test_b", "def test_b_renamed").replace("class TestD", "class TestE")
    saved.makepyfile(test_bench=gone)
    result = saved.runpytest("--cnnperf", "test_bench.py::test_a")
    result.stdout.no_fnmatch_line(STALE)  # a node id: the module was not collected whole
    result = saved.runpytest("--cnnperf")
    result.stdout.fnmatch_lines(
        [
            "2 baseline entries belong to no test their modules have now (if those tests are "
            "gone, remove them with --cnnperf-save --cnnperf-prune):",
            "  TestD::test_d in *test_bench.json",
            "  test_b in *test_bench.json",
        ]
    )
    saved.runpytest(
        "--cnnperf", "--cnnperf-save", "--cnnperf-prune", "-k", "test_a"
    ).stdout.fnmatch_lines(["saved 1 baseline(s) to *test_bench.json, removed 2 stale test(s)"])
    assert entries(saved) == TESTS - {"test_b", "TestD::test_d"}


def test_a_benchmark_that_fails_to_measure_keeps_its_baseline(
    saved: pytest.Pytester, scripted: Scripted
) -> None:
    """A save where one benchmark's measuring fails: that test fails with the error, the others
    are saved, and the failed one's entry stays as it was."""
    (path,) = (saved.path / "baselines").glob("*/test_bench.json")
    before = json.loads(path.read_text())["entries"]["test_a"]
    scripted.fail("test_a", "RuntimeError: out of patience")
    result = saved.runpytest("--cnnperf", "--cnnperf-save")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "cnnperf: measuring train_step Sleepy bs=2 8x8 opt=sgd on cpu failed: RuntimeError: "
            "out of patience",
        ]
    )
    result.stdout.fnmatch_lines(["saved 3 baseline(s) to *test_bench.json"])
    assert "Traceback" not in result.stdout.str()
    assert entries(saved) == TESTS
    assert json.loads(path.read_text())["entries"]["test_a"] == before


# ---- item 3: two modules never share a baseline file ----


def test_two_modules_with_similar_names_keep_files_of_their_own(
    scripted_project: pytest.Pytester,
) -> None:
    """``perf 1/test_x.py`` and ``perf_1/test_x.py`` once both mapped to ``perf_1/test_x.json``:
    one benchmark's entry replaced the other's, and the gate compared one module with the
    other's figures."""
    project = scripted_project
    test = "from models import Sleepy\n\ndef test_x(cnnperf):\n    cnnperf.train_step(Sleepy(), batch_size=2, image_size=8)\n"
    for folder in ("perf 1", "perf_1"):
        project.mkdir(folder)
        (project.path / folder / "test_x.py").write_text(test)
    project.syspathinsert()  # importlib's mode does not put the rootdir on the path
    args = ["--cnnperf", "--import-mode=importlib", "-p", "no:randomly"]
    result = project.runpytest(*args, "--cnnperf-save")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "saved 1 baseline(s) to *perf%201/test_x.json",
            "saved 1 baseline(s) to *perf_1/test_x.json",
        ]
    )
    project.runpytest(*args, "--cnnperf-json=results.json").assert_outcomes(passed=2)
    results = json.loads((project.path / "results.json").read_text())["results"]
    assert {r["test_id"]: r["decision"]["baseline_file"].split("/", 2)[2] for r in results} == {
        "perf 1/test_x.py::test_x": "perf%201/test_x.json",
        "perf_1/test_x.py::test_x": "perf_1/test_x.json",
    }


# ---- item 4: a save that wrote nothing fails the run ----


def test_a_baselines_folder_that_cannot_be_made_fails_the_benchmark(
    scripted_project: pytest.Pytester,
) -> None:
    project = scripted_project
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest(
        "--cnnperf", "--cnnperf-save", "--cnnperf-baselines=/proc/x", "-k", "test_a"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "cnnperf: cannot save baselines to /proc/x/*/test_bench.json: No such file or directory (/proc/x)",
        ]
    )
    result.stdout.no_fnmatch_line("*saved*")
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_read_only_folder_fails_the_benchmark(
    scripted_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a read-only mount (root may write anywhere else, so the error is injected where
    the file would be created)."""
    project = scripted_project

    def read_only(path: Path) -> tuple[int, Path]:
        raise OSError(errno.EROFS, "Read-only file system", str(path.parent))

    monkeypatch.setattr(baseline, "_temporary", read_only)
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest("--cnnperf", "--cnnperf-save", "-k", "test_a")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["cnnperf: cannot save baselines to *test_bench.json: Read-only file system (*baselines/*)"]
    )
    result.stdout.no_fnmatch_line("*saved*")


def test_a_lock_folder_that_cannot_be_used_fails_the_benchmark(
    scripted_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    project = scripted_project
    (tmp_path / "pytest-cnnperf-locks").write_text("a file where the lock folder goes")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest("--cnnperf", "--cnnperf-save", "-k", "test_a")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"cnnperf: cannot save baselines to *test_bench.json: its lock in {tmp_path}/pytest-cnnperf-locks "
            f"cannot be used: File exists ({tmp_path}/pytest-cnnperf-locks)"
        ]
    )
    result.stdout.no_fnmatch_line("*saved*")


def test_a_save_that_fails_at_the_end_fails_the_run(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up after the benchmark ran: an error line naming the file and the reason,
    an exit status of 1, and the benchmark reported as not saved."""
    before = {p: p.read_text() for p in (saved.path / "baselines").rglob("*.json")}

    def full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(baseline, "_write_atomically", full)
    result = saved.runpytest("--cnnperf", "--cnnperf-save", "-k", "test_a")
    result.assert_outcomes(passed=1, deselected=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "1 benchmark: 1 error (test_a)",
            "error *test_a *Sleepy bs=2 8x8*",
            "note: test_a: not saved: cannot save baselines to *test_bench.json: No space left on device (*test_bench.json)",
            "error: cannot save baselines to *test_bench.json: No space left on device (*test_bench.json)",
        ]
    )
    result.stdout.no_fnmatch_line("saved*")
    assert {p: p.read_text() for p in (saved.path / "baselines").rglob("*.json")} == before


def test_a_baselines_setting_that_names_a_file_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makepyfile(test_bench=BENCH)
    (project.path / "notes.txt").write_text("not a folder")
    result = project.runpytest("--cnnperf", "--cnnperf-baselines=notes.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: the baselines folder (--cnnperf-baselines, or the cnnperf_baselines ini "
            f"setting): {project.path}/notes.txt is a file, not a folder; name a folder, or leave "
            "the setting out for baselines/ under the rootdir"
        ]
    )


# ---- item 8: bad numbers in a baseline file (every field and value: test_cli) ----


@pytest.mark.parametrize(
    ("number", "found"), [("Infinity", "float inf"), ("1" + "0" * 30, "an int of 31 digits")]
)
def test_a_bad_number_in_a_baseline_fails_its_benchmarks_with_the_field(
    saved: pytest.Pytester, number: str, found: str
) -> None:
    (path,) = (saved.path / "baselines").glob("*/test_bench.json")
    text = path.read_text()
    key = "train_step Sleepy bs=2 8x8 opt=sgd"
    data = json.loads(text)
    data["entries"]["test_a"][key]["measurement"]["samples"][0]["step_time_s"] = "@"
    path.write_text(json.dumps(data).replace('"@"', number))
    bad = path.read_text()
    result = saved.runpytest("--cnnperf", "test_bench.py::test_a", "test_bench.py::test_b")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            f"cnnperf: baseline file {path} cannot be used: it is malformed: file.entries['test_a']"
            f"['{key}'].measurement.samples[0].step_time_s: expected a positive number, found "
            f"{found}. Mend it (or "
            "delete it) and record new baselines with --cnnperf-save; it is left untouched until then."
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert path.read_text() == bad


# ---- item 7: an interrupted run writes nothing ----


def test_an_interrupted_run_saves_nothing(saved: pytest.Pytester) -> None:
    before = {p: p.read_text() for p in (saved.path / "baselines").rglob("*.json")}
    saved.makepyfile(
        test_bench=BENCH.replace(
            "def test_plain():", "def test_plain():\n    raise KeyboardInterrupt\n\ndef unused():"
        )
    )
    result = saved.runpytest(
        "--cnnperf", "--cnnperf-save", "-p", "no:randomly", no_reraise_ctrlc=True
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "warning: the run was interrupted, so none of the 4 baseline(s) it measured was "
            "saved; run it again to record them"
        ]
    )
    result.stdout.no_fnmatch_line("saved*")
    assert {p: p.read_text() for p in (saved.path / "baselines").rglob("*.json")} == before


# ---- item 10: booleans only ----


@pytest.mark.parametrize(
    ("value", "shown"), [('"no"', "'no'"), ("1", "1"), ("None", "None"), ('"False"', "'False'")]
)
def test_channels_last_takes_booleans_only(
    scripted_project: pytest.Pytester, value: str, shown: str
) -> None:
    """``channels_last="no"`` once measured channels_last."""
    project = scripted_project
    project.makepyfile(
        test_bench=f"""
        from models import Sleepy

        def test_train(cnnperf):
            cnnperf.train_step(Sleepy(), batch_size=2, image_size=8, channels_last={value})

        def test_inference(cnnperf):
            cnnperf.inference(Sleepy(), batch_size=2, image_size=8, channels_last={value})
        """
    )
    result = project.runpytest("--cnnperf")
    result.assert_outcomes(failed=2)
    message = f"cnnperf: channels_last={shown} is not a boolean; use True or False"
    result.stdout.fnmatch_lines([message, message])


# ---- item 12: messages ----


@pytest.mark.parametrize(
    ("returned", "what"),
    [
        ('"hello"', "str 'hello'"),
        ('{"out": y}', "a dict with keys 'out'"),
        ("(y, y)", "a tuple of 2 values"),
    ],
)
def test_a_model_that_returns_no_tensor_is_told_how_to_measure_it(
    project: pytest.Pytester, returned: str, what: str
) -> None:
    project.makepyfile(
        test_bench=f"""
        from torch import nn

        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)

            def forward(self, x):
                y = self.conv(x).mean(dim=(2, 3))
                return {returned}

        def test_guess(cnnperf):
            cnnperf.train_step(Detector(), batch_size=2, image_size=8)

        def test_given(cnnperf):
            cnnperf.train_step(Detector(), batch_size=2, image_size=8, num_classes=4)
        """
    )
    result = project.runpytest("--cnnperf", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    lines = (project.path / "test_bench.py").read_text().splitlines()
    for test in ("test_guess", "test_given"):
        line = lines.index(f"def {test}(cnnperf):") + 2
        result.stdout.fnmatch_lines(
            [
                "cnnperf: measuring train_step Detector bs=2 8x8 opt=sgd on cpu failed: TypeError: "
                f"the model Detector returned {what}, not a tensor of class scores, which "
                "train_step's default loss needs; for a model that returns a dict or a tuple, pass "
                "loss=callable(output, target) and num_classes=N (called at test_bench.py:"
                f"{line} in {test})"
            ]
        )


@pytest.mark.usefixtures("one_thread")
def test_no_message_shows_a_chained_traceback(project: pytest.Pytester) -> None:
    """Every kind of bad input in one run: each is one message, with no traceback of ours and
    no "During handling of the above exception". Measured for real: the step function and the
    loss raise in the model's own code."""
    project.makepyfile(
        test_bench="""
        import pytest

        from models import Sleepy

        def test_model(cnnperf, model_factory):
            model_factory("resnet1")

        def test_argument(cnnperf):
            cnnperf.train_step(Sleepy(), batch_size=0)

        @pytest.mark.cnnperf(threshold="5")
        def test_marker(cnnperf):
            pass

        def test_raises(cnnperf):
            cnnperf.measure(lambda: 1 / 0, items_per_step=2, name="div")

        def test_optimizer(cnnperf):
            cnnperf.train_step(Sleepy(), batch_size=2, image_size=8, optimizer="sgdd")

        def test_output(cnnperf):
            cnnperf.inference(Sleepy(), batch_size=2, image_size=8)
            cnnperf.train_step(Sleepy(), batch_size=2, image_size=8, loss=lambda out, target: out)

        def test_corrupt(cnnperf):
            cnnperf.train_step(Sleepy(name="c"), batch_size=2, image_size=8)
        """
    )
    corrupt = project.path / "baselines" / "m" / "test_bench.json"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text(
        '{"schema": "pytest-cnnperf/baseline", "schema_version": 2, "machine": "m", '
        '"entries": {"test_corrupt": {"k": {"step_time_s": [NaN]}}}}'
    )
    result = project.runpytest(
        "--cnnperf",
        "--cnnperf-machine=m",
        "--cnnperf-json=/proc/x/r.json",
        "-o",
        "cnnperf_samples=2",
        "-o",
        "cnnperf_min_time=0.02",
    )
    result.assert_outcomes(failed=6, errors=1)
    text = result.stdout.str() + result.stderr.str()
    assert "During handling" not in text
    assert "Traceback" not in text
    assert "pytest_cnnperf/" not in text
    result.stdout.fnmatch_lines(
        ["error: could not write the results to /proc/x/r.json: No such file or directory"]
    )


def test_a_path_outside_the_current_folder_is_shown_as_given(tmp_path: Path) -> None:
    from pytest_cnnperf.store.locations import display_path

    assert display_path("/proc/x/r.json") == "/proc/x/r.json"
    assert display_path(Path.cwd() / "out" / "r.json") == "out/r.json"
    assert display_path(Path.cwd().parent / "r.json") == str(Path.cwd().parent / "r.json")
