"""Plain-text rendering shared by the operator commands: aligned tables and times."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

__all__ = ["ago", "iso", "table"]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; ``(none)`` under the headers when empty.

    >>> print("\\n".join(table(["A", "BB"], [["xyz", "1"]])))
    A    BB
    xyz  1
    """
    if not rows:
        return ["  ".join(headers), "(none)"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *rows]
    ]


def ago(age_ms: int) -> str:
    """An age for people.

    >>> ago(1234), ago(-5)
    ('1.2 s ago', '0.0 s ago')
    """
    return f"{max(0, age_ms) / 1000:.1f} s ago"


def iso(ms: int) -> str:
    """A record timestamp as ISO 8601 UTC, to the millisecond.

    >>> iso(1700000000123)
    '2023-11-14T22:13:20.123Z'
    """
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
