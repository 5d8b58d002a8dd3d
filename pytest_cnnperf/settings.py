"""Every setting of pytest-cnnperf, declared once.

A :class:`Setting` row says how the setting is spelled on the command line, in the ini file and
in ``@pytest.mark.cnnperf(...)``, how it is parsed (``parsers``), its help and its default on
each kind of device; the options, ini entries, marker checks and resolved settings come from
the rows. The command line overrides the marker, which overrides the ini file, which overrides
the default. A parser's ``ValueError`` becomes a usage error for an option or an ini value, and
an error of the test for a marker argument.

Nothing here imports torch, numpy or the measuring code: ``pytest --help`` reads this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from .count_kinds import GATED_BY_DEFAULT
from .measuring.cudnn import CudnnMode, parse_modes
from .measuring.device import DeviceRequest, parse_device
from .measuring.peak_table import PeakSetting, parse_peak_tflops
from .parsers import (
    Effort,
    argtype,
    parse_allowed,
    parse_attribution,
    parse_bool,
    parse_effort,
    parse_growth_threshold,
    parse_history,
    parse_loss_threshold,
    parse_metric,
    parse_path,
    parse_revision,
    parse_samples,
    parse_seconds,
    parse_structure,
    parse_text,
    percent,
    positive_int,
    show_structure,
)

T = TypeVar("T")


# ---- the table ----

_SAME = object()


class Setting(Generic[T]):
    """One setting of the plugin and every way to give it.

    ``flag``: the command-line option (``True``: ``--cnnperf-<name>``; ``None``: none); a flag
    whose parser is :func:`parse_bool` is a switch without a value. ``ini``: whether
    ``cnnperf_<name>`` is an ini setting; ``marker``: whether ``@pytest.mark.cnnperf(<name>=...)``
    takes it. ``default`` applies on every device unless ``cuda`` gives CUDA its own. ``path``:
    the value is a path, relative to the folder pytest was started in on the command line and
    to the rootdir in the ini file (and by default). ``show`` writes a value as the help's
    "Default:" says it.
    """

    def __init__(
        self,
        name: str,
        parse: Callable[[object], T],
        help: str,
        *,
        flag: str | bool | None = None,
        metavar: str | None = None,
        ini: bool = False,
        marker: bool = False,
        path: bool = False,
        default: T | None = None,
        cuda: Any = _SAME,
        show: Callable[[T], str] | None = None,
    ) -> None:
        self.name = name
        self.parse = parse
        self.help = help
        self.flag = "--cnnperf-" + name.replace("_", "-") if flag is True else flag or None
        self.metavar = metavar
        self.ini = ini
        self.marker = marker
        self.path = path
        self.default = default
        self.cuda = cuda
        self.show = show

    @property
    def switch(self) -> bool:
        """A flag without a value."""
        return self.parse is parse_bool

    @property
    def ini_name(self) -> str:
        """``cnnperf_<name>``: the ini setting's name, and the option's ``dest``."""
        return f"cnnperf_{self.name}"

    def default_for(self, device_type: str) -> T | None:
        if device_type == "cuda" and self.cuda is not _SAME:
            value: T | None = self.cuda
            return value
        return self.default

    def default_text(self) -> str | None:
        """The default as help text says it: ``5% on CUDA, 10% on the CPU``."""
        if self.show is None or self.default is None:
            return None
        if self.cuda is _SAME or self.cuda == self.default:
            return self.show(self.default)
        return f"{self.show(self.cuda)} on CUDA, {self.show(self.default)} on the CPU"

    def full_help(self) -> str:
        default = self.default_text()
        return f"{self.help}. Default: {default}" if default else self.help

    def __repr__(self) -> str:
        return f"Setting({self.name!r})"


def _seconds(value: float) -> str:
    return f"{value:g} s"


# Help text follows pytest's rules: capitalised; a single phrase has no period.
# fmt: off
ENABLED = Setting(
    "enabled", parse_bool, "Run the benchmark tests (without it they are skipped and torch is "
    "not imported)", flag="--cnnperf", default=False
)
CUDNN: Setting[tuple[CudnnMode, ...] | None] = Setting(
    "cudnn", parse_modes, "Parametrize benchmarks over cuDNN modes: on, off, benchmark, "
    "deterministic (CUDA runs only). Default: the flags as they are",
    flag="--cudnn", metavar="MODE[,MODE...]", ini=True
)
DEVICE = Setting(
    "device", parse_device, "Device to benchmark on: auto (the first CUDA device, else the "
    "CPU), cpu, cuda or cuda:N", flag=True, metavar="DEVICE", ini=True,
    default=DeviceRequest("auto"), show=str
)
SAVE = Setting(
    "save", parse_bool, "Record baselines from this run instead of gating against them",
    flag=True, default=False
)
AGAINST: Setting[str | None] = Setting(
    "against", parse_revision, "Gate every benchmark against the same benchmark measured at "
    "this git revision (a branch, tag or commit) in the same run, instead of a stored "
    "baseline: the revision runs from a worktree of its own, its samples in turn with these",
    flag=True, metavar="REV", ini=True
)
PRUNE = Setting(
    "prune", parse_bool, "With --cnnperf-save, also remove the baseline entries of the test "
    "modules that ran whose tests this run did not collect", flag=True, default=False
)
BASELINES: Setting[Path] = Setting(
    "baselines", parse_path, "Directory of baseline files. Default: baselines/ under the "
    "rootdir", flag=True, metavar="DIR", ini=True, path=True, default=Path("baselines")
)
MACHINE: Setting[str | None] = Setting(
    "machine", parse_text, "Name of the kind of machine whose baselines apply. Default: "
    "derived from the device, e.g. nvidia-h100-80gb-hbm3 or cpu-amd-epyc-7763-2t",
    flag=True, metavar="NAME", ini=True
)
THRESHOLD = Setting(
    "threshold", parse_loss_threshold, "Throughput loss that fails a benchmark, e.g. 10%",
    flag=True, metavar="PCT", ini=True, marker=True, default=0.10, cuda=0.05, show=percent
)
MEMORY_THRESHOLD = Setting(
    "memory_threshold", parse_growth_threshold, "Peak-memory growth that fails a benchmark, "
    "e.g. 5%", flag=True, metavar="PCT", ini=True, marker=True, default=0.05, show=percent
)
METRIC = Setting(
    "metric", parse_metric, "What gates throughput: time (step time) or instructions "
    "(instructions per step, counted under Valgrind's callgrind in one process per session: "
    "no noise, CPU runs only; step time is still measured and reported beside)",
    flag=True, metavar="METRIC", ini=True, marker=True, default="time", show=str
)
INSTRUCTIONS_THRESHOLD = Setting(
    "instructions_threshold", parse_growth_threshold, "Growth of instructions per step that "
    "fails a benchmark under --cnnperf-metric=instructions, e.g. 1%", flag=True,
    metavar="PCT", ini=True, marker=True, default=0.01, show=percent
)
COMPILE_TIME_THRESHOLD: Setting[float | None] = Setting(
    "compile_time_threshold", parse_growth_threshold, "Compile-time growth that fails a "
    "compiled benchmark, e.g. 50%. Default: none (compile time is reported against the "
    "baseline, never failed on: it is noisy)", flag=True, metavar="PCT", ini=True, marker=True
)
EFFORT = Setting(
    "effort", parse_effort, "How much to measure: quick, standard or thorough",
    flag=True, metavar="LEVEL", ini=True, marker=True, default=Effort.STANDARD, show=str
)
STRICT = Setting(
    "strict", parse_bool, "Fail benchmarks that have no baseline, whose verdict is "
    "inconclusive or whose environment (torch, CUDA, cuDNN, driver) differs from the "
    "baseline's", flag=True, ini=True, marker=True, default=False
)
INPROCESS = Setting(
    "inprocess", parse_bool, "Measure inside the pytest process instead of in fresh sample "
    "processes (faster, works under a debugger; the samples then share one process's noise)",
    flag=True, ini=True, default=False
)
SAMPLES = Setting(
    "samples", parse_samples, "The most samples (fresh processes) a gated benchmark takes: "
    "the gate looks after 3, 6, 12, ... of them and stops as soon as its verdict is clear",
    flag=True, metavar="N", ini=True, default=12, cuda=6, show=str
)
MIN_TIME = Setting(
    "min_time", parse_seconds, "Seconds of timed steps per sample", ini=True, default=0.4,
    cuda=1.0, show=_seconds
)
SAMPLE_TIMEOUT = Setting(
    "sample_timeout", parse_seconds, "Seconds a sample process may take before it is killed",
    ini=True, default=1800.0, show=_seconds
)
CALIBRATION = Setting(
    "calibration", parse_bool, "Time a calibration workload in every sample and allow for the "
    "machine's speed (true/false)", ini=True, default=True, show=lambda on: str(on).lower()
)
PEAK_TFLOPS: Setting[PeakSetting | None] = Setting(
    "peak_tflops", parse_peak_tflops, "The device's dense peak in TFLOP/s that utilisation "
    "(MFU) is measured against: one figure for every precision (312) or figures per precision "
    "(bf16=989,tf32=494). Default: NVIDIA's datasheet figure for the GPUs pytest-cnnperf "
    "knows, a measured matrix product on the CPU", ini=True
)
JSON_REPORT: Setting[Path | None] = Setting(
    "json", parse_path, "Write every result, with its environment, samples and verdict, as "
    "JSON", flag=True, metavar="PATH", path=True
)
MARKDOWN_REPORT: Setting[Path | None] = Setting(
    "markdown", parse_path, "Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY "
    "when it is set)", flag=True, metavar="PATH", path=True
)
PLOT_REPORT: Setting[Path | None] = Setting(
    "plot", parse_path, "Draw throughput and memory against the baselines to a PNG or SVG "
    "(needs matplotlib)", flag=True, metavar="PATH", path=True
)
BENCHMARK_JSON_REPORT: Setting[Path | None] = Setting(
    "benchmark_json", parse_path, "Also write the results in pytest-benchmark's JSON format, "
    "for its dashboards", flag=True, metavar="PATH", path=True
)
HISTORY: Setting[Path | str | None] = Setting(
    "history", parse_history, "Append every benchmarked run (results, samples, environment, "
    "git commit, CI run) to a history: a SQLite file, or a postgresql:// URL shared by many "
    "runners", flag=True, metavar="TARGET", ini=True, path=True
)
CREEP: Setting[float | None] = Setting(
    "creep", parse_loss_threshold, "With a history: also fail a benchmark whose throughput or "
    "peak memory is worse than the best of its recent runs on this machine by more than this, "
    "e.g. 10% (below 100%, for both), whatever its baseline says",
    flag=True, metavar="PCT", ini=True
)
CREEP_RUNS = Setting(
    "creep_runs", positive_int("a number of runs", 10), "Recent runs of the history the creep "
    "gate takes the best of", ini=True, default=10, show=str
)
CREEP_ACCEPT = Setting(
    "creep_accept", parse_bool, "Accept this run's figures: the creep gate does not judge it, "
    "and compares later runs only with the runs from this one on", flag=True, default=False
)
ATTRIBUTION = Setting(
    "attribution", parse_attribution, "Which benchmarks' changed operators to name, from an "
    "operator profile kept with each baseline: changes (regressed and improved ones), always "
    "or off (no profile is taken)", flag=True, metavar="MODE", ini=True, marker=True,
    default="changes", show=str
)
STRUCTURE: Setting[frozenset[str]] = Setting(
    "structure", parse_structure, "Which exact counts of a step fail a benchmark when they grow "
    "against its reference: syncs (host-device synchronisations), casts (dtype casts), layouts "
    "(memory-format conversions), operators (every operator call), several joined with commas, "
    "or none; every change is reported either way", flag=True, metavar="KINDS", ini=True,
    marker=True, default=GATED_BY_DEFAULT, show=show_structure
)
ALLOWED_SYNCS = Setting(
    "allowed_syncs", parse_allowed, "Host-device synchronisations per step a benchmark may add "
    "to its reference's without failing (a known one, e.g. under --cnnperf-against)",
    ini=True, marker=True, default=0, show=str
)
TRACE: Setting[Path | None] = Setting(
    "trace", parse_path, "Write each benchmark's profiled steps as a Chrome / Perfetto trace "
    "into this folder (open it in ui.perfetto.dev or TensorBoard)", flag=True, metavar="DIR",
    path=True
)

# fmt: on

#: the plugin's own settings: the rows above, in the order ``pytest --help`` lists them (the zoo
#: adds its own)
SETTINGS: tuple[Setting[Any], ...] = tuple(
    value for value in tuple(globals().values()) if isinstance(value, Setting)
)
MARKER_SETTINGS = tuple(s for s in SETTINGS if s.marker)
MARKER_ARGUMENTS = tuple(s.name for s in MARKER_SETTINGS)
MARKER_HELP = (
    f"cnnperf({', '.join(f'{name}=None' for name in MARKER_ARGUMENTS)}): per-test settings of "
    "pytest-cnnperf: the throughput, memory and compile-time thresholds (e.g. '15%'), the "
    "effort (quick, standard, thorough), strict mode, attribution (changes, always, off), the "
    "counts that fail (structure='syncs,casts') and the syncs allowed (allowed_syncs=1)"
)


def as_given(args: Sequence[str], table: Iterable[Setting[Any]]) -> list[str]:
    """``table``'s options as the command line ``args`` gave them (``--flag=value``, a switch
    as ``--flag``), for another pytest process of the run that must see them too."""
    flags = {s.flag: s for s in table if s.flag is not None}
    given: list[str] = []
    words = iter(args)
    for word in words:
        flag, equals, _ = word.partition("=")
        setting = flags.get(flag)
        if setting is None:
            continue
        if setting.switch:
            given.append(flag)
        elif equals:
            given.append(word)
        else:
            given.append(f"{flag}={next(words, '')}")
    return given


def add_options(parser: Any, table: Iterable[Setting[Any]] = SETTINGS) -> None:
    """Declare every option and ini setting of ``table`` (``parser``: pytest's ``Parser``)."""
    group = parser.getgroup("cnnperf", "CNN training performance (pytest-cnnperf)")
    for setting in table:
        if setting.ini:
            parser.addini(setting.ini_name, setting.full_help(), default="")
        if setting.flag is None:
            continue
        text = setting.full_help().replace("%", "%%")
        if setting.switch:
            group.addoption(
                setting.flag, action="store_true", default=None, dest=setting.ini_name, help=text
            )
        else:
            group.addoption(
                setting.flag,
                dest=setting.ini_name,
                metavar=setting.metavar,
                type=argtype(setting.parse),
                help=text,
            )


class MarkerError(ValueError):
    """``@pytest.mark.cnnperf(...)`` was given something it does not take."""


def read_marker(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[Setting[Any], Any]:
    """Validate ``@pytest.mark.cnnperf(...)``; ``MarkerError`` names what is wrong."""
    accepted = ", ".join(MARKER_ARGUMENTS)
    if args:
        raise MarkerError(
            f"@pytest.mark.cnnperf takes keyword arguments only, got {args!r}; accepted: {accepted}"
        )
    unknown = sorted(set(kwargs) - set(MARKER_ARGUMENTS))
    if unknown:
        raise MarkerError(
            f"@pytest.mark.cnnperf got unknown argument(s) {', '.join(unknown)}; "
            f"accepted: {accepted}"
        )
    values: dict[Setting[Any], Any] = {}
    for setting in MARKER_SETTINGS:
        value = kwargs.get(setting.name)
        if value is None:
            continue
        try:
            values[setting] = setting.parse(value)
        except ValueError as exc:
            raise MarkerError(f"@pytest.mark.cnnperf({setting.name}={value!r}): {exc}") from None
    return values


class IniError(ValueError):
    """An ini setting has a value its parser refuses."""


class Settings:
    """Resolved settings: ``settings[THRESHOLD]`` is the value in force."""

    def __init__(self, values: Mapping[Setting[Any], Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, setting: Setting[T]) -> T:
        value: T = self._values[setting]
        return value


@dataclass(eq=False)
class Configuration:
    """What the command line and the ini file set, with the folders their paths are relative
    to; :meth:`resolve` gives the settings in force on a device (for a test, with its marker)."""

    cli: dict[Setting[Any], Any]
    ini: dict[Setting[Any], Any]
    invocation_dir: Path
    rootdir: Path
    #: every setting there is (the plugin's and the zoo's)
    table: tuple[Setting[Any], ...] = SETTINGS

    @classmethod
    def read(
        cls,
        options: Any,
        getini: Callable[[str], object],
        invocation_dir: Path,
        rootdir: Path,
        table: Iterable[Setting[Any]] = SETTINGS,
    ) -> Configuration:
        """From pytest's parsed ``options`` and ``getini``; ``IniError`` for a bad ini value."""
        cli: dict[Setting[Any], Any] = {}
        ini: dict[Setting[Any], Any] = {}
        table = tuple(table)
        for setting in table:
            if setting.flag is not None:
                value = getattr(options, setting.ini_name, None)
                if value is not None:
                    cli[setting] = value
            if setting.ini:
                raw = str(getini(setting.ini_name)).strip()
                if raw:
                    try:
                        ini[setting] = setting.parse(raw)
                    except ValueError as exc:
                        raise IniError(f"ini setting {setting.ini_name} = {raw!r}: {exc}") from None
        return cls(cli, ini, invocation_dir, rootdir, table)

    def resolve(
        self, device_type: str, marker: Mapping[Setting[Any], Any] | None = None
    ) -> Settings:
        """The value of every setting: the command line's, else the marker's, else the ini
        file's, else the device's default."""
        values: dict[Setting[Any], Any] = {}
        for setting in self.table:
            if setting in self.cli:
                value, base = self.cli[setting], self.invocation_dir
            elif marker and setting in marker:
                value, base = marker[setting], self.rootdir
            elif setting in self.ini:
                value, base = self.ini[setting], self.rootdir
            else:
                value, base = setting.default_for(device_type), self.rootdir
            if setting.path and isinstance(value, Path):  # not a URL
                value = base / value
            values[setting] = value
        return Settings(values)

    def given(self, setting: Setting[Any]) -> bool:
        """Whether the command line or the ini file set ``setting``."""
        return setting in self.cli or setting in self.ini
