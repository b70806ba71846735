"""Versioned record formats of k2k's control topics.

Every control record is a frozen value type that owns its encoding: ``encode()`` returns the
Kafka key and value bytes, ``decode()`` turns them back, and unknown versions fail loudly with
the record's locator. The formats are documented field by field in ``docs/formats.md`` so that
other tools can read the topics; keys are canonical JSON (sorted keys, no spaces) because log
compaction compares key *bytes* and two writers must never produce two spellings of one key.

Example:

>>> rec = ProgressRecord(group="orders-dr", topic="orders", partition=3, offset=42,
...                      pipeline="orders-dr", committed_at_ms=1700000000000)
>>> key, value = rec.encode()
>>> key
b'{"group":"orders-dr","k":1,"partition":3,"topic":"orders"}'
>>> ProgressRecord.decode(key, value, "__k2k_consumer-offsets", 0, 7) == rec
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from k2k.errors import ControlRecordError

__all__ = ["ProgressKey", "ProgressRecord", "dumps_canonical"]


def dumps_canonical(obj: dict[str, Any]) -> bytes:
    """Serialise ``obj`` as canonical JSON bytes: sorted keys, no spaces, UTF-8.

    >>> dumps_canonical({"b": 1, "a": "x"})
    b'{"a":"x","b":1}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _load(raw: bytes | None, what: str, locator: str) -> dict[str, Any]:
    if raw is None:
        raise ControlRecordError(f"{locator}: {what} is null")
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlRecordError(f"{locator}: {what} is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ControlRecordError(f"{locator}: {what} is not a JSON object, got {obj!r:.80}")
    return obj


@dataclass(frozen=True, slots=True)
class ProgressKey:
    """Key of a progress record: one per (commit group, source topic, source partition).

    ``k`` is the key format's version; it is part of the compacted key on purpose, so a
    future key format can never be confused with this one.
    """

    VERSION: ClassVar[int] = 1

    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        return dumps_canonical(
            {
                "k": self.VERSION,
                "group": self.group,
                "topic": self.topic,
                "partition": self.partition,
            }
        )

    @classmethod
    def decode(cls, raw: bytes | None, locator: str) -> ProgressKey:
        obj = _load(raw, "key", locator)
        if obj.get("k") != cls.VERSION:
            raise ControlRecordError(
                f"{locator}: unknown progress key version {obj.get('k')!r} "
                f"(this k2k reads version {cls.VERSION}); upgrade k2k or clean the topic"
            )
        try:
            return cls(str(obj["group"]), str(obj["topic"]), int(obj["partition"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlRecordError(f"{locator}: malformed progress key ({exc!r})") from None


@dataclass(frozen=True, slots=True)
class ProgressRecord:
    """How far one source partition has been replicated by one commit group.

    ``offset`` is the next source offset to read (the Kafka convention for committed
    offsets): every record below it has been acknowledged by the target. It never moves
    backwards for a given key while one pipeline runs.
    """

    VERSION: ClassVar[int] = 1

    group: str
    topic: str
    partition: int
    offset: int
    pipeline: str
    committed_at_ms: int

    @property
    def key(self) -> ProgressKey:
        return ProgressKey(self.group, self.topic, self.partition)

    def encode(self) -> tuple[bytes, bytes]:
        return self.key.encode(), self.encode_value()

    def encode_value(self) -> bytes:
        """The value alone (writers that cache the key bytes of a partition use this)."""
        return dumps_canonical(
            {
                "v": self.VERSION,
                "offset": self.offset,
                "pipeline": self.pipeline,
                "committedAt": self.committed_at_ms,
            }
        )

    @classmethod
    def decode(
        cls, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int
    ) -> ProgressRecord:
        """Decode one record read at ``topic[partition]@offset`` (the locator in errors)."""
        locator = f"{topic}[{partition}]@{offset}"
        k = ProgressKey.decode(key, locator)
        obj = _load(value, "value", locator)
        if obj.get("v") != cls.VERSION:
            raise ControlRecordError(
                f"{locator}: unknown progress value version {obj.get('v')!r} "
                f"(this k2k reads version {cls.VERSION}); upgrade k2k"
            )
        try:
            return cls(
                k.group,
                k.topic,
                k.partition,
                int(obj["offset"]),
                str(obj["pipeline"]),
                int(obj["committedAt"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlRecordError(f"{locator}: malformed progress value ({exc!r})") from None

    def __repr__(self) -> str:
        return (
            f"ProgressRecord({self.group}: {self.topic}[{self.partition}] -> next offset "
            f"{self.offset}, by {self.pipeline} at {self.committed_at_ms})"
        )
