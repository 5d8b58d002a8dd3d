"""scripts/compat, the compatibility check: the floor's constraints generated from
pyproject.toml, the pinned set from the README, a set's one line, its messages, and a run
through with a fake interpreter, pip and pytest (the real run is minutes and gigabytes: its lines
are in the manual's validation page, which these tests hold to pyproject.toml's bounds)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "compat"
PYPROJECT = """
[project]
dependencies = ["pytest>=8.0", "torch>=2.5,<3", "nvidia_ml_py>=12.535.77"]

[project.optional-dependencies]
plot = ["matplotlib>=3.7"]
test = ["matplotlib>=3.7", "psycopg[binary]>=3.1.4"]
"""


@pytest.fixture
def compat(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module (its name has no ``.py``)."""
    loader = importlib.machinery.SourceFileLoader("compat", str(SCRIPT))
    spec = importlib.util.spec_from_loader("compat", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "compat", module)  # its dataclasses look it up
    loader.exec_module(module)
    return module


def test_the_floor_is_each_direct_dependency_at_its_lower_bound(compat: ModuleType) -> None:
    floor = compat.floor(PYPROJECT)
    assert floor == {
        "pytest": "8.0",
        "torch": "2.5",
        "nvidia-ml-py": "12.535.77",
        "matplotlib": "3.7",
        "psycopg": "3.1.4",
    }
    # pip's constraints take no extras: psycopg[binary] pins psycopg-binary to its own version
    assert compat.render(floor).splitlines()[-1] == "psycopg==3.1.4"


def test_the_floor_covers_the_package_and_its_test_extra(compat: ModuleType) -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    names = {compat.normalised(re.split(r"[\[>]", r)[0]) for r in declared}
    assert set(compat.constraints("floor")) == names


@pytest.mark.parametrize(
    ("requirement", "why"),
    [
        ('"torch"', "'torch' declares no lower bound the check can install"),
        ('"torch==2.5.1"', "'torch==2.5.1' declares no lower bound the check can install"),
        (
            "\"torch>=2.5; python_version < '3.13'\"",
            "\"torch>=2.5; python_version < '3.13'\" declares",
        ),
    ],
)
def test_a_dependency_the_floor_cannot_install_is_named_with_the_form_to_use(
    compat: ModuleType, requirement: str, why: str
) -> None:
    with pytest.raises(compat.Problem) as raised:
        compat.floor(f"[project]\ndependencies = [{requirement}]\n")
    assert str(raised.value).startswith(f"pyproject.toml: {why}")
    assert str(raised.value).endswith(
        "the floor installs every direct dependency at its lower bound, so write it as "
        "NAME>=VERSION (an extra and an upper bound allowed: NAME[EXTRA]>=VERSION,<UPPER)"
    )


def test_two_lower_bounds_of_one_dependency_are_a_problem(compat: ModuleType) -> None:
    with pytest.raises(compat.Problem) as raised:
        compat.floor(
            '[project]\ndependencies = ["numpy>=1.24"]\n'
            '[project.optional-dependencies]\ntest = ["numpy>=1.26"]\n'
        )
    assert str(raised.value) == (
        "pyproject.toml: numpy has two lower bounds, 1.24 and 1.26: the floor needs one; "
        "declare the same bound everywhere"
    )


def test_the_pinned_set_is_the_readmes_test_command(compat: ModuleType) -> None:
    assert compat.constraints("pinned") == {"torch": "2.14.1", "torchvision": "0.29.1"}
    with pytest.raises(compat.Problem) as raised:
        compat.pinned("pip install torch -e '.[test]' && pytest\n")
    assert str(raised.value) == (
        "README.md: the test command (the line with -e '.[test]') pins no torch==VERSION "
        "torchvision==VERSION, which the pinned set installs; pin both there"
    )


def test_pytests_summary_and_skips_are_read_from_its_output(compat: ModuleType) -> None:
    output = (
        "SKIPPED [1] tests/test_cuda.py:40: needs a CUDA device\n"
        "SKIPPED [2] tests/history/test_pg.py:12: no PostgreSQL server binaries\n"
        "==== 847 passed, 2 failed, 19 skipped, 3 warnings in 301.23s (0:05:01) ====\n"
    )
    assert compat.summary(output) == ("847 passed, 2 failed, 19 skipped, 3 warnings", 301.23)
    assert compat.summary("no summary\n") is None
    assert compat.skipped(output) == {
        "tests/test_cuda.py:40: needs a CUDA device",
        "tests/history/test_pg.py:12: no PostgreSQL server binaries",
    }


def test_a_failed_tests_title_and_error_lines_are_read_from_its_output(
    compat: ModuleType,
) -> None:
    errors = "".join(f"E       line {n}\n" for n in range(20))
    output = (
        "=================================== FAILURES ===================================\n"
        "______________________________ test_save_counts ______________________________\n"
        "    def test_save_counts():\n"
        ">       assert ended == 0\n"
        "E       AssertionError: the sample processes cannot start\n"
        "E       assert 1 == 0\n"
        "------------------------------ Captured stdout call ----------------------------\n"
        "_____________________________ test_other[cpu] _____________________________\n"
        f"{errors}"
        "=========================== short test summary info ============================\n"
        "E  not a report's line\n"
        "==== 1 failed in 3.00s ====\n"
    )
    shown = compat.failures(output)
    assert shown[:4] == [
        "  test_save_counts:",
        "    AssertionError: the sample processes cannot start",
        "    assert 1 == 0",
        "  test_other[cpu]:",
    ]
    assert shown[4:] == [f"    line {n}" for n in range(compat._SHOWN)]
    assert compat.failures("==== 5 passed in 1.00s ====\n") == []


def outcome(compat: ModuleType, name: str, skipped: set[str]) -> object:
    versions = {"Python": "3.11.7", "torch": "2.5.0"}
    return compat.Outcome(name, True, "3 passed", 61.2, 302.6, versions, frozenset(skipped))


def test_a_sets_line_says_how_it_ended_in_what_time_on_which_versions(compat: ModuleType) -> None:
    line = compat.line(outcome(compat, "floor", set()))
    assert line == (
        "floor: passed: 3 passed (tests 5 min 3 s, install 1 min 1 s): Python 3.11.7, torch 2.5.0"
    )


def test_the_last_line_says_whether_the_sets_skipped_alike(compat: ModuleType) -> None:
    alike = [outcome(compat, name, {"a.py:1: no GPU"}) for name in ("floor", "pinned")]
    assert compat.skip_line(alike) == "skipped alike in floor, pinned: 1 lines"
    different = [outcome(compat, "floor", {"a.py:1: no GPU", "b.py:2: old torch"}), alike[1]]
    assert compat.skip_line(different) == "skipped differently: only in floor: b.py:2: old torch"
    assert compat.skip_line(alike[:1]) is None


def test_an_unknown_set_is_a_usage_error(
    compat: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compat.main(["ceiling"]) == 2
    assert capsys.readouterr().err == "compat: unknown version set 'ceiling': use floor or pinned\n"


def test_constraints_print_without_installing(
    compat: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compat.main(["--constraints", "pinned"]) == 0
    assert capsys.readouterr().out == "torch==2.14.1\ntorchvision==0.29.1\n"


#: an interpreter, its virtual environment and pytest, saying what they were asked in $FAKE_LOG
FAKE = """#!/bin/sh
echo "$(basename "$0") $*" >> "$FAKE_LOG"
if [ "$(basename "$0")" = pytest ]; then
  grep SigIgn /proc/self/status >> "$FAKE_LOG"
  echo "SKIPPED [1] tests/test_cuda.py:40: needs a CUDA device"
  if [ -n "$FAKE_PYTEST_FAILS" ]; then
    echo "___ test_save ___"
    echo "E   SystemError: initialization of _boost raised unreported exception"
    echo "==== 1 failed, 4 passed, 1 skipped in 2.50s ===="
    exit 1
  fi
  echo "==== 5 passed, 1 skipped in 2.50s ===="
  exit 0
fi
case "$1 $2" in
  "-m venv") mkdir -p "$4/bin" && cp "$0" "$4/bin/python" && cp "$0" "$4/bin/pytest" ;;
  "-m pip")
    if [ -n "$FAKE_PIP_FAILS" ]; then
      echo "ERROR: Could not find a version that satisfies the requirement nvidia-ml-py==12.0.0"
      exit 1
    fi ;;
  -c*) echo '{"Python": "3.11.7", "torch": "2.5.0"}' ;;
esac
"""


def run(
    compat: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, list[str]]:
    fake = tmp_path / "python"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log"))
    status = compat.main(["--python", str(fake), "--dir", str(tmp_path / "envs"), *args])
    return status, (tmp_path / "log").read_text().splitlines()


def test_a_set_is_installed_fresh_from_its_constraints_and_tested(
    compat: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # started in the background, the check inherits SIGINT ignored: the suite must not
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status, calls = run(compat, tmp_path, monkeypatch, "--find-links", "/wheels", "floor")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert status == 0
    ignored = calls.pop()
    assert int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)) == 0, ignored
    envs = tmp_path / "envs"
    assert calls[0] == f"python -m venv --clear {envs / 'floor'}"
    assert calls[1] == (
        f"python -m pip install --no-input --find-links=/wheels -c {envs / 'floor.constraints'} "
        "-e .[test]"
    )
    assert calls[-1] == "pytest -rs"
    assert (envs / "floor.constraints").read_text() == compat.render(compat.constraints("floor"))
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"floor: passed: 5 passed, 1 skipped \(tests \d+ s, install \d+ s\): "
        r"Python 3\.11\.7, torch 2\.5\.0",
        line,
    )


def test_a_set_that_cannot_install_says_pips_error_and_fails(
    compat: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAKE_PIP_FAILS", "1")
    status, calls = run(compat, tmp_path, monkeypatch, "floor", "pinned")
    assert status == 1
    assert not any(c.startswith("pytest") for c in calls)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2  # one a set, and no skip line: nothing was tested
    log = tmp_path / "envs" / "floor.log"
    assert re.fullmatch(
        r"floor: FAILED: not installed: ERROR: Could not find a version that satisfies the "
        rf"requirement nvidia-ml-py==12\.0\.0 \(log: {re.escape(str(log))}\) "
        r"\(install \d+ s\): pytest 8\.0, torch 2\.5, .*",
        lines[0],
    )


def test_a_set_whose_tests_fail_says_which_and_why_under_its_line(
    compat: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAKE_PYTEST_FAILS", "1")
    status, _ = run(compat, tmp_path, monkeypatch, "floor")
    assert status == 1
    line, *failed = capsys.readouterr().out.splitlines()
    assert line.startswith("floor: FAILED: 1 failed, 4 passed, 1 skipped (log: ")
    assert failed == [
        "  test_save:",
        "    SystemError: initialization of _boost raised unreported exception",
    ]


def test_the_floor_the_manual_shows_passing_is_pyprojects(compat: ModuleType) -> None:
    """Each lower bound in pyproject.toml is the version the check's recorded floor line ran
    (torch>=2.5 is 2.5.0); a bound changed without running the check again fails here."""
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if x.startswith("floor: passed: ")]
    ran = dict(item.rsplit(" ", 1) for item in line.split("): ", 1)[1].split(", "))

    def release(version: str) -> str:
        return re.sub(r"(\.0)+$", "", version)

    floor = compat.constraints("floor")
    assert {name: release(ran[name]) for name in floor} == {
        name: release(version) for name, version in floor.items()
    }
