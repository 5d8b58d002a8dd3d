"""Plain-text tables: columns padded to their widths, numbers aligned on the right."""

from __future__ import annotations

from collections.abc import Sequence


def some(names: Sequence[str], shown: int) -> str:
    """The first ``shown`` names and how many more there are: ``a, b and 3 more``."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def columns(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()
) -> list[str]:
    """Lines of a table with a header, two spaces between columns; the columns whose index is
    in ``right`` are aligned on the right (figures), the others on the left (names)."""
    lines = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    rendered = []
    for line in lines:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        rendered.append("  ".join(cells).rstrip())
    return rendered
