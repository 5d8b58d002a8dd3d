"""``cnnperf history``, ``cnnperf dashboard`` and ``cnnperf comment`` on a history with known
answers (see ``known``); every problem exits 2 with one line naming the history or file."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path

import known
import pytest

from pytest_cnnperf.cli import main
from pytest_cnnperf.history import comment, store
from pytest_cnnperf.history.store import open_store
from pytest_cnnperf.model import Result, ResultsFile
from pytest_cnnperf.store.results_file import RESULTS


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("history") / "history.db"
    with open_store(path, create=True) as target:
        for run_info, results in known.history():
            target.append(run_info, results)
    return path


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    """The results file of the history's last run."""
    results = tuple(known.result(kind, known.RUNS - 1) for kind in known.KINDS)
    path = tmp_path / "results.json"
    document = ResultsFile("2026-11-06T00:00:00Z", known.environment().machine, results)
    path.write_text(json.dumps(RESULTS.dump(document)))
    return path


# ---- history ----


def test_history_shows_each_series_with_its_change_points_and_creep(
    capsys: pytest.CaptureFixture[str], history: Path
) -> None:
    status, out, err = run(capsys, "history", "--history", history, "--rows", "3")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    machine = known.environment().machine
    assert lines[0] == f"history {store.display(history)}: 40 runs, 3 series"
    step = lines.index(
        f"test_history.py::test_step [train_step resnet18 bs=8 64x64 opt=sgd] on {machine}: 40 runs"
    )
    assert lines[step + 1] == "  change points:"
    assert re.fullmatch(
        r"    run 2[456] \([0-9a-f]{7}\.\.[0-9a-f]{7}\): throughput -\d+\.\d% "
        r"\(\S+ images/s -> \S+ images/s\), p = 0\.00\d",
        lines[step + 2],
    ), lines[step + 2]
    assert lines[step + 3].startswith("  creep: the latest 3 runs ")
    creep = next(line for line in lines if line.startswith("  creep:") and "creeping" in line)
    assert re.search(
        r"trend -[01]\.\d%/run \(95% CI -\d\.\d% to -\d\.\d%\), Kendall p = \S+: creeping$", creep
    )
    flat = lines.index(
        f"test_history.py::test_flat [train_step resnet18 bs=8 64x64 opt=sgd] on {machine}: 40 runs"
    )
    assert lines[flat + 1] == "  change points: none"
    assert lines[flat + 2].endswith(": no steady trend")
    header = re.compile(r"  run  commit   branch  recorded +throughput +peak mem")
    table = next(i for i in range(flat, len(lines)) if header.fullmatch(lines[i]))
    assert [line.split()[0] for line in lines[table + 1 : table + 4]] == ["38", "39", "40"]


def test_history_selects_benchmarks_by_pattern(
    capsys: pytest.CaptureFixture[str], history: Path
) -> None:
    status, out, _ = run(capsys, "history", "creep", "--history", history, "--rows", "0")
    assert status == 0
    assert out.splitlines()[0].endswith("40 runs, 1 series")
    assert "test_creep" in out
    assert "test_step" not in out
    status, _, err = run(capsys, "history", "*nothing*", "--history", history)
    assert status == 2
    assert err == (
        f"cnnperf history: history {store.display(history)}: no benchmark matching "
        "'*nothing*' (40 runs in it)\n"
    )


def test_history_reads_the_target_from_the_pytest_configuration(
    capsys: pytest.CaptureFixture[str],
    history: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.pytest.ini_options]\ncnnperf_history = "{history}"\n'
    )
    deeper = tmp_path / "tests" / "perf"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    status, out, _ = run(capsys, "history", "flat")
    assert status == 0
    assert "test_flat" in out


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            None,
            "cnnperf history: "
            + "no history given: use --history TARGET (a SQLite file or a postgresql:// URL), or set cnnperf_history in the pytest configuration ([tool.pytest.ini_options] or pytest.ini)",
        ),
        (
            "[pytest]\ncnnperf_history = ftp://x\n",
            "cnnperf history: {folder}pytest.ini: cnnperf_history = 'ftp://x': 'ftp://x' is not a history; use a SQLite file's path such as .cnnperf/history.db, or a PostgreSQL URL such as postgresql://user@host:5432/perf",
        ),
        (
            "[pytest]\ncnnperf_history = none.db\n",
            "cnnperf history: history {folder}none.db: no such file; record runs into it with pytest --cnnperf --cnnperf-history=PATH",
        ),
    ],
    ids=["none", "bad", "missing"],
)
def test_history_without_a_usable_target_says_how_to_give_one(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    config: str | None,
    message: str,
) -> None:
    if config:
        (tmp_path / "pytest.ini").write_text(config)
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "history")
    assert (status, out) == (2, "")
    folder = "" if config and "none.db" in config else f"{tmp_path}/"
    assert err == message.format(folder=folder) + "\n"


# ---- a history given where PATTERN, OUT_DIR or RESULTS goes ----


@pytest.fixture
def h_sqlite(history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the history as h.sqlite in a folder without a pytest configuration, the
    current one."""
    shutil.copy(history, tmp_path / "h.sqlite")
    monkeypatch.chdir(tmp_path)
    return Path("h.sqlite")


def test_history_takes_a_history_file_given_as_its_pattern(
    capsys: pytest.CaptureFixture[str], h_sqlite: Path
) -> None:
    status, out, err = run(capsys, "history", h_sqlite, "--rows", "1")
    assert (status, err) == (0, "")
    assert out.splitlines()[0] == "history h.sqlite: 40 runs, 3 series"


def test_dashboard_takes_a_history_file_given_as_its_pattern(
    capsys: pytest.CaptureFixture[str], h_sqlite: Path
) -> None:
    pytest.importorskip("matplotlib")
    status, out, _ = run(capsys, "dashboard", "site", h_sqlite)
    assert (status, out) == (0, "wrote site/index.html and 3 page(s) for 3 series\n")


def test_history_takes_a_postgresql_url_given_as_its_pattern(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = run(capsys, "history", "postgresql://u:pw@127.0.0.1:9/perf")
    assert status == 2  # no server there: what matters is that the URL was taken as the history
    assert err.startswith("cnnperf history: history postgresql://u:***@127.0.0.1:9/perf: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["history", "h.sqlite", "--history", "other.db"],
            "cnnperf history: h.sqlite is a history file: did you mean --history h.sqlite? "
            "PATTERN selects the benchmarks to show, and --history already names other.db",
        ),
        (
            ["dashboard", "h.sqlite"],
            "cnnperf dashboard: h.sqlite is a history file: did you mean --history h.sqlite? "
            "OUT_DIR is the folder the dashboard is written to, e.g. cnnperf dashboard site "
            "--history h.sqlite",
        ),
        (
            ["dashboard", "postgresql://u:pw@db.example/perf"],
            "cnnperf dashboard: postgresql://u:***@db.example/perf is a history: did you mean "
            "--history postgresql://u:***@db.example/perf? OUT_DIR is the folder the dashboard "
            "is written to, e.g. cnnperf dashboard site --history postgresql://u:***@db.example/perf",
        ),
        (
            ["comment", "h.sqlite"],
            "cnnperf comment: h.sqlite is a history file: did you mean --history h.sqlite? "
            "RESULTS is the results file of the run (pytest --cnnperf --cnnperf-json=PATH), e.g. "
            "cnnperf comment results.json --history h.sqlite",
        ),
        (
            ["history", "new.sqlite"],
            "cnnperf history: no history given: use --history TARGET (a SQLite file or a "
            "postgresql:// URL), or set cnnperf_history in the pytest configuration "
            "([tool.pytest.ini_options] or pytest.ini); new.sqlite was taken as PATTERN (the "
            "benchmarks to show): it is neither a history file of pytest-cnnperf nor a "
            "postgresql:// URL",
        ),
    ],
    ids=["history-twice", "dashboard-out-dir", "dashboard-url", "comment-results", "no-history"],
)
def test_a_history_where_another_argument_goes_is_named(
    capsys: pytest.CaptureFixture[str], h_sqlite: Path, args: list[str], message: str
) -> None:
    status, out, err = run(capsys, *args)
    assert (status, out) == (2, "")
    assert err == message + "\n"
    assert not Path("site").exists()


def test_a_file_that_is_no_history_stays_a_pattern(
    capsys: pytest.CaptureFixture[str], h_sqlite: Path
) -> None:
    """A test file's path is a pattern (test ids start with it), not a history."""
    Path("test_history.py").write_text("def test_step():\n    pass\n")
    status, out, _ = run(capsys, "history", "test_history.py", "--history", h_sqlite)
    assert status == 0
    assert out.splitlines()[0] == "history h.sqlite: 40 runs, 3 series"
    status, out, _ = run(capsys, "history", "test_history.py::test_flat", "--history", h_sqlite)
    assert status == 0
    assert out.splitlines()[0] == "history h.sqlite: 40 runs, 1 series"


def test_history_of_a_server_out_of_reach(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("psycopg")
    status, _, err = run(capsys, "history", "--history", "postgresql://u:pw@127.0.0.1:9/perf")
    assert status == 2
    assert err.startswith(
        "cnnperf history: history postgresql://u:***@127.0.0.1:9/perf: cannot connect: "
    )
    assert err.count("\n") == 1


def test_history_without_ruptures_says_what_to_install(
    capsys: pytest.CaptureFixture[str], history: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ruptures", None)
    status, _, err = run(capsys, "history", "--history", history)
    assert status == 2
    assert err == (
        "cnnperf history: the history's change points are found with ruptures, which is not "
        "installed; install it with pip install 'pytest-cnnperf[history]'\n"
    )


# ---- comment ----


def test_comment_is_the_run_with_its_trend_under_a_stable_marker(
    capsys: pytest.CaptureFixture[str], history: Path, results_file: Path
) -> None:
    status, out, _ = run(capsys, "comment", results_file, "--history", history)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == comment.MARKER == "<!-- cnnperf-comment -->"
    assert lines[1] == "### ✅ cnnperf: no regression in 3 benchmarks"
    start = lines.index(f"#### Trend in the history ({store.display(history)})")
    assert lines[start + 2] == (
        "| benchmark | runs | latest | from the best of the last 20 | trend | last change point |"
    )
    rows = {line.split("`")[1]: line for line in lines[start + 4 :] if line.startswith("| `")}
    assert set(rows) == {"test_step", "test_creep", "test_flat"}
    assert "⚠️ creeping" in rows["test_creep"]
    assert re.search(
        r"\| -\d+\.\d% at [0-9a-f]{7}\.\.[0-9a-f]{7} \(p = 0\.00\d\) \|$", rows["test_step"]
    )
    assert rows["test_flat"].endswith("| none |")


def _odd(result: Result) -> Result:
    """``result`` under a test id and a benchmark name= holding a pipe, a backtick and HTML."""
    config = dataclasses.replace(result.config, label="x|y<b>z</b>")
    test_id = "test_history.py::test_odd[a|b`c<script>alert(1)</script>]"
    return dataclasses.replace(result, test_id=test_id, config=config)


def test_comment_shows_names_holding_html_backticks_and_pipes_as_they_are(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    history = tmp_path / "history.db"
    with open_store(history, create=True) as target:
        for run_info, results in known.history(("flat",)):
            target.append(run_info, [_odd(r) for r in results])
    results_file = tmp_path / "results.json"
    last = ResultsFile(
        "2026-11-06T00:00:00Z",
        known.environment().machine,
        (_odd(known.result("flat", known.RUNS - 1)),),
    )
    results_file.write_text(json.dumps(RESULTS.dump(last)))
    status, out, _ = run(capsys, "comment", results_file, "--history", history)
    assert status == 0
    # the test id a code span (its pipe escaped in a table), name= text with HTML as entities
    code = "``test_odd[a\\|b`c<script>alert(1)</script>]``"
    name = "x\\|y&lt;b&gt;z&lt;/b&gt; bs=8 64x64"
    lines = out.splitlines()
    assert [line for line in lines if line.startswith(f"| 🆕 new | {code} | {name} | ")]
    assert lines[-1].startswith(f"| {code} (train_step {name} opt=sgd) | {known.RUNS} | ")
    assert "<b>" not in out
    assert out.count("<script>") == 2  # only inside those two code spans


def test_comment_without_a_history_is_the_run_alone(
    capsys: pytest.CaptureFixture[str],
    results_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    output = tmp_path / "out" / "comment.md"
    status, out, _ = run(capsys, "comment", results_file, "-o", output)
    assert (status, out) == (0, f"wrote {output}\n")
    text = output.read_text()
    assert text.startswith(
        "<!-- cnnperf-comment -->\n### ✅ cnnperf: no regression in 3 benchmarks\n"
    )
    assert "Trend" not in text


def test_the_shards_of_a_run_make_one_comment(
    capsys: pytest.CaptureFixture[str],
    results_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    data = json.loads(results_file.read_text())
    parts = []
    for i, results in enumerate((data["results"][:2], data["results"][2:])):
        part = tmp_path / f"shard-{i}.json"
        part.write_text(json.dumps({**data, "results": results}))
        parts.append(part)
    _, whole, _ = run(capsys, "comment", results_file)
    status, merged, _ = run(capsys, "comment", *parts)
    assert status == 0
    assert merged == whole
    assert "### ✅ cnnperf: no regression in 3 benchmarks" in merged


def test_comment_of_a_file_that_is_not_a_results_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "x.json"
    path.write_text("[]")
    status, _, err = run(capsys, "comment", path)
    assert status == 2
    assert err.startswith(f"cnnperf comment: {path}: ")


def test_a_long_comment_is_cut_to_githubs_limit() -> None:
    results = [known.result("flat", 0)] * 3000
    text = comment.render(results)
    assert len(text) <= comment.LIMIT
    assert text.startswith(comment.MARKER)
    assert text.endswith(
        "_(cut to fit GitHub's comment limit; the full summary is in the job's log)_\n"
    )


# ---- dashboard ----


def test_dashboard_writes_a_static_site(
    capsys: pytest.CaptureFixture[str], history: Path, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    site = tmp_path / "site"
    status, out, _ = run(capsys, "dashboard", site, "--history", history)
    assert (status, out) == (0, f"wrote {site / 'index.html'} and 3 page(s) for 3 series\n")
    index = (site / "index.html").read_text()
    pages = re.findall(r'href="(\d{3}-[^"]+\.html)"', index)
    assert pages == [
        "001-test_history.py-test_step.html",
        "002-test_history.py-test_creep.html",
        "003-test_history.py-test_flat.html",
    ]
    assert index.count("<svg") == 3  # a small chart per row
    for page in pages:
        html = (site / page).read_text()
        assert html.count("<svg") == 1
        assert '<a href="index.html">' in html
    for text in [index, *((site / p).read_text() for p in pages)]:
        assert "<script" not in text
        assert not re.search(r'(src|href)="(https?:)?//', text)  # nothing to fetch: works offline
    step = (site / pages[0]).read_text()
    assert "change point" in step
    assert step.count('<tr><td class="n">') == known.RUNS


def test_dashboard_is_the_same_for_the_same_history(history: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from pytest_cnnperf.history import commands

    for name in ("a", "b"):
        commands.dashboard(tmp_path / name, str(history), "flat", None, 20)
    page = "001-test_history.py-test_flat.html"
    assert (tmp_path / "a" / page).read_text() == (tmp_path / "b" / page).read_text()


def test_dashboard_into_a_file_is_refused(
    capsys: pytest.CaptureFixture[str], history: Path, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    (tmp_path / "site").write_text("")
    status, _, err = run(capsys, "dashboard", tmp_path / "site", "--history", history)
    assert status == 2
    assert (
        err
        == f"cnnperf dashboard: {tmp_path / 'site'} is a file; give a folder for the dashboard\n"
    )


def test_history_of_a_postgresql_database(capsys: pytest.CaptureFixture[str], pg_url: str) -> None:
    with open_store(pg_url) as target:
        for run_info, results in known.history(("step",)):
            target.append(run_info, results)
    status, out, _ = run(capsys, "history", "--history", pg_url, "--rows", "1")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"history {store.display(pg_url)}: 40 runs, 1 series"
    assert lines[3] == "  change points:"
    assert lines[4].startswith("    run 2")


def test_a_window_of_fewer_than_two_runs_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], history: Path
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["history", "--history", str(history), "--window", "1"])
    assert raised.value.code == 2
    assert capsys.readouterr().err.endswith(
        "argument --window: '1' is not a number of runs; use 2 or more, e.g. 20\n"
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("tox.ini", "[pytest]\ncnnperf_history = h.db\n"),
        ("setup.cfg", "[metadata]\nname = x\n\n[tool:pytest]\ncnnperf_history = h.db\n"),
        ("pytest.ini", "[pytest]\ncnnperf_history = postgresql://db.example/perf\n"),
    ],
)
def test_the_target_is_read_from_each_kind_of_pytest_configuration(
    tmp_path: Path, name: str, text: str
) -> None:
    from pytest_cnnperf.history.commands import configured_target

    (tmp_path / name).write_text(text)
    expected = "postgresql://db.example/perf" if "postgresql" in text else tmp_path / "h.db"
    assert configured_target(tmp_path) == expected


def test_a_pytest_ini_without_the_setting_ends_the_search(tmp_path: Path) -> None:
    from pytest_cnnperf.history.commands import configured_target

    (tmp_path / "tox.ini").write_text("[pytest]\ncnnperf_history = h.db\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pytest.ini").write_text("[pytest]\n")
    assert configured_target(tmp_path / "sub") is None
    assert configured_target(tmp_path) == tmp_path / "h.db"


# ---- bisect --history ----


def test_bisect_takes_good_and_bad_from_the_latest_change_point(history: Path) -> None:
    from pytest_cnnperf.history.commands import bisect_range

    good, bad, said = bisect_range(str(history), "test_history.py::test_step", None)
    assert (good, bad) == (known.commit(known.STEP_RUN - 2), known.commit(known.STEP_RUN - 1))
    assert said.startswith(
        "the history's latest change point in test_history.py::test_step [train_step resnet18 "
    )
    assert f"between {good[:10]} and {bad[:10]}" in said


@pytest.fixture
def in_a_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder a git repository without the history's commits."""
    import subprocess

    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q"], check=True)
    return tmp_path


@pytest.mark.usefixtures("in_a_clone")
def test_bisect_from_the_history_needs_its_commits_in_the_clone(
    capsys: pytest.CaptureFixture[str], history: Path
) -> None:
    status, _, err = run(
        capsys, "bisect", "--history", history, "test_history.py::test_step", "--", "t.py"
    )
    assert status == 2
    good = known.commit(known.STEP_RUN - 2)
    assert err == (
        f"cnnperf bisect: GOOD={good}: git knows no commit {good!r}; give a branch, a tag or a "
        "commit that git rev-parse accepts (git fetch origin first if it is a remote's)\n"
    )


@pytest.mark.usefixtures("in_a_clone")
def test_bisect_from_a_history_without_the_test_names_the_tests_it_has(
    capsys: pytest.CaptureFixture[str], history: Path
) -> None:
    status, _, err = run(capsys, "bisect", "--history", history, "test_x.py::test_y", "--", "t.py")
    assert status == 2
    assert err == (
        f"cnnperf bisect: {history} has no run of test_x.py::test_y outside pull requests (it "
        "has: test_history.py::test_creep, test_history.py::test_flat, "
        "test_history.py::test_step); give a test id as cnnperf history lists them\n"
    )
