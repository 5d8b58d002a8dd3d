"""The ``cnnperf`` command's parser: every subcommand, its arguments, their checks and help
(the manual's reference is generated from it).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

from .. import parsers, settings
from ..reports.epoch import IMAGENET_1K
from ..reports.modes import REFERENCE_FORMS

_fraction = parsers.argtype(settings.THRESHOLD.parse)

FAIL_ON = "--fail-on-regression"


def _fail_on(text: str) -> bool | float:
    return True if text == "" else _fraction(text)


#: a word that is meant as a threshold (good or bad), not a file name
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)%?")


def with_bare_flags(argv: Sequence[str]) -> list[str]:
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
        usage="cnnperf noise [-h] [--runs N] [--baselines DIR] [--instance NAME] [--replace] "
        "[--record FILE] -- PYTEST_ARGS\n       cnnperf noise --refit [--baselines DIR]",
        help="Record how much this kind of machine's runs differ: its noise profile",
        description="Run the benchmarks the pytest arguments select again and again (pytest "
        "--cnnperf --cnnperf-save into a folder of its own: your baselines are not touched), "
        "and write this kind of machine's noise profile beside its baselines, per benchmark, "
        "which verdicts against stored baselines allow for. The runs are added to the profile "
        "already there, each with the instance it ran on: record it on several machines of "
        "the kind (a CI job lands on a fresh one each time), in their usual state, at several "
        "times.",
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
        "--instance",
        metavar="NAME",
        help="The machine instance the runs are recorded on, as the profile keeps it. Default: "
        "the host's name and boot id",
    )
    noise.add_argument(
        "--replace",
        action="store_true",
        help="Start a new profile instead of adding to the one beside the baselines",
    )
    noise.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        help="Also keep every run's samples in FILE, added to those it holds",
    )
    noise.add_argument(
        "--refit",
        action="store_true",
        help="Measure nothing: fit every profile under the baselines folder again from the runs "
        "it holds (after an upgrade of pytest-cnnperf)",
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
