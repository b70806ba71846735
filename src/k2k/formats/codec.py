"""The JSON codec shared by every control-record format, and the bad-record policy.

Keys are canonical JSON (sorted keys, no spaces, UTF-8) because log compaction compares key
*bytes*: two writers must never produce two spellings of one key. Values use the same
spelling so that a record's bytes depend on its fields alone.

>>> dumps_canonical({"topic": "orders", "k": 1})
b'{"k":1,"topic":"orders"}'
>>> load_object(b'{"v": 1}', "value", locator("ctl", 0, 5))
{'v': 1}
>>> load_object(b"[1]", "value", "ctl[0]@5")
Traceback (most recent call last):
...
k2k.errors.ControlRecordError: ctl[0]@5: value is not a JSON object, got [1]
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

from k2k.errors import ControlRecordError

__all__ = [
    "check_version",
    "dumps_canonical",
    "key_family",
    "load_object",
    "locator",
    "unreadable",
]


def dumps_canonical(obj: dict[str, Any]) -> bytes:
    """Serialise ``obj`` as canonical JSON bytes: sorted keys, no spaces, UTF-8.

    >>> dumps_canonical({"b": 1, "a": "x"})
    b'{"a":"x","b":1}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def locator(topic: str | None, partition: int | None, offset: int | None) -> str:
    """Where a record was read, as every error about it names it.

    >>> locator("__k2k_assignment", 2, 17)
    '__k2k_assignment[2]@17'
    """
    return f"{topic}[{partition}]@{offset}"


def load_object(raw: bytes | None, what: str, where: str) -> dict[str, Any]:
    """Parse ``raw`` (the record's ``what``: key or value) as one JSON object.

    Raises :class:`ControlRecordError` naming ``where`` when it is null, not JSON, or not an
    object.
    """
    if raw is None:
        raise ControlRecordError(f"{where}: {what} is null")
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlRecordError(f"{where}: {what} is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ControlRecordError(f"{where}: {what} is not a JSON object, got {obj!r:.80}")
    return obj


def key_family(key: dict[str, Any]) -> Literal["progress", "assignment"] | None:
    """Which record family a decoded control-record key belongs to.

    The commit and assignment records may share one topic (``coordination.commit.topic`` ==
    ``coordination.assignment.topic``, as K2K allows), so each reader must recognise the other
    family's records and skip them. The key layouts are disjoint: an assignment key always
    holds ``kind``; a progress key never does and holds ``topic`` and ``partition``. None: the
    key is of neither family (the reader reports it as unreadable).

    >>> key_family({"k": 1, "group": "g", "topic": "orders", "partition": 3})
    'progress'
    >>> key_family({"k": 1, "kind": "member", "group": "g", "member": "m"})
    'assignment'
    >>> key_family({"k": 1}) is None
    True
    """
    if "kind" in key:
        return "assignment"
    if "topic" in key and "partition" in key:
        return "progress"
    return None


def check_version(found: object, expected: int, what: str, where: str, advice: str) -> None:
    """Refuse a record whose format version is not the one this k2k reads.

    >>> check_version(2, 1, "owner value", "t[0]@3", "upgrade k2k")
    Traceback (most recent call last):
    ...
    k2k.errors.ControlRecordError: t[0]@3: unknown owner value version 2 (this k2k reads \
version 1); upgrade k2k
    """
    if found != expected:
        raise ControlRecordError(
            f"{where}: unknown {what} version {found!r} (this k2k reads version {expected}); "
            f"{advice}"
        )


def unreadable(exc: ControlRecordError, policy: str, log: logging.Logger) -> None:
    """``errorHandling.onControlMessageDeserializationError`` for one undecodable record:
    ``fail`` raises naming the policy, ``ignore`` logs and returns (the caller skips it)."""
    if policy == "fail":
        raise ControlRecordError(
            f"{exc} (errorHandling.onControlMessageDeserializationError: fail)"
        ) from None
    log.warning(
        "skipping unreadable control record "
        "(errorHandling.onControlMessageDeserializationError: ignore): %s",
        exc,
    )
