"""Where a benchmark test lives, which baseline file and entry hold its baselines, and how a
path is shown to the user.

A test module's baselines are kept in ``<baselines>/<machine>/<module key>.json``: the module
key is the test file's path under the rootdir without its suffix (``tests/perf/test_models``),
or its dotted module name for a file outside the rootdir (an installed package run with
``--pyargs``). Inside the file, entries are keyed by the test's name within the module.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the longest :func:`readable_name`: three of them and a suffix fit a file name's 255 bytes
READABLE_MAX = 80
_SAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"


def safe_name(part: str) -> str:
    """A path component that no test id or machine name can make strange: a name of
    ``[A-Za-z0-9._-]`` that neither starts nor ends with a dot is kept as it is; in any other,
    every other character, and leading and trailing dots, are written as ``%XX`` (their UTF-8
    bytes), so that two names never share a file (``perf 1`` is ``perf%201``, ``perf_1``
    stays ``perf_1``)."""
    if (
        part
        and all(c in _SAFE for c in part)
        and not part.startswith(".")
        and not part.endswith(".")
    ):
        return part
    stripped = part.strip(".")
    lead = len(part) - len(part.lstrip("."))
    trail = len(part) - lead - len(stripped)
    body = "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in stripped)
    return "%2E" * lead + body + "%2E" * trail or "%"


def readable_name(part: str) -> str:
    """A file name part for people to open (a trace): every run of characters outside
    ``[A-Za-z0-9._=+,[]-]`` becomes ``_``, as do leading and trailing dots
    (``train_step ResNet bs=64 224x224`` is ``train_step_ResNet_bs=64_224x224``); one longer
    than :data:`READABLE_MAX` is cut, with a digest of the whole."""
    name = re.sub(r"[^A-Za-z0-9._=+,\[\]-]+", "_", part)
    name = re.sub(r"^\.+|\.+$", "_", name) or "_"
    if len(name) > READABLE_MAX:  # file names end at 255 bytes: a digest keeps long ones apart
        digest = hashlib.sha1(part.encode()).hexdigest()[:8]
        name = f"{name[: READABLE_MAX - 9]}-{digest}"
    return name


def module_key(parts: Iterable[str]) -> str:
    """A relative path for a module's baseline file from its path components, each made safe
    by :func:`safe_name`."""
    return "/".join(safe_name(part) for part in parts)


@dataclass(frozen=True)
class Location:
    """A benchmark test: its node id and file, and its baselines' module key and test name."""

    nodeid: str
    path: str
    module: str
    test: str

    @classmethod
    def of(cls, item: Any) -> Location:
        """The location of a pytest item."""
        path = Path(str(item.path))
        try:
            relative = path.relative_to(item.config.rootpath)
            parts = [*relative.parent.parts, relative.stem]
        except ValueError:  # outside the rootdir, e.g. an installed package run with --pyargs
            module = getattr(getattr(item, "module", None), "__name__", path.stem)
            parts = module.split(".")
        test = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.name
        return cls(nodeid=item.nodeid, path=str(path), module=module_key(parts), test=test)


def display_path(path: os.PathLike[str] | str) -> str:
    """A path as a user reads it: relative to the current folder when it lies inside it, else
    as it is (``/proc/x/r.json``, not ``../../proc/x/r.json``)."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:  # another drive on Windows
        return text
    outside = relative == os.pardir or relative.startswith(os.pardir + os.sep)
    return text if outside else relative
