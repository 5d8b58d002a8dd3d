"""A kind of machine's noise profile on disk: ``<baselines>/<machine>/noise-profile.json``,
beside its baselines (a name no test module can have), written by ``cnnperf noise``."""

from __future__ import annotations

import json
from pathlib import Path

from ..model import NoiseProfile, NoiseProfileFile
from .baseline import BaselineFileError, _write_atomically
from .codec import DataError, Document
from .locations import safe_name

NOISE: Document[NoiseProfileFile] = Document(
    "pytest-cnnperf/noise-profile", 1, NoiseProfileFile, "noise profile"
)
FILE_NAME = "noise-profile.json"


class NoiseProfileError(BaselineFileError):
    """A noise profile file exists but cannot be used."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(path, problem)
        self.args = (
            f"noise profile {path} cannot be used: {problem}. Record it again with `cnnperf "
            "noise -- PYTEST_ARGS`, or delete it to gate with the device's default noise",
        )


def path(root: Path, machine: str) -> Path:
    return root / safe_name(machine) / FILE_NAME


def read(root: Path, machine: str) -> NoiseProfile | None:
    """The noise profile of ``machine`` under the baselines folder ``root`` (``None``: none was
    recorded); ``NoiseProfileError`` says what is wrong with a file that cannot be used."""
    where = path(root, machine)
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise NoiseProfileError(where, f"it cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NoiseProfileError(where, f"it is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != NOISE.schema:
        raise NoiseProfileError(
            where, f'it is not a pytest-cnnperf noise profile (it lacks "schema": "{NOISE.schema}")'
        )
    problem = NOISE.version_problem(data)
    if problem:
        raise NoiseProfileError(where, problem)
    try:
        document = NOISE.load(data)
    except DataError as exc:
        raise NoiseProfileError(where, f"it is malformed: {exc}") from None
    if document.machine != machine:
        raise NoiseProfileError(
            where, f"it is the profile of machine {document.machine!r}, not {machine!r}"
        )
    return document.profile


def write(root: Path, machine: str, profile: NoiseProfile) -> Path:
    """Write ``machine``'s noise profile atomically; returns where."""
    where = path(root, machine)
    where.parent.mkdir(parents=True, exist_ok=True)
    data = NOISE.dump(NoiseProfileFile(machine, profile))
    _write_atomically(where, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return where
