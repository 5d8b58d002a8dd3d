"""A kind of machine's noise profile on disk: ``<baselines>/<machine>/noise-profile.json``,
beside its baselines (a name no test module can have), written by ``cnnperf noise``: per
benchmark, with the runs each was fitted from."""

from __future__ import annotations

import json
from pathlib import Path

from ..model.noise import BenchmarkNoise, NoiseProfile, NoiseProfileFile
from .baseline import BaselineFileError, _write_atomically, read_text
from .codec import Document, DocumentProblem
from .locations import safe_name

NOISE: Document[NoiseProfileFile] = Document(
    "pytest-cnnperf/noise-profile", 2, NoiseProfileFile, "noise profile"
)
FILE_NAME = "noise-profile.json"


class NoiseProfileError(BaselineFileError):
    """A noise profile file exists but cannot be used."""

    WORDING = (
        "noise profile {path} cannot be used: {problem}. Record it again with `cnnperf noise -- "
        "PYTEST_ARGS`, or delete it to gate with the device's default noise"
    )


def path(root: Path, machine: str) -> Path:
    return root / safe_name(machine) / FILE_NAME


def read(root: Path, machine: str, benchmark: str | None = None) -> NoiseProfile | None:
    """The noise profile of ``benchmark`` (by its :func:`~pytest_cnnperf.gate.noise.name`) on
    ``machine`` under the baselines folder ``root``: its own where the profile recorded it,
    else the kind's widest (``source`` ``widest``; also without ``benchmark``); ``None``: no
    profile was recorded."""
    document = read_file(root, machine)
    if document is None:
        return None
    own = document.benchmark(benchmark) if benchmark is not None else None
    return own.profile if own is not None and own.profile is not None else document.profile


def read_file(root: Path, machine: str) -> NoiseProfileFile | None:
    """The noise profile file of ``machine`` under the baselines folder ``root`` (``None``: none
    was recorded); ``NoiseProfileError`` says what is wrong with a file that cannot be used."""
    where = path(root, machine)
    text = read_text(where, NoiseProfileError)
    if text is None:
        return None
    try:
        document = NOISE.parse(text, "noise profile")
    except DocumentProblem as exc:
        raise NoiseProfileError(where, str(exc)) from None
    if document.machine != machine:
        raise NoiseProfileError(
            where, f"it is the profile of machine {document.machine!r}, not {machine!r}"
        )
    return document


def write(
    root: Path,
    machine: str,
    profile: NoiseProfile,
    benchmarks: tuple[tuple[str, BenchmarkNoise], ...] = (),
) -> Path:
    """Write ``machine``'s noise profile (the kind's, and each benchmark's with its runs)
    beside its baselines, atomically; returns where."""
    where = path(root, machine)
    where.parent.mkdir(parents=True, exist_ok=True)
    data = NOISE.dump(NoiseProfileFile(machine, profile, benchmarks))
    _write_atomically(where, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return where
