"""``cnnperf`` itself: parse, run the command, print its lines, exit with its status.

The commands that read files (``compare``, ``show``, ``modes``, ``epoch``, ``plot``) and check
(``doctor``, ``models``) are here; the history's are in ``pytest_cnnperf.history.commands``;
``bisect`` and ``noise``, which run pytest themselves, in ``runs``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..history import commands as history
from ..model import Result, Verdict, units
from ..reports.text import some
from ..store.baseline import BaselineFileError
from ..store.results_file import FileProblem, Loaded, load, merged
from . import runs
from .parser import parser, with_bare_flags

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2
#: ``doctor`` found a warning
EXIT_UNFIT = 1


class Problem(Exception):
    """Something the command cannot do with what it was given; exit status 2."""


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if given[:1] in (["bisect"], ["noise"]) and "--" in given:
        cut = given.index("--")
        given, pytest_args = given[:cut], given[cut + 1 :]
    args = parser().parse_args(with_bare_flags(given))
    stream = out or sys.stdout

    try:
        if args.command == "bisect":
            return runs.bisect(
                args.revisions,
                args.history,
                args.branch,
                args.benchmark,
                pytest_args,
                stream,
                json_path=args.json,
                markdown_path=args.markdown,
            )
        if args.command == "noise":
            return runs.noise(
                pytest_args,
                args.runs,
                args.baselines,
                args.record,
                stream,
                instance=args.instance,
                replace=args.replace,
                refit=args.refit,
            )
        lines, status = _run(args)
    except (Problem, history.CommandProblem, runs.RunProblem) as exc:
        print(f"cnnperf {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stream.write("\n".join(lines) + "\n")
    return status


def _run(args: argparse.Namespace) -> tuple[list[str], int]:
    command: str = args.command
    if command == "compare":
        return _compare(args.old, args.new, args.threshold, args.fail_on_regression, args.baselines)
    if command == "show":
        return _show(args.files, args.markdown), EXIT_OK
    if command == "modes":
        return _modes(args.file, args.reference), EXIT_OK
    if command == "epoch":
        return _epoch(args.file, args.images), EXIT_OK
    if command == "plot":
        return _plot(args.file, args.output, args.against, args.reference), EXIT_OK
    if command == "doctor":
        return _doctor()
    if command == "history":
        return history.history(
            args.history, args.pattern, args.machine, args.window, args.rows
        ), EXIT_OK
    if command == "dashboard":
        return history.dashboard(
            args.out_dir, args.history, args.pattern, args.machine, args.window
        ), EXIT_OK
    if command == "comment":
        return history.comment(args.files, args.history, args.window, args.output), EXIT_OK
    return _models(), EXIT_OK


def _load(path: Path, need_measured: bool = True) -> Loaded:
    try:
        loaded = load(path)
    except FileProblem as exc:
        raise Problem(str(exc)) from None
    if need_measured and not loaded.measured:
        raise Problem(f"{path}: it holds no measured benchmark")
    return loaded


def _compare(
    old_path: Path,
    new_path: Path,
    threshold: float | None,
    fail: bool | float,
    baselines: Path,
) -> tuple[list[str], int]:
    from ..reports import compare

    if isinstance(fail, float):
        if threshold is not None and fail != threshold:
            raise Problem(
                f"--threshold={units.percent(threshold)} and "
                f"--fail-on-regression={units.percent(fail)} disagree; give the threshold once"
            )
        threshold = fail
    old, new = _load(old_path), _load(new_path)
    settings = compare.settings_for(new.measured, threshold)
    try:
        profile = compare.profile_for(new.measured, baselines)
    except BaselineFileError as exc:
        raise Problem(str(exc)) from None
    pairs, matching = compare.compare(old.measured, new.measured, settings, profile)
    if not pairs:
        raise Problem(
            f"{old_path} and {new_path} share no benchmark (matched by test and configuration): "
            f"OLD has {_examples(old.measured)}, NEW has {_examples(new.measured)}; compare runs "
            "of the same tests"
        )
    lines = compare.lines(old, new, pairs, matching, settings, profile)
    regressed = any(p.verdict is Verdict.REGRESSED for p in pairs)
    return lines, EXIT_REGRESSED if fail is not False and regressed else EXIT_OK


def _examples(results: Sequence[Result]) -> str:
    return some([f"{r.test} [{r.key}]" for r in results], 2)


def _show(paths: Sequence[Path], as_markdown: bool = False) -> list[str]:
    from ..reports import baseline_view, markdown, terminal

    if len(paths) > 1:
        try:
            results = merged(load(path) for path in paths)
        except FileProblem as exc:
            raise Problem(str(exc)) from None
        if as_markdown:
            return markdown.render(results).splitlines()
        head = f"results of {len(paths)} files: {', '.join(str(p) for p in paths)}"
        return [head, "", *terminal.lines(results, verbose=True)]
    (path,) = paths
    loaded = _load(path, need_measured=False)
    if loaded.kind == "results":
        if not loaded.results:
            raise Problem(f"{path}: it holds no benchmark results")
        if as_markdown:
            return markdown.render(loaded.results).splitlines()
        head = f"{path}: results of {loaded.machine or 'an unknown machine'}, {loaded.created}"
        return [head, "", *terminal.lines(loaded.results, verbose=True)]
    if not loaded.measured:
        raise Problem(f"{path}: it holds no baseline entries")
    if as_markdown:
        raise Problem(
            f"{path}: it is a baseline file; --markdown shows a results file (--cnnperf-json)"
        )
    return [f"{path}: baselines of {loaded.machine}", "", *baseline_view.lines(loaded.measured)]


def _modes(path: Path, reference: str | None) -> list[str]:
    from ..reports import modes

    loaded = _load(path)
    try:
        table = modes.build(loaded.measured, reference)
    except modes.BadReference as exc:
        raise Problem(f"{path}: {exc}") from None
    if table is None:
        raise Problem(
            f"{path}: every benchmark in it ran in the same mode; a mode table needs a run "
            "over several cuDNN modes (--cudnn=off,on), AMP dtypes (--cnnperf-zoo-amp=off,bf16), "
            "memory formats (--cnnperf-zoo-memory-format=contiguous,channels_last) or compile "
            "modes (--cnnperf-zoo-compile=off,default)"
        )
    return modes.lines(table)


def _epoch(path: Path, images: int) -> list[str]:
    from ..reports import epoch

    dataset = "ImageNet-1k's training set" if images == epoch.IMAGENET_1K else None
    return epoch.lines(_load(path).measured, images, dataset)


def _plot_baselines(loaded: Loaded, against: Path | None) -> dict[tuple[str, str], Result]:
    """The baseline of each benchmark: from ``against``, else from the baseline files the run
    was gated against (their paths as recorded, from here or the results file's folder)."""
    from ..reports.compare import baselines_of, match

    if against is None:
        return baselines_of(loaded.results, (Path(), loaded.path.parent))
    pairs = match(_load(against).measured, loaded.measured).pairs
    return {(new.test_id, new.key): old for old, new in pairs}


def _plot(path: Path, output: Path, against: Path | None, reference: str | None) -> list[str]:
    from ..reports import modes, plot

    try:
        plot.check_path(output)
    except plot.PlotError as exc:
        raise Problem(f"{output}: {exc}") from None
    loaded = _load(path)
    if loaded.kind != "results":
        raise Problem(
            f"{path}: it is a baseline file; plot draws a results file (--cnnperf-json), "
            "and draws a baseline file given with --against as its baseline"
        )
    baselines = _plot_baselines(loaded, against)
    try:
        picture = plot.picture(
            loaded.results, baselines, title=f"cnnperf: {path.name}", reference=reference
        )
        plot.draw(picture, output)
    except plot.PlotError as exc:
        raise Problem(f"{output}: {exc}") from None
    except modes.BadReference as exc:
        raise Problem(f"{path}: {exc}") from None
    return [f"wrote {output}"]


def _doctor() -> tuple[list[str], int]:
    from .. import doctor

    sections = doctor.examine()
    return doctor.render(sections), EXIT_UNFIT if doctor.warnings(sections) else EXIT_OK


def _models() -> list[str]:
    from ..models import ModelRegistry
    from ..reports import text

    registry = ModelRegistry()
    rows = []
    for name in registry.names():
        height, width = registry.spec(name).image_size
        rows.append([name, f"{height}x{width}"])
    return [
        *text.columns(["model", "input"], rows),
        "",
        f"{len(rows)} models from torchvision, built with random weights (nothing is "
        "downloaded); a project adds its own with the pytest_cnnperf_register_models hook",
    ]
