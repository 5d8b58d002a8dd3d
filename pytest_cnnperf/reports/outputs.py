"""The report files a session writes at its end, each on its own: one that fails is reported
and does not stop the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import settings
from ..model import Result
from ..store import results_file
from ..store.baseline import BaselineFileError, BaselineStore
from ..store.locations import display_path
from . import benchmark_json, markdown, plot

if TYPE_CHECKING:
    from ..session import Session


def held_baselines(
    store: BaselineStore, results: Sequence[Result]
) -> dict[tuple[str, str], Result]:
    """The baseline entry each result was gated against, by ``(test_id, key)``, from the
    session's store, which keeps the files it read while gating (files it cannot read are
    passed over)."""
    paths = {display_path(path): path for path in store.files()}
    found: dict[tuple[str, str], Result] = {}
    for result in results:
        decision = result.decision
        path = paths.get(decision.baseline_file or "") if decision else None
        if result.measurement is None or path is None:
            continue
        try:
            document = store.load(path)
        except BaselineFileError:
            continue
        entry = document.entries.get(result.test, {}).get(result.key) if document else None
        if entry is not None:
            found[(result.test_id, result.key)] = entry
    return found


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
    values, results = session.settings, session.results
    written: list[str] = []
    errors: list[str] = []

    def draw_plot(path: Path) -> None:
        plot.check_path(path)
        plot.draw(plot.picture(results, held_baselines(session.store, results)), path)

    reports: list[tuple[str, Path | None, Callable[[Path], None]]] = [
        (
            "results",
            values[settings.JSON_REPORT],
            lambda path: results_file.write(path, results, session.machine),
        ),
        (
            "Markdown summary",
            values[settings.MARKDOWN_REPORT],
            lambda path: markdown.write(path, results),
        ),
        (
            "Markdown summary",
            markdown.step_summary() if results else None,
            lambda path: markdown.append(path, results),
        ),
        ("plot", values[settings.PLOT_REPORT], draw_plot),
        (
            "pytest-benchmark JSON",
            values[settings.BENCHMARK_JSON_REPORT],
            lambda path: benchmark_json.write(path, results, info or benchmark_json.default_info),
        ),
    ]
    for what, path, write in reports:
        if not path:
            continue
        try:
            write(path)
        except OSError as exc:
            errors.append(
                f"could not write the {what} to {display_path(path)}: {exc.strerror or exc}"
            )
        except (plot.PlotError, benchmark_json.MissingBenchmark) as exc:
            errors.append(f"could not write the {what} to {display_path(path)}: {exc}")
        else:
            written.append(f"wrote the {what} to {display_path(path)}")
    session.reported(written, errors)
