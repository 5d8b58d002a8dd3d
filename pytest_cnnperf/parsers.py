"""What a setting's value may be written as, and what it means.

Each parser takes a value as written (text from the command line or the ini file, or a Python
value in a marker), names the bad value, the accepted forms and an example, and raises
``ValueError``; ``pytest_cnnperf.settings`` decides how that is reported. Nothing here imports
torch, numpy or the measuring code: ``pytest --help`` reads this module.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .count_kinds import KINDS, UNGATEABLE, kind_of

T = TypeVar("T")


class Effort(str, enum.Enum):
    """How much measuring a benchmark gets: ``quick`` for a smoke run, ``thorough`` for release
    gates on noisy runners."""

    QUICK = "quick"
    STANDARD = "standard"
    THOROUGH = "thorough"

    def __str__(self) -> str:
        return self.value


def parse_growth_threshold(value: object) -> float:
    """A growth that fails (peak memory, instructions, compile time), as written: ``10%``,
    ``150%`` (memory can grow past 100%), or a fraction below 1 such as ``0.1`` (a bare number of
    1 or more was probably meant as a percentage, and is refused)."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        number = float("nan")
    if isinstance(value, bool) or not number > 0 or number == float("inf"):
        raise ValueError(
            f"{value!r} is not a threshold; use a percentage such as 10% or 2.5%, or a fraction "
            "such as 0.1"
        )
    if not text.endswith("%") and number >= 1:
        raise ValueError(
            f"{value!r} as a fraction is {percent(number)}; did you mean {text}%? "
            f"Write a percentage such as {text}%, or a fraction below 1 such as 0.1"
        )
    return number


def parse_loss_threshold(value: object) -> float:
    """The throughput loss that fails: below 100%, since a loss of 100% (no throughput at all)
    cannot be exceeded, and a gate at or above it would pass everything."""
    number = parse_growth_threshold(value)
    if number >= 1:
        raise ValueError(
            f"{value!r} cannot fail anything: a throughput loss is always below 100%; "
            "use a percentage below 100% such as 10%"
        )
    return number


def parse_effort(value: object) -> Effort:
    try:
        return Effort(str(value).strip().lower())
    except ValueError:
        accepted = ", ".join(e.value for e in Effort)
        raise ValueError(f"{value!r} is not an effort level; use one of {accepted}") from None


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{value!r} is not a boolean; use true or false")


def parse_seconds(value: object) -> float:
    try:
        seconds = float(str(value))
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 86400:
        raise ValueError(f"{value!r} is not a duration; use seconds such as 0.5")
    return seconds


def parse_positive_ints(value: object) -> tuple[int, ...]:
    text = str(value)
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{text!r} is not a list of positive integers; use e.g. 32 or 32,64")
    return values


def positive_int(what: str, example: int) -> Callable[[object], int]:
    """A parser of one positive whole number; ``what`` names it in messages (``a number of
    samples``)."""

    def parse(value: object) -> int:
        text = str(value).strip()
        number = int(text) if text.isdigit() and not isinstance(value, bool) else 0
        if number <= 0:
            raise ValueError(
                f"{text!r} is not {what}; use a positive whole number such as {example}"
            )
        return number

    parse.__name__ = "parse_" + what.split()[-1]
    return parse


#: the most samples a gated benchmark may take (a save up to twice what a first look against it
#: needs): each is a fresh process, and no verdict needs more
MAX_SAMPLES = 100


def parse_samples(value: object) -> int:
    number = positive_int("a number of samples", 12)(value)
    if number > MAX_SAMPLES:
        raise ValueError(
            f"{number} samples is more than the {MAX_SAMPLES} a benchmark may take: each is a "
            f"fresh process of a second or more; use {MAX_SAMPLES} or fewer"
        )
    return number


def parse_text(value: object) -> str:
    return str(value).strip()


def parse_revision(value: object) -> str:
    """A git revision as written (``main``, ``origin/main``, ``HEAD~3``, a sha); git itself
    says whether it knows it."""
    text = str(value).strip()
    if not text or text.startswith("-") or any(c.isspace() for c in text):
        raise ValueError(
            f"{value!r} is not a git revision; give a branch, a tag or a commit, such as main, "
            "origin/main, HEAD~1 or a sha"
        )
    return text


def parse_path(value: object) -> Path:
    return Path(str(value))


HISTORY_SCHEMES = ("postgresql", "postgres")


def parse_history(value: object) -> Path | str:
    """A SQLite file's path, or a ``postgresql://`` URL (kept as the text it is)."""
    text = str(value).strip()
    scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if scheme in HISTORY_SCHEMES:
        return text
    if not text or scheme is not None:
        raise ValueError(
            f"{value!r} is not a history; use a SQLite file's path such as .cnnperf/history.db, "
            "or a PostgreSQL URL such as postgresql://user@host:5432/perf"
        )
    return Path(text)


def parse_amp(value: object) -> str | None:
    """An AMP mode as written (``bf16``, ``bfloat16``, ``off``...): ``fp16``, ``bf16`` or
    ``None`` (fp32); ``ValueError`` names the accepted forms."""
    text = str(value).strip().lower()
    if text in ("off", "none", "fp32", "false"):
        return None
    if text in ("fp16", "float16", "half"):
        return "fp16"
    if text in ("bf16", "bfloat16"):
        return "bf16"
    raise ValueError(f"{value!r} is not an AMP mode; use off, fp16 or bf16")


#: ``torch.compile``'s modes (``torch._inductor.list_mode_options``)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def parse_amp_list(value: object) -> tuple[str | None, ...]:
    return tuple(dict.fromkeys(parse_amp(part) for part in str(value).split(",")))


MEMORY_FORMATS = ("contiguous", "channels_last")


def parse_memory_formats(value: object) -> tuple[bool, ...]:
    """``contiguous,channels_last`` -> ``(False, True)`` (is it channels_last?)."""
    flags = []
    for part in str(value).split(","):
        name = part.strip().lower()
        if name not in MEMORY_FORMATS:
            raise ValueError(
                f"{part.strip()!r} is not a memory format; use contiguous, channels_last or both "
                "(e.g. --cnnperf-zoo-memory-format=contiguous,channels_last)"
            )
        flags.append(name == "channels_last")
    return tuple(dict.fromkeys(flags))


def parse_compile_modes(value: object) -> tuple[str | None, ...]:
    """``off,default,max-autotune`` -> ``(None, "default", "max-autotune")``: eager and the
    compile modes to parametrize the zoo over."""
    modes: list[str | None] = []
    for part in str(value).split(","):
        name = part.strip().lower()
        if name in ("off", "eager", "none", "false"):
            modes.append(None)
        elif name in COMPILE_MODES:
            modes.append(name)
        else:
            raise ValueError(
                f"{part.strip()!r} is not a compile mode; use off (eager) or "
                f"{', '.join(COMPILE_MODES)}, several joined with commas "
                "(e.g. --cnnperf-zoo-compile=off,default)"
            )
    return tuple(dict.fromkeys(modes))


#: when the gate names the operators that changed
METRICS = ("time", "instructions")


def parse_metric(value: object) -> str:
    """What gates throughput: ``time`` or ``instructions``."""
    text = str(value).strip().lower()
    if text not in METRICS:
        raise ValueError(
            f"{value!r} is not a metric; use time (step time, on any device) or instructions "
            "(instructions per step counted under callgrind, on the CPU)"
        )
    return text


ATTRIBUTION_MODES = ("changes", "always", "off")


def parse_attribution(value: object) -> str:
    text = str(value).strip().lower()
    if text not in ATTRIBUTION_MODES:
        raise ValueError(
            f"{value!r} is not an attribution mode; use changes (the operators of regressed and "
            "improved benchmarks), always (every benchmark's) or off (no operator profile)"
        )
    return text


def parse_structure(value: object) -> frozenset[str]:
    """The kinds of exact counts that fail a benchmark when they grow (``model.structure``)."""
    words = [p.strip().lower() for p in str(value).split(",") if p.strip()]
    if words == ["none"]:
        return frozenset()
    kinds = [kind_of(word) for word in words]
    accepted = [word for kind, (word, _) in KINDS.items() if kind not in UNGATEABLE]
    if not words or any(kind is None or kind in UNGATEABLE for kind in kinds):
        bad = next(
            (w for w, k in zip(words, kinds, strict=True) if k is None or k in UNGATEABLE), value
        )
        raise ValueError(
            f"{bad!r} is not a kind of count the gate can fail on; use {', '.join(accepted)}, "
            "several joined with commas (e.g. syncs,casts), or none"
        )
    return frozenset(k for k in kinds if k is not None)


def show_structure(kinds: frozenset[str]) -> str:
    return ",".join(word for kind, (word, _) in KINDS.items() if kind in kinds) or "none"


def parse_allowed(value: object) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise ValueError(
            f"{text!r} is not a number of host-device synchronisations; use a whole number of "
            "at least 0, such as 1 (the syncs per step a benchmark may add)"
        )
    return int(text)


def parse_names(value: object) -> tuple[str, ...]:
    text = str(value)
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise ValueError(f"{text!r} names no models; use e.g. resnet18,mobilenet_v2")
    return names


def argtype(parse: Callable[[object], T]) -> Callable[[str], T]:
    """Adapt a parser for argparse: its ``ValueError`` becomes a usage error with the message."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__.removeprefix("parse_")
    return convert


def percent(value: float) -> str:
    """A fraction as people read it: ``0.1`` is ``10%``, ``0.025`` is ``2.5%``."""
    return f"{value * 100:.1f}%".replace(".0%", "%")
