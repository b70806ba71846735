"""Human-readable durations, as K2K users write them ("2 seconds", "5 minutes", "500ms").

Durations in the pipeline file are strings with a unit, never bare numbers: ``batchTimeout: 2``
could mean 2 ms or 2 s depending on which Kafka tool the user last read, so k2k refuses it
instead of guessing. :func:`format_duration` writes the form :func:`parse_duration` reads, so
``k2k validate --effective`` output loads back unchanged.

>>> parse_duration("2 seconds")
datetime.timedelta(seconds=2)
>>> parse_duration("1.5 s")
datetime.timedelta(seconds=1, microseconds=500000)
>>> parse_duration("100ms")
datetime.timedelta(microseconds=100000)
>>> format_duration(parse_duration("1 hour"))
'1 hour'
>>> format_duration(parse_duration("1.5 seconds"))
'1500 milliseconds'
>>> parse_duration("2")
Traceback (most recent call last):
    ...
ValueError: a bare number has no unit
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation

__all__ = ["EXAMPLE", "UNIT_SPELLINGS", "format_duration", "parse_duration"]

EXAMPLE = "a duration such as '2 seconds', '500 ms' or '5 minutes'"

_MICROS_PER_UNIT: dict[str, int] = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
}

#: Accepted spellings per unit (case-insensitive). Plural forms are accepted for every word.
UNIT_SPELLINGS: dict[str, tuple[str, ...]] = {
    "microsecond": ("microsecond", "us", "µs"),
    "millisecond": ("millisecond", "milli", "millis", "ms"),
    "second": ("second", "sec", "secs", "s"),
    "minute": ("minute", "min", "mins", "m"),
    "hour": ("hour", "hr", "hrs", "h"),
    "day": ("day", "d"),
}

_SPELLING_TO_UNIT: dict[str, str] = {
    spelling: unit for unit, spellings in UNIT_SPELLINGS.items() for spelling in spellings
}
_SPELLING_TO_UNIT.update({f"{unit}s": unit for unit in UNIT_SPELLINGS})

_DURATION = re.compile(r"\s*(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[^\s0-9.]+)\s*")
_BARE_NUMBER = re.compile(r"\s*[-+]?[0-9]+(?:\.[0-9]*)?\s*")


def parse_duration(text: str) -> timedelta:
    """Parse ``"<number> <unit>"`` into a :class:`~datetime.timedelta`.

    Raises :class:`ValueError` with a short reason (no value echo: the caller adds the key
    path and the value). Negative durations are not representable in this syntax on purpose.

    >>> parse_duration("5 Minutes")
    datetime.timedelta(seconds=300)
    >>> parse_duration("1 fortnight")
    Traceback (most recent call last):
        ...
    ValueError: unknown unit 'fortnight'
    """
    if _BARE_NUMBER.fullmatch(text):
        raise ValueError("a bare number has no unit")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError("not a duration")
    spelling = match["unit"].lower()
    unit = _SPELLING_TO_UNIT.get(spelling)
    if unit is None:
        raise ValueError(f"unknown unit {match['unit']!r}")
    try:
        micros = Decimal(match["number"]) * _MICROS_PER_UNIT[unit]
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        raise ValueError("not a duration") from None
    if micros != micros.to_integral_value():
        raise ValueError("finer than one microsecond")
    return timedelta(microseconds=int(micros))


def format_duration(value: timedelta) -> str:
    """Write ``value`` in the largest unit that represents it exactly.

    >>> format_duration(timedelta(seconds=30))
    '30 seconds'
    >>> format_duration(timedelta(milliseconds=1))
    '1 millisecond'
    >>> format_duration(timedelta(minutes=90))
    '90 minutes'
    """
    micros = value // timedelta(microseconds=1)
    for unit in ("day", "hour", "minute", "second", "millisecond"):
        size = _MICROS_PER_UNIT[unit]
        if micros % size == 0 and micros != 0:
            return _plural(micros // size, unit)
    return _plural(micros, "microsecond") if micros else "0 seconds"


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"
