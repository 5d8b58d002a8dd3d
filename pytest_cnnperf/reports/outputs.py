"""The report files a session writes at its end, each on its own: one that fails is reported
and does not stop the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..config import ReportPaths
from ..explain import display_path
from ..results import BenchmarkResult
from . import benchmark_json, json_report, markdown, plot
from .records import baselines_of


def draw_plot(path: Path, results: Sequence[BenchmarkResult]) -> None:
    """The session's plot, with each benchmark's baseline samples where its file is readable."""
    plot.check_path(path)
    plot.draw(plot.picture(results, baselines_of(results)), path)


def write_all(
    paths: ReportPaths,
    results: Sequence[BenchmarkResult],
    machine: str | None,
    benchmark_info: benchmark_json.Info | None = None,
) -> tuple[list[str], list[str]]:
    """Write every report asked for; returns the lines saying what was written and the errors."""
    written: list[str] = []
    errors: list[str] = []

    def attempt(what: str, path: Path, write: Callable[[], None]) -> None:
        try:
            write()
        except OSError as exc:
            errors.append(
                f"could not write the {what} to {display_path(path)}: {exc.strerror or exc}"
            )
        except (plot.PlotError, benchmark_json.MissingBenchmark) as exc:
            errors.append(f"could not write the {what} to {display_path(path)}: {exc}")
        else:
            written.append(f"wrote the {what} to {display_path(path)}")

    if paths.json:
        json_path = paths.json
        attempt("results", json_path, lambda: json_report.write(json_path, results, machine))
    if paths.markdown:
        md_path = paths.markdown
        attempt("Markdown summary", md_path, lambda: markdown.write(md_path, results))
    summary = markdown.step_summary()
    if summary and results:
        attempt("Markdown summary", summary, lambda: markdown.append(summary, results))
    if paths.plot:
        plot_path = paths.plot
        attempt("plot", plot_path, lambda: draw_plot(plot_path, results))
    if paths.benchmark_json:
        bj_path = paths.benchmark_json
        info = benchmark_info or benchmark_json.default_info
        attempt(
            "pytest-benchmark JSON", bj_path, lambda: benchmark_json.write(bj_path, results, info)
        )
    return written, errors
