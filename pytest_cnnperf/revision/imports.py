"""No silent self-comparison: the base revision's process must import the project's code from the
revision's worktree.

A module whose top-level name exists in the worktree (a module or package at its top, under its
``src/``, or in any folder of it on ``sys.path``) but was imported from elsewhere is a leak: an
editable install or a ``.pth`` file that points at the checkout under test, a copy installed in
site-packages, a head path on ``PYTHONPATH``. Its base side would then measure the head's code,
and every comparison would say "ok". The plugin itself is the exception: both sides run the
head's, by design, so that a change to the plugin is never measured as the project's.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .git import relative
from .protocol import current_order

#: modules both sides take from the head's environment, by design
OURS = frozenset({"pytest_cnnperf"})


@dataclass(frozen=True)
class Leak:
    """A project module the base side imported from outside the revision's worktree."""

    module: str
    #: where it was imported from
    origin: str
    #: how it got there: ``checkout`` (the checkout under test), ``pythonpath``,
    #: ``installed`` (site-packages) or ``elsewhere``
    how: str

    def __str__(self) -> str:
        where = {
            "checkout": "the checkout under test (an editable install or a .pth file points at it)",
            "pythonpath": "the checkout under test, through PYTHONPATH",
            "installed": "an installed copy in site-packages",
            "elsewhere": "outside the revision's worktree",
        }[self.how]
        return f"{self.module} from {self.origin}, {where}"


def names_in(folder: Path) -> set[str]:
    """Top-level module names a folder provides: ``name.py`` files and package folders."""
    found: set[str] = set()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return found
    for entry in entries:
        if entry.suffix == ".py" and entry.is_file():
            found.add(entry.stem)
        elif entry.is_dir() and entry.name.isidentifier() and _is_package(entry):
            found.add(entry.name)
    return found


def _is_package(folder: Path) -> bool:
    """A regular package, or a namespace package with Python files in it."""
    if (folder / "__init__.py").exists():
        return True
    try:
        return any(entry.suffix == ".py" for entry in folder.iterdir())
    except OSError:
        return False


def project_names(worktree: Path, path: Iterable[str]) -> set[str]:
    """The top-level names the worktree provides: at its top, under ``src/``, and in its
    folders on ``path`` (``sys.path``)."""
    folders = {worktree, worktree / "src"}
    for entry in path:
        folder = Path(entry or os.getcwd())
        if _inside(folder, worktree):
            folders.add(folder)
    names: set[str] = set()
    for folder in folders:
        names |= names_in(folder)
    # a project's profile.py or test/ shadows the standard library's only on its own path
    return names - OURS - set(sys.stdlib_module_names)


def _inside(path: Path, folder: Path) -> bool:
    return relative(path, folder) is not None


def _provides(folder: Path, name: str, file: Path) -> bool:
    """Whether ``file`` is the module ``name`` as the folder ``folder`` on a path provides it."""
    inside = relative(file, folder)
    return inside is not None and inside.parts[:1] in ((name,), (f"{name}.py",))


def _origin(module: ModuleType) -> str | None:
    file = getattr(module, "__file__", None)
    if file:
        return str(file)
    locations = list(getattr(module, "__path__", []) or [])  # a namespace package
    return str(locations[0]) if locations else None


def leaks(
    worktree: Path,
    head: Path,
    modules: Mapping[str, ModuleType] | None = None,
    path: Iterable[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Leak]:
    """The project's modules (named as in the worktree) that were imported from elsewhere;
    ``head``: the checkout under test."""
    modules = dict(sys.modules if modules is None else modules)
    environ = os.environ if environ is None else environ
    names = project_names(worktree, sys.path if path is None else path)
    pythonpath = [Path(p) for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    site = [Path(p) for p in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}]
    found = []
    for name in sorted(modules):
        top = name.split(".", 1)[0]
        if top != name or top not in names:  # one line a package: its top module says it
            continue
        origin = _origin(modules[name])
        if origin is None or _inside(Path(origin), worktree):
            continue
        file = Path(origin)
        if _inside(file, head):
            from_path = any(_provides(entry, name, file) for entry in pythonpath)
            how = "pythonpath" if from_path else "checkout"
        elif any(_inside(file, p) for p in site):
            how = "installed"
        else:
            how = "elsewhere"
        found.append(Leak(name, origin, how))
    return found


def leak_message(found: list[Leak], option: str, worktree: Path) -> str:
    """Why the run stops, and the fixes."""
    lines = "; ".join(str(leak) for leak in found)
    hows = {leak.how for leak in found}
    fixes = []
    if hows & {"checkout", "installed"}:
        fixes.append(
            "uninstall the project from this environment (pip uninstall NAME) and let pytest "
            "put it on the path (pythonpath = src, or the project's folder, in the ini file)"
        )
    if "pythonpath" in hows:
        fixes.append("give PYTHONPATH relative paths (they resolve inside the worktree)")
    if "elsewhere" in hows:
        fixes.append("import the project only from the checkout")
    fix = "; or ".join(fixes)
    return (
        f"{option}: the revision's side imported the project's code from "
        f"outside its worktree ({worktree}): {lines}. It would measure the code under test "
        f"against itself. {fix[0].upper() + fix[1:]}."
    )


def leak_check() -> str | None:
    """In a process of the revision's side (``protocol.ENV``): the message that stops the run,
    or ``None``; always ``None`` in any other process."""
    order = current_order()
    if order is None:
        return None
    worktree = Path(order.worktree)
    found = leaks(worktree, Path(order.head_top))
    return leak_message(found, order.option, worktree) if found else None
