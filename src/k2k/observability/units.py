"""Durations as an operator reads them in log lines and the live panel."""

from __future__ import annotations

__all__ = ["duration_text"]


def duration_text(seconds: float) -> str:
    """Whole seconds under two minutes, then minutes and seconds, then hours and minutes.

    >>> duration_text(0.4), duration_text(47.6), duration_text(125), duration_text(7260)
    ('0 s', '48 s', '2 min 05 s', '2 h 01 min')
    """
    s = max(0, round(seconds))
    if s < 120:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
