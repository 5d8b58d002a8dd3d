"""The ``cnnperf`` command: results and baselines outside pytest.

``compare`` two runs, ``show`` one file, tabulate ``modes``, project ``epoch`` times, ``plot`` a
results file, list the ``models`` that ``model_factory`` builds, check with ``doctor``
whether this machine is fit to benchmark on, and read the run ``history`` (``dashboard``,
``comment``; see ``pytest_cnnperf.history.commands``); ``bisect`` and ``noise`` run pytest
themselves (``pytest_cnnperf.revision.commands``). Exit status: 0; 1 when ``compare
--fail-on-regression`` found a regression or ``doctor`` a warning; 2 for a usage error or a file
that cannot be used, with a one-line message naming the file and the problem.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from . import parsers, settings
from .model import Result, Verdict, units
from .store.baseline import BaselineFileError
from .store.results_file import FileProblem, Loaded, load, merged

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2
#: ``doctor`` found a warning
EXIT_UNFIT = 1


class Problem(Exception):
    """Something the command cannot do with what it was given; exit status 2."""


_fraction = parsers.argtype(settings.THRESHOLD.parse)

FAIL_ON = "--fail-on-regression"


def _fail_on(text: str) -> bool | float:
    return True if text == "" else _fraction(text)


#: a word that is meant as a threshold (good or bad), not a file name
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)%?")


def _with_bare_flags(argv: Sequence[str]) -> list[str]:
    """``--fail-on-regression`` takes its threshold after ``=`` or as the next word when that is
    a number; otherwise it stands alone (so ``--fail-on-regression OLD NEW`` works)."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == FAIL_ON:
            following = argv[i + 1] if i + 1 < len(argv) else ""
            if not _NUMBER.fullmatch(following):
                arg += "="
        out.append(arg)
    return out


def _images(text: str) -> int:
    cleaned = text.strip().replace("_", "").replace(",", "")
    if cleaned.isdigit() and int(cleaned) > 0:
        return int(cleaned)
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a number of images; use a positive whole number such as 1281167 "
        "(ImageNet-1k's training set, the default) or 50000"
    )


def parser() -> argparse.ArgumentParser:
    from .reports.epoch import IMAGENET_1K
    from .reports.modes import REFERENCE_FORMS

    main = argparse.ArgumentParser(
        prog="cnnperf",
        description="Read pytest-cnnperf results (--cnnperf-json) and baseline files.",
    )
    commands = main.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compare = commands.add_parser(
        "compare",
        usage=(
            "cnnperf compare [-h] [--threshold PCT] [--fail-on-regression[=PCT]] "
            "[--baselines DIR] OLD NEW"
        ),
        help="Compare two runs benchmark by benchmark",
        description="Match the benchmarks of two results or baseline files by test and "
        "configuration, and show both throughputs, the speedup, both peak memories and the "
        "change, with the two environments side by side.",
    )
    compare.add_argument("old", metavar="OLD", type=Path, help="Results or baseline file")
    compare.add_argument("new", metavar="NEW", type=Path, help="Results or baseline file")
    compare.add_argument(
        "--threshold",
        metavar="PCT",
        type=_fraction,
        help=(
            "Throughput loss that counts as a regression, e.g. 10%. Default: "
            f"{settings.THRESHOLD.default_text()} (by the device of NEW)"
        ).replace("%", "%%"),
    )
    compare.add_argument(
        "--fail-on-regression",
        metavar="PCT",
        default=False,
        type=_fail_on,
        help="Exit with status 1 when a benchmark regressed (slower beyond the threshold, "
        "significantly, or more peak memory); --fail-on-regression=PCT also sets the threshold",
    )
    compare.add_argument(
        "--baselines",
        metavar="DIR",
        type=Path,
        default=Path("baselines"),
        help="The baselines folder whose noise profile of NEW's kind of machine (recorded by "
        "cnnperf noise) the verdicts allow for; the device's default where it has none. "
        "Default: baselines",
    )

    show = commands.add_parser(
        "show",
        help="Show a results or baseline file, or several results files as one",
        description="Show the benchmarks of a results file (--cnnperf-json) or a baseline file; "
        "the results files of several shards of one run (a CI matrix) as one table.",
    )
    show.add_argument(
        "files",
        metavar="FILE",
        type=Path,
        nargs="+",
        help="Results or baseline file; several results files are shown as one run",
    )
    show.add_argument(
        "--markdown",
        action="store_true",
        help="Print results as the Markdown summary (--cnnperf-markdown), e.g. for a "
        "pull-request comment from stored artifacts",
    )

    mode_table = commands.add_parser(
        "modes",
        help="Step time per cuDNN mode, precision, memory format or compile mode, and speedups",
        description="For a run over several cuDNN modes, AMP dtypes, memory formats or compile "
        "modes: each benchmark's step time per mode and its speedup against a reference mode.",
    )
    mode_table.add_argument("file", metavar="FILE", type=Path, help="Results or baseline file")
    mode_table.add_argument(
        "--reference",
        metavar="MODE",
        help=f"The mode speedups are measured against: {REFERENCE_FORMS}. Default: cuDNN off, "
        "fp32 and contiguous where the run has them",
    )

    epoch = commands.add_parser(
        "epoch",
        help="Time per epoch at the measured throughput",
        description="Project the time of one epoch from each benchmark's measured throughput.",
    )
    epoch.add_argument("file", metavar="FILE", type=Path, help="Results or baseline file")
    epoch.add_argument(
        "--images",
        metavar="N",
        type=_images,
        default=IMAGENET_1K,
        help=f"Images per epoch. Default: {IMAGENET_1K} (ImageNet-1k's training set)",
    )

    plot = commands.add_parser(
        "plot",
        help="Draw a results file as a PNG or SVG (needs matplotlib)",
        description="Draw throughput and peak memory of a results file against its baselines, "
        "and the speedup of each mode where the run covers several.",
    )
    plot.add_argument("file", metavar="FILE", type=Path, help="Results file (--cnnperf-json)")
    plot.add_argument(
        "-o", "--output", metavar="PATH", type=Path, required=True, help="A .png or .svg file"
    )
    plot.add_argument(
        "--against",
        metavar="OLD",
        type=Path,
        help="Results or baseline file to draw as the baseline. Default: the baseline files "
        "the run was gated against, where they can be read",
    )
    plot.add_argument("--reference", metavar="MODE", help="Reference mode of the speedup chart")

    _history_parsers(commands)
    _bisect_parser(commands)
    _noise_parser(commands)

    commands.add_parser(
        "doctor",
        help="Say whether this machine is fit to benchmark on, and how to fix what is not",
        description="Check this machine for what makes benchmark figures untrustworthy (a busy "
        "CPU, a CPU quota, a frequency governor, steal time; a GPU's clocks, clock events, "
        "power limit, other processes, ECC and PCIe link) and say why each matters and the "
        "command that fixes it. Read-only: it changes nothing. Exit status 1 when a warning "
        "was found.",
    )
    commands.add_parser(
        "models",
        help="List the models model_factory builds, with their default input sizes",
        description="torchvision's classification models by name, with the image size "
        "train_step uses when none is given. Models a project registers in its conftest.py are "
        "not listed.",
    )
    return main


def _count(text: str) -> int:
    if text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs; use e.g. 20 (or 0)")


def _window(text: str) -> int:
    if text.isdigit() and int(text) >= 2:
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs; use 2 or more, e.g. 20")


def _history_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``history``, ``dashboard`` and ``comment``: the run history (--cnnperf-history)."""
    target_help = (
        "A SQLite file or a postgresql:// URL. Default: cnnperf_history of the pytest "
        "configuration found from the current folder up"
    )
    window_help = "Recent runs the creep view compares with their best. Default: 20"

    history = commands.add_parser(
        "history",
        help="Each benchmark's runs in the history, with change points and creep",
        description="Per benchmark and machine: the series of runs over commits, its change "
        "points (the commit range, the step's size and its p-value), how far the latest runs are "
        "from the best of the recent ones, and the runs themselves.",
    )
    history.add_argument(
        "pattern",
        metavar="PATTERN",
        nargs="?",
        help="Only benchmarks whose test id or "
        "configuration contains it or matches it as a glob (e.g. resnet or '*amp=bf16*'). "
        "A history file or a postgresql:// URL here is taken as --history",
    )
    history.add_argument("--history", metavar="TARGET", help=target_help)
    history.add_argument("--machine", metavar="NAME", help="Only runs on this kind of machine")
    history.add_argument("--window", metavar="N", type=_window, default=20, help=window_help)
    history.add_argument(
        "--rows",
        metavar="N",
        type=_count,
        default=20,
        help="Latest runs listed per benchmark (0: all). Default: 20",
    )

    dashboard = commands.add_parser(
        "dashboard",
        help="Write the history as a static site (needs matplotlib)",
        description="Write OUT_DIR/index.html, a summary of every benchmark linking to a page "
        "with its throughput and peak memory over the runs, change points and environment "
        "changes marked. Static files: open index.html, no server, works offline.",
    )
    # OUT_DIR and RESULTS stay text: a postgresql:// URL given there is recognised to say so
    dashboard.add_argument("out_dir", metavar="OUT_DIR", help="Folder to write")
    dashboard.add_argument(
        "pattern",
        metavar="PATTERN",
        nargs="?",
        help="Only these benchmarks. A history file or a postgresql:// URL here is taken as "
        "--history",
    )
    dashboard.add_argument("--history", metavar="TARGET", help=target_help)
    dashboard.add_argument("--machine", metavar="NAME", help="Only runs on this kind of machine")
    dashboard.add_argument("--window", metavar="N", type=_window, default=20, help=window_help)

    comment = commands.add_parser(
        "comment",
        help="The Markdown of a pull-request comment for a run",
        description="This run against its baselines (from its results file) and, where a "
        "history is configured, each benchmark's trend in it, as Markdown that starts with a "
        "hidden marker (<!-- cnnperf-comment -->) so a CI step can update its comment.",
    )
    comment.add_argument(
        "files",
        metavar="RESULTS",
        nargs="+",
        help="Results file (--cnnperf-json) of the run; several (the shards of a CI matrix) make "
        "one comment",
    )
    comment.add_argument("--history", metavar="TARGET", help=target_help)
    comment.add_argument("--window", metavar="N", type=_window, default=20, help=window_help)
    comment.add_argument(
        "-o", "--output", metavar="PATH", type=Path, help="Write it to a file. Default: print it"
    )


def _noise_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    noise = commands.add_parser(
        "noise",
        usage="cnnperf noise [-h] [--runs N] [--baselines DIR] [--record FILE] -- PYTEST_ARGS",
        help="Record how much this kind of machine's runs differ: its noise profile",
        description="Run the benchmarks the pytest arguments select again and again (pytest "
        "--cnnperf --cnnperf-save into a folder of its own: your baselines are not touched), "
        "and write this kind of machine's noise profile beside its baselines, which verdicts "
        "against stored baselines allow for. Record it on a machine in its usual state, at "
        "several times (--record keeps the runs and adds to them).",
    )
    noise.add_argument(
        "--runs", metavar="N", type=_count, default=10, help="Runs to record. Default: 10"
    )
    noise.add_argument(
        "--baselines",
        metavar="DIR",
        type=Path,
        default=Path("baselines"),
        help="The baselines folder the profile is written to. Default: baselines",
    )
    noise.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        help="Keep every run's samples in FILE, and fit the profile from those it already holds "
        "too",
    )


def _bisect_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bisect = commands.add_parser(
        "bisect",
        usage="cnnperf bisect [-h] [--benchmark KEY] [--json PATH] [--markdown PATH] GOOD BAD "
        "-- PYTEST_ARGS\n       cnnperf bisect --history TARGET [--branch NAME] TEST_ID -- "
        "PYTEST_ARGS",
        help="Find the commit that made a benchmark slower or hungrier",
        description="The first commit between GOOD and BAD at which the benchmark the pytest "
        "arguments select got slower (or hungrier for memory) than at GOOD. Each commit git's "
        "bisection picks is measured against GOOD in the same run (pytest --cnnperf "
        "--cnnperf-against=GOOD) in a worktree of its own; your checkout is left as it is. "
        "Exit status: 0 a first bad commit found; 1 no regression from GOOD to BAD (nothing "
        "bisected); 2 a usage error, or GOOD or BAD could not be measured; 3 skipped commits "
        "leave a range; 4 BAD against GOOD was inconclusive; 130 interrupted.",
    )
    bisect.add_argument(
        "revisions",
        metavar="GOOD BAD",
        nargs="*",
        help="A commit where the benchmark was fast and a later one where it is slow (with "
        "--history: the benchmark's test id instead)",
    )
    bisect.add_argument(
        "--benchmark",
        metavar="KEY",
        help="The benchmark to bisect, by its configuration key or test id. Default: the only "
        "one that regressed from GOOD to BAD",
    )
    bisect.add_argument("--json", metavar="PATH", type=Path, help="Write the report as JSON")
    bisect.add_argument(
        "--markdown", metavar="PATH", type=Path, help="Write the report as Markdown"
    )
    bisect.add_argument(
        "--history",
        metavar="TARGET",
        help="Take GOOD and BAD from the latest change point the history found for TEST_ID",
    )
    bisect.add_argument(
        "--branch",
        metavar="NAME",
        help="With --history: the branch whose runs count. Default: the latest run's",
    )


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if given[:1] in (["bisect"], ["noise"]) and "--" in given:
        cut = given.index("--")
        given, pytest_args = given[:cut], given[cut + 1 :]
    args = parser().parse_args(_with_bare_flags(given))
    stream = out or sys.stdout
    from .history.commands import CommandProblem
    from .revision import commands

    try:
        if args.command == "bisect":
            return commands.bisect(
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
            return commands.noise(pytest_args, args.runs, args.baselines, args.record, stream)
        lines, status = _run(args)
    except (Problem, CommandProblem, commands.RunProblem) as exc:
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
    if command in ("history", "dashboard", "comment"):
        from .history import commands

        if command == "history":
            lines = commands.history(
                args.history, args.pattern, args.machine, args.window, args.rows
            )
        elif command == "dashboard":
            lines = commands.dashboard(
                args.out_dir, args.history, args.pattern, args.machine, args.window
            )
        else:
            lines = commands.comment(args.files, args.history, args.window, args.output)
        return lines, EXIT_OK
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
    from .reports import compare

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
    named = [f"{r.test} [{r.key}]" for r in results]
    more = f" and {len(named) - 2} more" if len(named) > 2 else ""
    return ", ".join(named[:2]) + more


def _show(paths: Sequence[Path], as_markdown: bool = False) -> list[str]:
    from .reports import baseline_view, markdown, terminal

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
    from .reports import modes

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
    from .reports import epoch

    dataset = "ImageNet-1k's training set" if images == epoch.IMAGENET_1K else None
    return epoch.lines(_load(path).measured, images, dataset)


def _plot_baselines(loaded: Loaded, against: Path | None) -> dict[tuple[str, str], Result]:
    """The baseline of each benchmark: from ``against``, else from the baseline files the run
    was gated against (their paths as recorded, from here or the results file's folder)."""
    from .reports.compare import baselines_of, match

    if against is None:
        return baselines_of(loaded.results, (Path(), loaded.path.parent))
    pairs = match(_load(against).measured, loaded.measured).pairs
    return {(new.test_id, new.key): old for old, new in pairs}


def _plot(path: Path, output: Path, against: Path | None, reference: str | None) -> list[str]:
    from .reports import modes, plot

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
    from . import doctor

    sections = doctor.examine()
    return doctor.render(sections), EXIT_UNFIT if doctor.warnings(sections) else EXIT_OK


def _models() -> list[str]:
    from .models import ModelRegistry
    from .reports import text

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


if __name__ == "__main__":
    sys.exit(main())
