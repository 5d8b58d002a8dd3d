"""Renderings of results, each on constructed results whose figures are known: the terminal
table, Markdown, JUnit properties, pytest-benchmark's JSON, mode tables, epoch projections and
plots. No benchmark runs here."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import ENV, sample

from pytest_cnnperf.model import (
    BenchConfig,
    Comparison,
    Creep,
    Decision,
    Measurement,
    Remark,
    Result,
    Verdict,
)
from pytest_cnnperf.reports import (
    benchmark_json,
    epoch,
    junit,
    markdown,
    modes,
    outputs,
    plot,
    table,
    terminal,
)
from pytest_cnnperf.store import results_file
from pytest_cnnperf.store.baseline import BaselineStore

MiB = 1 << 20


def config(model: str = "resnet18", **changes: object) -> BenchConfig:
    base = BenchConfig(
        kind="train_step", model=model, batch_size=8, image_size=(64, 64), optimizer="sgd"
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


ITEMS = 8  # images per step in every fake result


def throughput(base_step: float, step: float, verdict: Verdict) -> Comparison:
    return Comparison(
        metric="throughput",
        baseline=ITEMS / base_step,
        current=ITEMS / step,
        change=1 - base_step / step,
        threshold=0.1,
        verdict=verdict,
        p_value=0.004,
        baseline_samples=6,
        current_samples=6,
    )


def memory(base: int, now: int, verdict: Verdict = Verdict.OK) -> Comparison:
    return Comparison("memory", base, now, now / base - 1, 0.05, verdict)


def result(
    name: str,
    step: float,
    verdict: Verdict,
    base_step: float | None = None,
    mem: int = 100 * MiB,
    base_mem: int | None = None,
    notes: tuple[str, ...] = (),
    **changes: object,
) -> Result:
    cfg = config(name, **changes)
    has_baseline = base_step is not None
    decision = Decision(
        verdict=verdict,
        throughput=throughput(base_step, step, verdict) if base_step is not None else None,
        memory=memory(base_mem or mem, mem) if has_baseline else None,
        reasons=tuple(Remark(note) for note in notes),
        baseline_file="baselines/cpu-test-2t/tests/test_perf.json" if has_baseline else None,
        failed=verdict is Verdict.REGRESSED,
    )
    return Result(
        config=cfg,
        test_id=f"tests/test_perf.py::test_train[{name}]",
        decision=decision,
        environment=ENV,
        measurement=Measurement(
            ITEMS, tuple(sample(step * f, mem) for f in (0.98, 1.0, 1.0, 1.02)), "images"
        ),
    )


def redecided(r: Result, **changes: Any) -> Result:
    """``r`` with changes to its decision."""
    assert r.decision is not None
    return dataclasses.replace(r, decision=dataclasses.replace(r.decision, **changes))


GATED = [
    result("resnet18", 0.05, Verdict.OK, base_step=0.05),
    result("vgg16", 0.4, Verdict.REGRESSED, base_step=0.32),
    result("mobilenet_v2", 0.05, Verdict.IMPROVED, base_step=0.08, mem=80 * MiB, base_mem=90 * MiB),
    result(
        "googlenet", 0.1, Verdict.INCONCLUSIVE, base_step=0.1, notes=("the machine ran 30% slower",)
    ),
    result("resnet50", 0.1, Verdict.NEW),
]
SAVED = [result("resnet18", 0.05, Verdict.SAVED), result("vgg16", 0.4, Verdict.SAVED)]


# ---- the rows every table shares ----


def test_short_key_leaves_out_what_goes_without_saying() -> None:
    assert table.short_key(config()) == "resnet18 bs=8 64x64"
    assert (
        table.short_key(config(kind="inference", amp="bf16", optimizer=None))
        == "inference resnet18 bs=8 64x64 amp=bf16"
    )
    assert table.short_key(config(optimizer="adam")) == "resnet18 bs=8 64x64 opt=adam"


def test_a_row_shows_throughput_and_memory_against_the_baseline() -> None:
    row = table.row(GATED[1])
    assert row.verdict == "regressed"
    assert row.test == "test_train[vgg16]"
    assert row.throughput == "20.0 images/s ±1%"
    assert row.baseline_throughput == "25.0 images/s"
    assert row.throughput_change == "-20.0%"
    assert (row.memory, row.baseline_memory, row.memory_change) == (
        "100.0 MiB",
        "100.0 MiB",
        "+0.0%",
    )
    assert row.phases == "120.0 / 240.0 / 40.0 ms"


def test_the_summary_counts_verdicts_worst_first_and_names_the_regressed() -> None:
    assert table.summary(GATED) == (
        "5 benchmarks: 1 regressed (test_train[vgg16]), 1 inconclusive, 1 improved, 1 new, 1 ok"
    )
    assert table.summary(GATED[:1]) == "1 benchmark: 1 ok"


# ---- terminal ----


def test_terminal_table_has_verdict_throughput_memory_and_environment() -> None:
    lines = terminal.lines(GATED)
    assert lines[0].startswith("5 benchmarks: 1 regressed (test_train[vgg16])")
    assert lines[2].split() == [
        "verdict", "test", "benchmark", "throughput", "baseline", "change",
        "peak", "mem", "baseline", "change",
    ]  # fmt: skip
    assert lines[4].split() == [
        "regressed", "test_train[vgg16]", "vgg16", "bs=8", "64x64", "20.0", "images/s", "±1%",
        "25.0", "images/s", "-20.0%", "100.0", "MiB", "100.0", "MiB", "+0.0%",
    ]  # fmt: skip
    new_row = lines[7].split()
    assert new_row[:2] == ["new", "test_train[resnet50]"]
    assert new_row.count("-") == 4  # nothing to compare with
    assert "note: test_train[googlenet]: the machine ran 30% slower" in lines
    assert lines[-1] == (
        "environment: Test CPU, torch 2.14.1, torchvision 0.29.1, Python 3.11.7, 2 threads "
        "(cpu-test-2t)"
    )


def test_terminal_figures_are_aligned_on_the_right() -> None:
    rows = terminal.lines(GATED)[3:7]
    ends = {line.index("images/s") for line in rows}
    assert len(ends) == 1


def test_a_saving_run_leaves_out_the_baseline_columns() -> None:
    header = terminal.lines(SAVED)[2]
    assert header.split() == ["verdict", "test", "benchmark", "throughput", "peak", "mem"]


def test_verbose_adds_step_time_and_phases() -> None:
    header = terminal.lines(SAVED, verbose=True)[2]
    assert header.split()[-6:] == ["step", "fwd", "/", "bwd", "/", "opt"]


def test_change_is_explained_under_the_table() -> None:
    assert any(line.startswith("change: ") for line in terminal.lines(GATED))
    assert not any(line.startswith("change: ") for line in terminal.lines(SAVED))


# ---- Markdown ----


def test_markdown_starts_with_the_verdict_and_names_the_regressed() -> None:
    text = markdown.render(GATED)
    lines = text.splitlines()
    assert lines[0] == "### ❌ cnnperf: 1 of 5 benchmarks regressed"
    assert lines[2] == (
        "- ❌ `test_train[vgg16]` (vgg16 bs=8 64x64): throughput -20.0% (fails below -10%)"
    )
    assert lines[3] == (
        "- ❔ `test_train[googlenet]` (googlenet bs=8 64x64): inconclusive at the 10% "
        "threshold (throughput +0.0%, spread ±1%); re-run it or measure more with "
        "--cnnperf-effort=thorough"
    )
    assert lines[5] == (  # table.summary's line, the test named as code
        "5 benchmarks: 1 regressed (`test_train[vgg16]`), 1 inconclusive, 1 improved, 1 new, 1 ok"
    )


def test_markdown_table_then_environment() -> None:
    lines = markdown.render(GATED).splitlines()
    header = lines.index(
        "| verdict | test | benchmark | throughput | baseline | change | peak mem | baseline "
        "| change |"
    )
    assert lines[header + 1] == "|---|---|---|--:|--:|--:|--:|--:|--:|"
    assert lines[header + 2] == (
        "| ✅ ok | `test_train[resnet18]` | resnet18 bs=8 64x64 | 160 images/s ±1% | "
        "160 images/s | +0.0% | 100.0 MiB | 100.0 MiB | +0.0% |"
    )
    assert "- `test_train[googlenet]`: the machine ran 30% slower" in lines
    assert f"_{table.CHANGE_LEGEND}_" in lines
    environment = lines.index(
        "**Environment** (`cpu-test-2t`): Test CPU, torch 2.14.1, torchvision 0.29.1, "
        "Python 3.11.7, 2 threads"
    )
    assert environment > header


@pytest.mark.parametrize(
    ("results", "title"),
    [
        (GATED[:1], "✅ cnnperf: no regression in 1 benchmark"),
        ([GATED[0], GATED[3]], "❔ cnnperf: no regression found; 1 of 2 benchmarks inconclusive"),
        (SAVED, "💾 cnnperf: recorded baselines of 2 benchmarks"),
    ],
)
def test_markdown_title(results: list[Result], title: str) -> None:
    assert markdown.render(results).splitlines()[0] == f"### {title}"


def test_markdown_escapes_pipes_in_cells() -> None:
    odd = dataclasses.replace(GATED[0], test_id="tests/test_perf.py::test_a[x|y]")
    assert "`test_a[x\\|y]`" in markdown.render([odd])


# a test id and a benchmark name= holding a pipe, a backtick and HTML
ODD_TEST = "test_a[x|y`z<script>alert(1)</script>]"
ODD_NAME = "x|y<b>z</b>"


def test_markdown_shows_names_holding_html_backticks_and_pipes_as_they_are() -> None:
    """Neither name splits a table cell, turns bold or leaves a live tag: the test id is a code
    span fenced by more backticks than it holds (pipes escaped in the table), the name text with
    HTML written as entities."""
    odd = dataclasses.replace(
        redecided(GATED[1], reasons=(Remark("saw <i>this</i> & *that*"),)),
        test_id=f"tests/test_perf.py::{ODD_TEST}",
        config=dataclasses.replace(GATED[1].config, label=ODD_NAME),
    )
    lines = markdown.render([odd]).splitlines()
    code = "``test_a[x|y`z<script>alert(1)</script>]``"
    name = "x\\|y&lt;b&gt;z&lt;/b&gt; bs=8 64x64"
    assert lines[2] == f"- ❌ {code} ({name}): throughput -20.0% (fails below -10%)"
    assert lines[4] == f"1 benchmark: 1 regressed ({code})"
    assert lines[8].startswith(
        "| ❌ regressed | ``test_a[x\\|y`z<script>alert(1)</script>]`` "
        f"| {name} | 20.0 images/s ±1% |"
    )
    assert f"- {code}: saw &lt;i&gt;this&lt;/i&gt; &amp; \\*that\\*" in lines


@pytest.mark.parametrize(
    ("value", "span"),
    [
        ("test_a[x]", "`test_a[x]`"),
        ("a`b", "``a`b``"),
        ("a``b`c", "```a``b`c```"),
        ("`a", "`` `a ``"),  # CommonMark takes the padding spaces off again
        ("a ", "` a  `"),
        ("a\nb", "`a b`"),
    ],
)
def test_markdown_code_spans_hold_any_backticks(value: str, span: str) -> None:
    assert markdown.code(value) == span


def test_markdown_text_escapes_what_github_would_read_as_markdown_or_html() -> None:
    assert markdown.text("*a* _b_ snake_case [l](u) ~s~ `c` \\ x|y & <i>\nz") == (
        "\\*a\\* \\_b\\_ snake_case \\[l\\](u) \\~s\\~ \\`c\\` \\\\ x\\|y &amp; &lt;i&gt; z"
    )


def test_markdown_is_appended_to_the_step_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    assert markdown.step_summary({"GITHUB_STEP_SUMMARY": str(summary)}) == summary
    assert markdown.step_summary({}) is None
    markdown.append(summary, GATED)
    text = summary.read_text()
    assert text.startswith("earlier step\n### ❌ cnnperf")


# ---- JUnit properties ----


def test_junit_properties_carry_each_benchmarks_figures() -> None:
    props = dict(junit.properties(GATED[1]))
    assert props == {
        "cnnperf.benchmark": "train_step vgg16 bs=8 64x64 opt=sgd",
        "cnnperf.verdict": "regressed",
        "cnnperf.headline": "regressed: 20.0 images/s, step 400.0 ms, peak 100.0 MiB "
        "(-20.0% vs baseline)",
        "cnnperf.throughput": "20 images/s",
        "cnnperf.step_time_s": "0.4",
        "cnnperf.samples": "4",
        "cnnperf.baseline_throughput": "25 images/s",
        "cnnperf.throughput_change": "-20.0%",
        "cnnperf.peak_memory_bytes": str(100 * MiB),
        "cnnperf.baseline_peak_memory_bytes": str(100 * MiB),
        "cnnperf.memory_change": "+0.0%",
        "cnnperf.baseline_file": "baselines/cpu-test-2t/tests/test_perf.json",
    }


def test_junit_properties_of_a_failed_benchmark_name_the_error() -> None:
    failed = Result(
        config=config("X"),
        test_id="t.py::test_x",
        decision=Decision(verdict=Verdict.ERROR, failed=True),
        error="out of memory",
    )
    assert junit.properties(failed)[-1] == ("cnnperf.error", "out of memory")


# ---- JSON ----


def test_results_json_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.json"
    results_file.write(path, GATED, "cpu-test-2t")
    data = json.loads(path.read_text())
    assert (data["schema"], data["schema_version"]) == ("pytest-cnnperf/results", 2)
    loaded = results_file.load(path)
    assert (loaded.kind, loaded.machine) == ("results", "cpu-test-2t")
    assert loaded.results == tuple(GATED)


# ---- pytest-benchmark's format ----

INFO = ({"node": "test", "cpu": {}}, {"id": "abc", "dirty": False, "project": "p"})


def test_benchmark_json_has_pytest_benchmarks_shape() -> None:
    data = benchmark_json.document(GATED, *INFO)
    assert set(data) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    first = data["benchmarks"][0]
    assert first["name"] == "test_train[resnet18]"
    assert first["fullname"] == "tests/test_perf.py::test_train[resnet18]"
    assert first["param"] == "resnet18"
    assert first["stats"]["rounds"] == 4
    assert first["stats"]["median"] == pytest.approx(0.05)
    assert first["stats"]["data"] == pytest.approx([0.049, 0.05, 0.05, 0.051])
    assert first["extra_info"]["images_per_second"] == pytest.approx(160)
    assert first["extra_info"]["verdict"] == "ok"


def test_benchmark_json_names_several_benchmarks_of_one_test_apart() -> None:
    twice = [GATED[0], dataclasses.replace(GATED[1], test_id=GATED[0].test_id)]
    names = [b["name"] for b in benchmark_json.document(twice, *INFO)["benchmarks"]]
    assert names == [
        "test_train[resnet18] [train_step resnet18 bs=8 64x64 opt=sgd]",
        "test_train[resnet18] [train_step vgg16 bs=8 64x64 opt=sgd]",
    ]


def test_pytest_benchmark_reads_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_benchmark.cli import main

    path = tmp_path / "bench.json"
    benchmark_json.write(path, GATED, lambda: INFO)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["pytest-benchmark", "compare", str(path)])
    main()
    out = capsys.readouterr().out
    assert "test_train[resnet18]" in out
    assert "test_train[vgg16]" in out


def test_benchmark_json_without_pytest_benchmark_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pytest_benchmark", None)
    with pytest.raises(benchmark_json.MissingBenchmark) as exc_info:
        benchmark_json.write(tmp_path / "b.json", GATED, lambda: INFO)
    assert str(exc_info.value) == (
        "writing pytest-benchmark's format needs pytest-benchmark, which is not installed; "
        "install it with pip install 'pytest-cnnperf[benchmark]'"
    )


# ---- mode tables ----


def mode_results(reference_step: float = 0.1) -> list[Result]:
    results = []
    for name, factor in (("resnet18", 1.0), ("mobilenet_v2", 0.5)):
        for amp, channels_last, speed in (
            (None, False, 1.0),
            ("bf16", False, 1.6),
            (None, True, 1.25),
            ("bf16", True, 2.0),
        ):
            step = reference_step * factor / speed
            results.append(result(name, step, Verdict.OK, amp=amp, channels_last=channels_last))
    return results


def test_mode_table_speedups_against_fp32_contiguous() -> None:
    mode_table = modes.build(mode_results())
    assert mode_table is not None
    assert mode_table.dimensions == ("amp", "memory format")
    assert [mode_table.label(m) for m in mode_table.modes] == [
        "fp32 contiguous", "fp32 channels_last", "bf16 contiguous", "bf16 channels_last",
    ]  # fmt: skip
    lines = modes.lines(mode_table)
    assert lines[0] == (
        "Step time per mode; speedup = step time in the reference mode (fp32 contiguous) / "
        "step time in the mode"
    )
    assert lines[2].split("  ")[0] == "benchmark"
    assert lines[3].split() == [
        "resnet18", "bs=8", "64x64", "100.0", "ms", "80.0", "ms", "1.25x",
        "62.5", "ms", "1.60x", "50.0", "ms", "2.00x",
    ]  # fmt: skip


def test_mode_table_with_another_reference() -> None:
    mode_table = modes.build(mode_results(), reference="bf16,channels_last")
    assert mode_table is not None
    assert mode_table.label(mode_table.reference) == "bf16 channels_last"
    row = mode_table.rows[0]
    assert row.cells[mode_table.modes[1]].speedup == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (
            "fp64",
            "'fp64' in the reference 'fp64' is not a mode; use cudnn=on|off|benchmark|"
            "deterministic (or just on, off, ...), fp32|fp16|bf16 (or amp=off|fp16|bf16), "
            "contiguous|channels_last, eager|compile|compile=MODE|cuda_graphs, several joined with commas, e.g. 'cudnn=off' or "
            "'fp32,contiguous'",
        ),
        (
            "off",
            "the reference 'off' names no mode of this run; it has: fp32 contiguous, "
            "fp32 channels_last, bf16 contiguous, bf16 channels_last",
        ),
        (
            "fp16",
            "the reference 'fp16' names no mode of this run; it has: fp32 contiguous, "
            "fp32 channels_last, bf16 contiguous, bf16 channels_last",
        ),
    ],
)
def test_a_bad_reference_names_the_value_and_the_modes(reference: str, message: str) -> None:
    with pytest.raises(modes.BadReference) as exc_info:
        modes.build(mode_results(), reference=reference)
    assert str(exc_info.value) == message


def test_cudnn_modes_default_to_off_as_the_reference() -> None:
    runs = [
        result("resnet18", step, Verdict.OK, cudnn_mode=mode)
        for mode, step in (("on", 0.05), ("off", 0.1), ("benchmark", 0.04))
    ]
    mode_table = modes.build(runs)
    assert mode_table is not None
    assert [mode_table.label(m) for m in mode_table.modes] == [
        "cudnn=off", "cudnn=on", "cudnn=benchmark",
    ]  # fmt: skip
    speedups = [c.speedup or 0.0 for c in mode_table.rows[0].cells.values()]
    assert sorted(speedups) == pytest.approx([1.0, 2.0, 2.5])


def test_a_run_without_the_default_modes_combination_takes_the_nearest_mode() -> None:
    """cudnn=on with fp32 and cudnn=off with bf16: no mode is both defaults (off, fp32), so the
    reference is the first that has the most of them, never an error (a session's plot)."""
    runs = [
        result("resnet18", 0.1, Verdict.OK, cudnn_mode="on"),
        result("resnet18", 0.05, Verdict.OK, cudnn_mode="off", amp="bf16"),
    ]
    mode_table = modes.build(runs)
    assert mode_table is not None
    assert mode_table.label(mode_table.reference) == "cudnn=off bf16"
    speedups = [c.speedup or 0.0 for c in mode_table.rows[0].cells.values()]
    assert sorted(speedups) == pytest.approx([0.5, 1.0])


def test_a_run_in_one_mode_has_no_mode_table() -> None:
    assert modes.build(GATED) is None


# ---- epoch projection ----


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (4.25, "4.2 s"),
        (45, "45 s"),
        (725, "12 min 05 s"),
        (3 * 3600 + 600, "3 h 10 min"),
        (60 * 3600, "2 d 12 h"),
    ],
)
def test_durations_read_like_durations(seconds: float, text: str) -> None:
    assert epoch.duration(seconds) == text


def test_epoch_time_of_imagenet_from_the_throughput() -> None:
    lines = epoch.lines(GATED[:2], epoch.IMAGENET_1K, "ImageNet-1k's training set")
    assert lines[0] == (
        "Time per epoch of 1,281,167 images (ImageNet-1k's training set) at the measured "
        "throughput (data loading not included)"
    )
    assert lines[3].split()[-6:] == ["160", "images/s", "2", "h", "13", "min"]
    assert lines[4].split()[-6:] == ["20.0", "images/s", "17", "h", "47", "min"]


def test_epoch_leaves_out_benchmarks_in_other_units() -> None:
    tokens = dataclasses.replace(GATED[0], config=config("resnet18", unit="tokens"))
    lines = epoch.lines([tokens], 1000, None)
    assert lines[-1] == (
        "not projected (measured in other units than images): test_train[resnet18] "
        "[train_step resnet18 bs=8 64x64 opt=sgd]"
    )


# ---- plots ----


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_is_drawn(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"plot{suffix}"
    plot.draw(plot.picture(GATED, {}), path)
    head = path.read_bytes()[:200]
    assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in head or b"<?xml" in head


def test_plot_with_modes_has_the_speedup_chart(tmp_path: Path) -> None:
    results = [
        result("resnet18", step, Verdict.OK, amp=amp) for amp, step in ((None, 0.1), ("bf16", 0.06))
    ]
    picture = plot.picture(results, {})
    assert picture.modes is not None
    plot.draw(picture, tmp_path / "modes.svg")
    assert "speedup against fp32" in (tmp_path / "modes.svg").read_text()


def test_plot_uses_the_baselines_samples_when_at_hand() -> None:
    baseline = result("resnet18", 0.1, Verdict.SAVED).as_baseline()
    picture = plot.picture(GATED[:1], {(GATED[0].test_id, GATED[0].key): baseline})
    assert picture.benches[0].baseline_rates == baseline.measured.rates
    assert plot.picture(GATED[:1], {}).benches[0].baseline_rate == pytest.approx(160)


def test_the_session_plot_takes_the_baselines_its_store_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = BaselineStore(Path("baselines"))
    baseline = result("resnet18", 0.06, Verdict.SAVED).as_baseline()
    store.save(ENV.machine, "tests/test_perf", {GATED[0].test: {baseline.key: baseline}})
    path = store.path(ENV.machine, "tests/test_perf")
    path.write_text("not read again")
    found = outputs.held_baselines(store, GATED)
    assert list(found) == [(GATED[0].test_id, GATED[0].key)]
    assert found[(GATED[0].test_id, GATED[0].key)].measured.rates == baseline.measured.rates
    assert outputs.held_baselines(BaselineStore(Path("baselines")), GATED) == {}  # unreadable


def test_plot_file_must_be_png_or_svg(tmp_path: Path) -> None:
    with pytest.raises(plot.PlotError) as exc_info:
        plot.draw(plot.picture(GATED, {}), tmp_path / "plot.jpg")
    assert str(exc_info.value) == (
        "a plot is drawn as PNG or SVG: the file name must end in .png or .svg, not .jpg "
        "(e.g. cnnperf.png)"
    )


def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(plot.PlotError) as exc_info:
        plot.draw(plot.picture(GATED, {}), tmp_path / "plot.png")
    assert str(exc_info.value) == (
        "drawing a plot needs matplotlib, which is not installed; install it with "
        "pip install 'pytest-cnnperf[plot]'"
    )


def test_reports_do_not_import_matplotlib_or_pytest_benchmark_until_used() -> None:
    import subprocess

    code = (
        "import sys, pytest_cnnperf.plugin, pytest_cnnperf.reports.plot, "
        "pytest_cnnperf.reports.benchmark_json, pytest_cnnperf.cli; "
        "print(sorted(m for m in ('matplotlib', 'pytest_benchmark') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_creep_alone_is_worded_in_markdown_after_the_results_file() -> None:
    """The creep gate's reason is kept in a results file; the PR comment and the xdist
    controller read it back from there and must still say why the benchmark failed."""
    creep = Creep(
        comparisons=(throughput(0.05, 0.06, Verdict.REGRESSED),),
        runs=10,
        best_commit="0123456789abcdef",
        best_recorded="2026-11-30T10:00:00Z",
    )
    base = result("resnet18", 0.06, Verdict.OK, base_step=0.06)
    crept = redecided(base, verdict=Verdict.REGRESSED, failed=True, reasons=(creep,))
    data = json.loads(json.dumps(results_file.result_data(crept)))
    read_back = results_file.read_result(data, "result")
    assert read_back == crept
    for shown in (crept, read_back):
        line = next(line for line in markdown.render([shown]).splitlines() if "resnet18" in line)
        assert "creep: worse than the best of its last 10 runs" in line, line
        assert "commit 0123456" in line


def test_a_creep_beside_a_missing_baseline_and_recompiles_gives_every_fix() -> None:
    from pytest_cnnperf.model import NoBaseline, Recompiled
    from pytest_cnnperf.reports import explain

    creep = Creep((throughput(0.05, 0.06, Verdict.REGRESSED),), 10, None, "2026-11-30T10:00:00Z")
    base = result("resnet18", 0.06, Verdict.NEW)
    crept = redecided(
        base,
        verdict=Verdict.REGRESSED,
        failed=True,
        baseline_file="baselines/cpu-test-2t/tests/test_perf.json",
        reasons=(NoBaseline("cpu-test-2t", ()), Recompiled(2, ("size changed",)), creep),
    )
    message = explain.failure(crept)
    assert "baseline    " not in message  # the file has no entry for it
    assert "no baseline in baselines/cpu-test-2t/tests/test_perf.json" in message
    assert "To accept it, run: pytest --cnnperf --cnnperf-creep-accept" in message
    assert "No baseline is recorded while it recompiles" in message
