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
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from k2k.errors import ControlRecordError

__all__ = [
    "AssignmentRecord",
    "MemberRecord",
    "OwnerRecord",
    "ProgressKey",
    "ProgressRecord",
    "ReleaseRecord",
    "decode_assignment",
    "dumps_canonical",
    "read_assignment",
    "unreadable",
]


def dumps_canonical(obj: dict[str, Any]) -> bytes:
    """Serialise ``obj`` as canonical JSON bytes: sorted keys, no spaces, UTF-8.

    >>> dumps_canonical({"b": 1, "a": "x"})
    b'{"a":"x","b":1}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


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


def read_assignment(
    m: Any, policy: str, log: logging.Logger
) -> tuple[str, AssignmentRecord | None] | None:
    """Decode consumed assignment message ``m``; None when it is unreadable and ``policy``
    (``onControlMessageDeserializationError``) is ``ignore``."""
    try:
        return decode_assignment(m.key(), m.value(), f"{m.topic()}[{m.partition()}]@{m.offset()}")
    except ControlRecordError as exc:
        unreadable(exc, policy, log)
        return None


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
    #: The assignment member that wrote the record ("" when unknown, e.g. older writers).
    owner: str = ""

    @property
    def key(self) -> ProgressKey:
        return ProgressKey(self.group, self.topic, self.partition)

    def encode(self) -> tuple[bytes, bytes]:
        return self.key.encode(), self.encode_value()

    def encode_value(self) -> bytes:
        """The value alone (writers that cache the key bytes of a partition use this)."""
        value: dict[str, Any] = {
            "v": self.VERSION,
            "offset": self.offset,
            "pipeline": self.pipeline,
            "committedAt": self.committed_at_ms,
        }
        if self.owner:
            value["owner"] = self.owner
        return dumps_canonical(value)

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
                str(obj.get("owner", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlRecordError(f"{locator}: malformed progress value ({exc!r})") from None

    def __repr__(self) -> str:
        return (
            f"ProgressRecord({self.group}: {self.topic}[{self.partition}] -> next offset "
            f"{self.offset}, by {self.pipeline} at {self.committed_at_ms})"
        )


# --- assignment records ------------------------------------------------------------------------
#
# The assignment topic holds three kinds of records of one commit group, told apart by the
# key's ``kind``: a *member* record per running k2k instance (its heartbeat), an *owner*
# record per source partition (the newest claim: which member and transactional id may
# write it), and a *release* record per source partition (the claim its owner gave up).
# Owner and release records have separate keys on purpose: a late release can never
# overwrite a newer claim in the compacted log; a release counts only if it names the
# current claim.


def _assignment_key(kind: str, group: str, **rest: Any) -> bytes:
    return dumps_canonical({"k": 1, "kind": kind, "group": group, **rest})


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """A k2k instance of the pipeline, written by its driver every heartbeat interval.

    ``state`` is ``alive`` or ``left`` (clean stop: its partitions may be taken at once).
    ``session`` changes at every start, so a restarted instance with a fixed ``member`` name
    is told apart from its predecessor. Liveness is judged from the record timestamps.
    """

    KIND: ClassVar[str] = "member"
    group: str
    member: str
    session: str
    state: str
    standby: bool
    host: str
    at_ms: int

    def encode(self) -> tuple[bytes, bytes]:
        key = _assignment_key(self.KIND, self.group, member=self.member)
        return key, dumps_canonical(
            {
                "v": 1,
                "session": self.session,
                "state": self.state,
                "standby": self.standby,
                "host": self.host,
                "at": self.at_ms,
            }
        )


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """The newest claim on one source partition: ``member`` writes it through
    ``transactional_id`` (empty at-least-once). ``claim`` identifies this claim."""

    KIND: ClassVar[str] = "owner"
    group: str
    topic: str
    partition: int
    member: str
    session: str
    transactional_id: str
    claim: str
    at_ms: int

    def encode(self) -> tuple[bytes, bytes]:
        return self.key_bytes(self.group, self.topic, self.partition), dumps_canonical(
            {
                "v": 1,
                "member": self.member,
                "session": self.session,
                "transactionalId": self.transactional_id,
                "claim": self.claim,
                "at": self.at_ms,
            }
        )

    @classmethod
    def key_bytes(cls, group: str, topic: str, partition: int) -> bytes:
        return _assignment_key(cls.KIND, group, topic=topic, partition=partition)


@dataclass(frozen=True, slots=True)
class ReleaseRecord:
    """The owner of ``claim`` stopped writing the partition after its last commit."""

    KIND: ClassVar[str] = "release"
    group: str
    topic: str
    partition: int
    claim: str
    at_ms: int

    def encode(self) -> tuple[bytes, bytes]:
        key = _assignment_key(self.KIND, self.group, topic=self.topic, partition=self.partition)
        return key, dumps_canonical({"v": 1, "claim": self.claim, "at": self.at_ms})


AssignmentRecord = MemberRecord | OwnerRecord | ReleaseRecord


def decode_assignment(
    key: bytes | None, value: bytes | None, locator: str
) -> tuple[str, AssignmentRecord | None]:
    """Decode one assignment record; returns (group, record), record None for a tombstone.

    >>> rec = ReleaseRecord("g", "orders", 2, "m1:7", 5)
    >>> decode_assignment(*rec.encode(), "t[0]@0") == ("g", rec)
    True
    """
    k = _load(key, "key", locator)
    if k.get("k") != 1 or k.get("kind") not in ("member", "owner", "release"):
        raise ControlRecordError(
            f"{locator}: unknown assignment key (version {k.get('k')!r}, kind "
            f"{k.get('kind')!r}); this k2k reads version 1 member/owner/release keys"
        )
    group = str(k.get("group"))
    if value is None:
        return group, None
    v = _load(value, "value", locator)
    if v.get("v") != 1:
        raise ControlRecordError(
            f"{locator}: unknown assignment value version {v.get('v')!r} (this k2k reads 1)"
        )
    try:
        kind = k["kind"]
        if kind == "member":
            return group, MemberRecord(
                group,
                str(k["member"]),
                str(v["session"]),
                str(v["state"]),
                bool(v["standby"]),
                str(v.get("host", "")),
                int(v["at"]),
            )
        if kind == "owner":
            return group, OwnerRecord(
                group,
                str(k["topic"]),
                int(k["partition"]),
                str(v["member"]),
                str(v["session"]),
                str(v["transactionalId"]),
                str(v["claim"]),
                int(v["at"]),
            )
        return group, ReleaseRecord(
            group, str(k["topic"]), int(k["partition"]), str(v["claim"]), int(v["at"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ControlRecordError(f"{locator}: malformed assignment record ({exc!r})") from None
