"""The manual against the code: the generated references name every setting, option and
subcommand, every field of the file formats is described, the code map lists every module, and
the README stays a short front door that starts with its two commands.

The reference generators (``docs/_ext/cnnperf_reference.py``) are called directly: no Sphinx is
needed here; CI builds the site itself with warnings as errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_cnnperf import cli, parsers, plugin, settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _reference() -> ModuleType:
    path = DOCS / "_ext" / "cnnperf_reference.py"
    spec = importlib.util.spec_from_file_location("cnnperf_reference", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cnnperf_reference", module)
    spec.loader.exec_module(module)
    return module


ref = _reference()


def _blocks(page: str) -> list[str]:
    """The arguments of the reference blocks a page asks for."""
    return [m.group(1) for m in ref.BLOCK.finditer((DOCS / page).read_text(encoding="utf-8"))]


# ---- settings: options, ini settings, marker keys ----


def test_every_setting_has_help_text() -> None:
    missing = [s.name for s in plugin.TABLE if not s.help.strip()]
    assert missing == []
    assert ref.settings_table() == plugin.TABLE


def test_a_setting_without_help_fails_the_reference() -> None:
    bare = settings.Setting("bare", parsers.parse_text, "  ", flag=True)
    with pytest.raises(ref.MissingHelp, match="settings without help text: bare"):
        ref.check_help((*plugin.TABLE, bare))


def _help_flags(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--cnnperf[\w-]*|--cudnn)(?=[=\s,]|$)", text))


def test_the_options_reference_names_every_option_of_pytest_help(
    pytester: pytest.Pytester,
) -> None:
    result = pytester.runpytest("--help")
    assert result.ret == 0
    flags = _help_flags(result.stdout.str())
    assert {"--cnnperf-save", "--cnnperf-zoo-compile", "--cudnn"} <= flags
    page = ref.options_markdown()
    assert sorted(f for f in flags if f"`{f}" not in page) == []
    assert sorted(flags) == sorted(ref.option_flags())
    assert _blocks("reference/options.md") == ["marker", "options"]


def test_the_options_reference_has_a_section_for_every_setting_with_its_defaults() -> None:
    page = ref.options_markdown()
    for s in plugin.TABLE:
        assert f"({ref.anchor(s)})=" in page
        if s.ini:
            assert f"`{s.ini_name} = ...`" in page
        if s.marker:
            assert f"`@pytest.mark.cnnperf({s.name}=...)`" in page
    threshold = page.split("(setting-threshold)=")[1].split("(setting-")[0]
    assert "| default on the CPU | 10% |" in threshold
    assert "| default on CUDA | 5% |" in threshold
    samples = page.split("(setting-samples)=")[1].split("(setting-")[0]
    assert "| default on the CPU | 12 |" in samples
    assert "| default on CUDA | 6 |" in samples


def test_the_marker_reference_names_every_marker_key() -> None:
    table = ref.marker_markdown()
    assert [s for s in settings.MARKER_ARGUMENTS if f"[`{s}`]" not in table] == []


# ---- the cnnperf command ----


def _listed_subcommands() -> list[str]:
    """The subcommands ``cnnperf --help`` lists, read from its text."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["--help"])
    section = out.getvalue().split("COMMAND\n", 2)[-1].split("\n\n")[0]
    return re.findall(r"^    (\w+)", section, re.MULTILINE)


def test_the_command_reference_names_every_subcommand() -> None:
    listed = _listed_subcommands()
    assert {"compare", "dashboard", "models"} <= set(listed)
    assert ref.subcommands() == listed
    whole = ref.cli_markdown()
    assert [name for name in listed if f"    {name}" not in whole] == []
    for name in listed:
        assert f"usage: cnnperf {name}" in ref.cli_markdown(name)
    assert sorted(_blocks("reference/cli.md")) == sorted(["cli", *(f"cli {n}" for n in listed)])


def test_the_command_reference_is_the_same_wherever_it_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    wide = ref.command_help("compare")
    monkeypatch.setenv("COLUMNS", "40")
    assert ref.command_help("compare") == wide
    assert "\x1b[" not in wide


# ---- file formats ----


def _format_classes() -> list[type]:
    from pytest_cnnperf.model import ResultsFile
    from pytest_cnnperf.store.baseline import BaselineFile

    return [*ref.reachable(ResultsFile), *ref.reasons(), BaselineFile]


def test_every_field_of_the_file_formats_is_described() -> None:
    assert ref.undocumented(_format_classes()) == []


def test_the_manual_describes_no_field_that_does_not_exist() -> None:
    fields = {
        f"{cls.__name__}.{f.name}" for cls in _format_classes() for f in dataclasses.fields(cls)
    }
    assert sorted(set(ref.FIELD_NOTES) - fields) == []


def test_the_format_reference_has_a_row_for_every_field() -> None:
    pages = {which: ref.format_markdown(which) for which in ("results", "baseline", "reasons")}
    text = "\n".join(pages.values())
    for cls in _format_classes():
        section = text.split(f"### {cls.__name__}\n", 1)[1].split("\n###")[0]
        assert [f.name for f in dataclasses.fields(cls) if f"| `{f.name}` |" not in section] == []
    assert "| `key` | string | written, never read |" in pages["results"]
    assert _blocks("formats.md") == ["format results", "format reasons", "format baseline"]


def test_an_undescribed_field_fails_the_reference() -> None:
    @dataclasses.dataclass(frozen=True)
    class Odd:
        mystery: int

    assert ref.undocumented([Odd]) == ["Odd.mystery"]


# ---- every page's generated blocks ----


def test_every_reference_block_of_the_manual_expands() -> None:
    pages = sorted(DOCS.rglob("*.md"))
    assert pages
    for page in pages:
        if "_build" in page.parts:
            continue
        expanded = ref.expand(page.read_text(encoding="utf-8"))
        assert "{cnnperf-reference}" not in expanded, page


def test_a_reference_block_with_a_bad_argument_fails() -> None:
    with pytest.raises(ValueError, match="no such reference"):
        ref.expand("```{cnnperf-reference} optoins\n```\n")


# ---- the README and CONTRIBUTING.md ----

ZOO_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.14.1 "
    "torchvision==0.29.1 -e . && pytest --cnnperf --pyargs pytest_cnnperf.zoo"
)
TEST_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.14.1 "
    "torchvision==0.29.1 -e '.[test]' && pytest"
)


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    start = lines.index("```bash")
    assert start < 10  # on the first screen
    block = lines[start + 1 : lines.index("```", start + 1)]
    commands = [line for line in block if line and not line.startswith("#")]
    assert commands == [ZOO_COMMAND, TEST_COMMAND]


def test_ci_runs_the_readmes_test_command() -> None:
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    tests = run.index('stage "tests (the README\'s test command)"')
    assert run[tests + 1] == TEST_COMMAND.rsplit(" && ", 1)[1]
    build = "sphinx-build -W --keep-going -b html docs docs/_build/html"
    assert build in run
    assert build in (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_the_readmes_links_lead_to_files() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert "docs/reference/options.md" in targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_the_code_map_lists_every_module() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    code_map = text.split("| module | what it owns |", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"^\| `(\S+\.py)` \| \S", code_map, re.MULTILINE))
    package = ROOT / "pytest_cnnperf"
    modules = {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
    assert sorted(modules - listed) == []
    assert sorted(listed - modules) == []
