"""Reusable field types of the pipeline model: flags, durations, topic names, string maps.

Each type is an ``Annotated`` bundle of (Python type, parser, YAML serializer, :class:`FieldDoc`)
so that parsing, the effective-config rendering and the reference docs agree by construction.
Parsers raise :func:`k2k.config.errors.problems_error` with the house-style text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

from k2k.config.durations import EXAMPLE, format_duration, parse_duration
from k2k.config.errors import Problem, describe, problems_error
from k2k.config.hints import FieldDoc
from k2k.config.secrets import hide_secrets, is_secret_key

__all__ = [
    "Count",
    "Duration",
    "Flag",
    "FreeMapping",
    "StrMap",
    "TopicName",
    "check_topic_name",
    "duration_value",
    "parse_flag",
    "regex_or_names",
    "scalar_text",
]

FLAG_VALUES = ("enabled", "disabled")
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
TOPIC_NAME_RULE = "a Kafka topic name: 1 to 249 of a-z A-Z 0-9 . _ -, not '.' or '..'"


def regex_or_names(
    value: Any, expected: str, name_problem: Callable[[Any], str | None]
) -> str | list[str]:
    """A selection (topics, groups): a non-empty regular expression, or a non-empty list of
    names each of which ``name_problem`` accepts (returns None for). Problems name the
    offending entry; ``expected`` says what the selection should be.

    >>> regex_or_names("a.*", "x", lambda n: None), regex_or_names(["a"], "x", lambda n: None)
    ('a.*', ['a'])
    """
    if isinstance(value, str):
        if not value:
            raise problems_error([((), describe("empty", got=value, expected=expected))])
        try:
            re.compile(value)
        except re.error as exc:
            what = f"invalid regular expression ({exc})"
            raise problems_error([((), describe(what, got=value, expected=expected))]) from None
        return value
    if isinstance(value, list) and value:
        problems: list[Problem] = [
            ((index,), problem)
            for index, name in enumerate(value)
            if (problem := name_problem(name)) is not None
        ]
        if problems:
            raise problems_error(problems)
        return list(value)
    raise problems_error([((), describe("wrong type", got=value, expected=expected))])


def scalar_text(value: Any) -> str | None:
    """The string form of a YAML scalar as Kafka and Spark expect it; None if not a scalar.

    >>> scalar_text(True), scalar_text(5), scalar_text("x"), scalar_text([1])
    ('true', '5', 'x', None)
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


def parse_flag(value: Any) -> bool:
    """``enabled``/``disabled`` (any case) or a YAML boolean.

    >>> parse_flag("Enabled"), parse_flag(False)
    (True, False)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in FLAG_VALUES:
        return value.strip().lower() == "enabled"
    raise problems_error(
        [((), describe("invalid value", got=value, expected="one of: enabled, disabled"))]
    )


Flag = Annotated[
    bool,
    BeforeValidator(parse_flag),
    PlainSerializer(lambda on: "enabled" if on else "disabled", return_type=str),
    FieldDoc("enabled | disabled", "one of: enabled, disabled"),
]


def _no_bool(value: Any) -> Any:
    # pydantic reads `true` as 1; a count written as a YAML boolean is a mistake, not a number.
    if isinstance(value, bool):
        raise problems_error([((), describe("wrong type", got=value, expected="a whole number"))])
    return value


Count = Annotated[int, BeforeValidator(_no_bool)]


def duration_value(value: Any) -> timedelta:
    """A duration from YAML (``"2 seconds"``); raises the house-style problem otherwise."""
    if isinstance(value, timedelta):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = parse_duration(value)
        except ValueError as exc:
            raise problems_error([((), describe(str(exc), got=value, expected=EXAMPLE))]) from None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        reason = "a bare number has no unit"
        raise problems_error([((), describe(reason, got=value, expected=EXAMPLE))])
    else:
        raise problems_error([((), describe("not a duration", got=value, expected=EXAMPLE))])
    if parsed <= timedelta(0):
        raise problems_error(
            [((), describe("must be longer than zero", got=value, expected=EXAMPLE))]
        )
    return parsed


Duration = Annotated[
    timedelta,
    BeforeValidator(duration_value),
    PlainSerializer(format_duration, return_type=str),
    FieldDoc("duration", EXAMPLE),
]


def check_topic_name(value: Any) -> str | None:
    """The problem with ``value`` as a Kafka topic name, or None when it is valid.

    >>> check_topic_name("orders.eu") is None
    True
    >>> check_topic_name("a b").split(";")[0]
    "invalid topic name, got 'a b'"
    """
    if not isinstance(value, str):
        return describe("wrong type", got=value, expected=TOPIC_NAME_RULE)
    if not _TOPIC_NAME.fullmatch(value) or value in (".", ".."):
        return describe("invalid topic name", got=value, expected=TOPIC_NAME_RULE)
    return None


def _topic_name(value: Any) -> str:
    problem = check_topic_name(value)
    if problem is not None:
        raise problems_error([((), problem)])
    return value


TopicName = Annotated[str, BeforeValidator(_topic_name), FieldDoc("topic name", TOPIC_NAME_RULE)]


def _string_map(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        expected = "a mapping of names to values"
        raise problems_error([((), describe("wrong type", got=value, expected=expected))])
    result: dict[str, str] = {}
    problems: list[Problem] = []
    for key, item in value.items():
        text = scalar_text(item)
        if not isinstance(key, str):
            problems.append(((str(key),), describe("key is not a string", got=key)))
        elif text is None:
            expected = "a string, number or boolean"
            got = describe("wrong type", got=item, expected=expected, secret=is_secret_key(key))
            problems.append(((key,), got))
        else:
            result[key] = text
    if problems:
        raise problems_error(problems)
    return result


StrMap = Annotated[
    dict[str, str],
    BeforeValidator(_string_map),
    FieldDoc("map of string to string", "a mapping of names to string, number or boolean values"),
]


def _free_mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise problems_error([((), describe("wrong type", got=value, expected="a mapping"))])
    return hide_secrets(dict(value))


FreeMapping = Annotated[
    dict[str, Any],
    BeforeValidator(_free_mapping),
    FieldDoc("mapping", "a mapping (key: value lines)"),
]
