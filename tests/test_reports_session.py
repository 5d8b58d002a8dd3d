"""Reports through a real pytest session whose benchmarks take scripted samples (see
``scripted.py``): the end-of-session table, ``-v`` headlines, ``--cnnperf-json``,
``--cnnperf-markdown`` and ``$GITHUB_STEP_SUMMARY``, ``--cnnperf-plot``,
``--cnnperf-benchmark-json`` and JUnit properties. Nothing is timed."""

from __future__ import annotations

import dataclasses
import json
import sys
import xml.etree.ElementTree as ET

import matplotlib.figure  # noqa: F401  (imported once, for the in-process runs that draw plots)
import pytest
import scipy.stats  # noqa: F401  (imported once, for the in-process runs that gate)
from scripted import Script, Scripted

from pytest_cnnperf.model import Sample
from pytest_cnnperf.sampling.manager import Target

BENCH = """
from models import Sleepy

def test_a(cnnperf):
    cnnperf.train_step(Sleepy(name="a"), batch_size=2, image_size=8)
"""


def train_phases(target: Target, i: int, sample: Sample) -> Sample:
    """A training step's three phases, 30/60/10 of the step."""
    step = sample.step_time_s
    phases = {"forward": (step * 0.3,), "backward": (step * 0.6,), "optimizer": (step * 0.1,)}
    return dataclasses.replace(sample, phases=phases)


@pytest.fixture
def scripted() -> Scripted:
    """Training steps of 10 ms and a 40 KiB peak (as small as the sleepy model's own): every
    run measures the same, so a gating run after a saving one is ok."""
    return Scripted(Script(peak_bytes=40 << 10, decorate=train_phases))


@pytest.fixture
def saved(project: pytest.Pytester, scripted: Scripted) -> pytest.Pytester:
    project.makepyfile(test_bench=BENCH)
    project.runpytest("--cnnperf", "--cnnperf-save", plugins=[scripted]).assert_outcomes(passed=1)
    return project


def test_every_report_of_a_gating_run(
    saved: pytest.Pytester, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = saved.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = saved.runpytest(
        "--cnnperf",
        "-v",
        "--cnnperf-json=out/results.json",
        "--cnnperf-markdown=out/summary.md",
        "--cnnperf-plot=out/plot.svg",
        "--cnnperf-benchmark-json=out/benchmark.json",
        "--junitxml=out/junit.xml",
        plugins=[scripted],
    )
    result.assert_outcomes(passed=1)
    # -v: the headline under the test's line, then the table at the end
    result.stdout.fnmatch_lines(
        [
            "test_bench.py::test_a PASSED*",
            "    Sleepy bs=2 8x8: *: * images/s, step * ms, peak * KiB (*% vs baseline)",
            "*= cnnperf =*",
            "1 benchmark: 1 ok",
            "",
            "verdict  *test    benchmark  *throughput  *baseline  *change  *peak mem  *baseline  *change  *step  *fwd / bwd / opt",
            "*  test_a  Sleepy bs=2 8x8  *images/s ±*%  *images/s  *%  *KiB  *KiB  *%  *ms  * / * / * ms",
            "",
            "change: the gate's estimate of the throughput change*",
            "",
            "environment: *, torch *, Python *, * thread* (*)",
            "wrote the results to out/results.json",
            "wrote the Markdown summary to out/summary.md",
            "wrote the Markdown summary to *step-summary.md",
            "wrote the plot to out/plot.svg",
            "wrote the pytest-benchmark JSON to out/benchmark.json",
        ]
    )
    assert {test for test, _ in scripted.script.taken} == {"test_a"}  # nothing was timed
    out = saved.path / "out"

    results = json.loads((out / "results.json").read_text())
    assert (results["schema"], results["schema_version"]) == ("pytest-cnnperf/results", 2)
    [only] = results["results"]
    assert only["test_id"] == "test_bench.py::test_a"
    assert only["decision"]["baseline_file"].endswith("test_bench.json")

    markdown = (out / "summary.md").read_text()
    assert markdown.startswith("### ")
    assert "| verdict | test | benchmark | throughput | baseline | change |" in markdown
    assert summary.read_text() == "earlier step\n" + markdown + "\n"

    assert "<svg" in (out / "plot.svg").read_text()

    benchmark = json.loads((out / "benchmark.json").read_text())
    assert benchmark["benchmarks"][0]["fullname"] == "test_bench.py::test_a"
    assert benchmark["machine_info"]["python_version"]

    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(out / "junit.xml").getroot().iter("property")
    }
    assert props["cnnperf.benchmark"] == "train_step Sleepy bs=2 8x8 opt=sgd"
    assert props["cnnperf.verdict"] == "ok"
    assert props["cnnperf.throughput"].endswith(" images/s")
    assert props["cnnperf.throughput_change"].endswith("%")


def test_a_report_that_cannot_be_written_is_an_error_line(
    project: pytest.Pytester, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    project.makepyfile(test_bench=BENCH)
    (project.path / "blocker").write_text("a file where a folder should be")
    result = project.runpytest(
        "--cnnperf",
        "--cnnperf-save",
        "--cnnperf-json=blocker/results.json",
        "--cnnperf-markdown=summary.md",
        "--cnnperf-plot=plot.png",
        plugins=[scripted],
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "1 benchmark: 1 saved",
            "wrote the Markdown summary to summary.md",
            "error: could not write the results to blocker/results.json: File exists",
            "error: could not write the plot to plot.png: drawing a plot needs matplotlib, which "
            "is not installed; install it with pip install 'pytest-cnnperf[[]plot]'",
        ]
    )
    assert (project.path / "summary.md").read_text().startswith("### 💾 cnnperf: recorded")


def test_a_plot_file_of_another_kind(project: pytest.Pytester, scripted: Scripted) -> None:
    project.makepyfile(test_bench=BENCH)
    result = project.runpytest(
        "--cnnperf", "--cnnperf-save", "--cnnperf-plot=plot.jpg", plugins=[scripted]
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "error: could not write the plot to plot.jpg: a plot is drawn as PNG or SVG: the file "
            "name must end in .png or .svg, not .jpg (e.g. cnnperf.png)"
        ]
    )


def test_without_cnnperf_no_report_is_written(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_x():\n    pass\n")
    result = pytester.runpytest("--cnnperf-markdown=summary.md", "--cnnperf-json=r.json")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "summary.md").exists()
    result.stdout.no_fnmatch_line("*= cnnperf =*")
