"""The kinds of exact counts a step's structure holds (``model.structure``), declared once.

The settings, the counter, the gate and the reports all read this table. It imports nothing,
so that the settings can name the kinds at pytest's start without loading the data model.
"""

from __future__ import annotations

#: each kind of count, declared once: the word that names it in settings and JUnit properties,
#: and its noun in messages. ``op`` rows hold every operator's total per step; the other kinds
#: also say which module (or phase) called them.
KINDS: dict[str, tuple[str, str]] = {
    "sync": ("syncs", "host-device synchronisation"),
    "cast": ("casts", "dtype cast"),
    "layout": ("layouts", "memory-format conversion"),
    "op": ("operators", "operator call"),
    "launch": ("launches", "kernel launch"),
}
#: the kinds a structure change fails a benchmark for unless the user says otherwise
GATED_BY_DEFAULT = frozenset({"sync"})
#: kinds that may vary with cuDNN's autotuner or the allocator: reported, never gated
UNGATEABLE = frozenset({"launch"})


def kind_of(setting: str) -> str | None:
    """The kind a setting's word names (``syncs`` -> ``sync``), or ``None``."""
    return next((kind for kind, (word, _) in KINDS.items() if word == setting), None)
