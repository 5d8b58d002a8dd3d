"""The report files a session writes at its end, each on its own: one that fails is reported
and does not stop the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import settings
from ..model import Result
from ..store import results_file
from ..store.locations import display_path
from . import benchmark_json, markdown, plot
from .compare import baselines_of

if TYPE_CHECKING:
    from ..session import Session


@dataclass(frozen=True)
class ReportPaths:
    json: Path | None = None
    markdown: Path | None = None
    plot: Path | None = None
    benchmark_json: Path | None = None

    @classmethod
    def of(cls, values: settings.Settings) -> ReportPaths:
        return cls(
            json=values[settings.JSON_REPORT],
            markdown=values[settings.MARKDOWN_REPORT],
            plot=values[settings.PLOT_REPORT],
            benchmark_json=values[settings.BENCHMARK_JSON_REPORT],
        )


def draw_plot(path: Path, results: Sequence[Result]) -> None:
    """The session's plot, with each benchmark's baseline samples where its file is readable."""
    plot.check_path(path)
    plot.draw(plot.picture(results, baselines_of(results)), path)


def write_all(
    paths: ReportPaths,
    results: Sequence[Result],
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
        attempt("results", json_path, lambda: results_file.write(json_path, results, machine))
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


def benchmark_info(config: Any) -> benchmark_json.Info | None:
    """pytest-benchmark's machine and commit information through its hooks (so a project's
    overrides apply), when its plugin is active (``config``: pytest's)."""
    if not config.pluginmanager.hasplugin("benchmark"):
        return None

    def info() -> tuple[Any, Any]:
        hook = config.hook
        return (
            hook.pytest_benchmark_generate_machine_info(config=config),
            hook.pytest_benchmark_generate_commit_info(config=config),
        )

    return info


def write_session_reports(session: Session, info: benchmark_json.Info | None = None) -> None:
    """Write the reports the options ask for, and the Markdown summary to
    ``$GITHUB_STEP_SUMMARY`` when that is set. A report that cannot be written becomes an error
    line of the terminal summary (never a traceback) and does not stop the others."""
    written, errors = write_all(
        ReportPaths.of(session.settings), session.results, session.machine, info
    )
    session.reported(written, errors)
