"""Assignment records: which k2k instance may write which source partition.

The assignment topic holds four kinds of records of one commit group, told apart by the
key's ``kind``: a *member* record per running k2k instance (its heartbeat), an *owner*
record per source partition (the newest claim: which member and transactional id may write
it), and a *release* record per source partition (the claim its owner gave up). Owner and
release records have separate keys on purpose: a late release can never overwrite a newer
claim in the compacted log; a release counts only if it names the current claim. The
fourth, the *cut-over* record (:mod:`k2k.formats.cutover`), tells members that
``k2k cutover`` moved the pipeline's groups to the target.

Keys carry ``k`` (:attr:`KEY_VERSION`, shared by every kind because the kind is read
from the key) and values carry ``v`` (each class's ``VERSION``). ``docs/formats.md``
describes the same fields for other tools.

>>> rec = ReleaseRecord("orders-dr", "orders", 3, "1700000000000-1a2b3c4d/7", 1700000300000)
>>> rec
ReleaseRecord(orders-dr: orders[3] released 1700000000000-1a2b3c4d/7 at 1700000300000)
>>> key, value = rec.encode()
>>> key
b'{"group":"orders-dr","k":1,"kind":"release","partition":3,"topic":"orders"}'
>>> value
b'{"at":1700000300000,"claim":"1700000000000-1a2b3c4d/7","v":1}'
>>> ReleaseRecord.decode(key, value, "__k2k_assignment[0]@4") == rec
True
>>> decode_assignment(key, None, "__k2k_assignment[0]@5")  # a tombstone
('orders-dr', None)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

from k2k.errors import ControlRecordError
from k2k.formats.assignment_base import KEY_VERSION, AssignmentFormat
from k2k.formats.codec import (
    check_version,
    key_family,
    load_object,
    locator,
    unreadable,
)
from k2k.formats.cutover import CutoverRecord

if TYPE_CHECKING:
    from confluent_kafka import Message

__all__ = [
    "KEY_VERSION",
    "AssignmentRecord",
    "MemberRecord",
    "OwnerRecord",
    "ReleaseRecord",
    "decode_assignment",
    "read_assignment",
]


@dataclass(frozen=True, slots=True)
class MemberRecord(AssignmentFormat):
    """A k2k instance of the pipeline, written by its driver every heartbeat interval.

    ``state`` is ``alive`` or ``left`` (clean stop: its partitions may be taken at once).
    ``session`` changes at every start, so a restarted instance with a fixed ``member`` name
    is told apart from its predecessor. Liveness is judged from the record timestamps.

    >>> MemberRecord("orders-dr", "host-b", "1700000000000-1a2b3c4d", "alive", True, "h", 9)
    MemberRecord(orders-dr: host-b alive standby, session 1700000000000-1a2b3c4d on h, at 9)
    """

    KIND: ClassVar[str] = "member"
    VERSION: ClassVar[int] = 1

    group: str
    member: str
    session: str
    state: str
    standby: bool
    host: str
    at_ms: int

    def encode(self) -> tuple[bytes, bytes]:
        return self._key(self.group, member=self.member), self._value(
            session=self.session,
            state=self.state,
            standby=self.standby,
            host=self.host,
            at=self.at_ms,
        )

    @classmethod
    def _from_fields(cls, key: dict[str, Any], value: dict[str, Any]) -> Self:
        return cls(
            str(key.get("group")),
            str(key["member"]),
            str(value["session"]),
            str(value["state"]),
            bool(value["standby"]),
            str(value.get("host", "")),
            int(value["at"]),
        )

    def __repr__(self) -> str:
        standby = " standby" if self.standby else ""
        return (
            f"MemberRecord({self.group}: {self.member} {self.state}{standby}, session "
            f"{self.session} on {self.host}, at {self.at_ms})"
        )


@dataclass(frozen=True, slots=True)
class OwnerRecord(AssignmentFormat):
    """The newest claim on one source partition: ``member`` writes it through
    ``transactional_id`` (empty at-least-once). ``claim`` identifies this claim.

    >>> OwnerRecord("g", "orders", 3, "host-a", "s1", "", "s1/7", 12)
    OwnerRecord(g: orders[3] claimed by host-a (session s1) as s1/7, at-least-once, at 12)
    """

    KIND: ClassVar[str] = "owner"
    VERSION: ClassVar[int] = 1

    group: str
    topic: str
    partition: int
    member: str
    session: str
    transactional_id: str
    claim: str
    at_ms: int

    def encode(self) -> tuple[bytes, bytes]:
        return self.key_bytes(self.group, self.topic, self.partition), self._value(
            member=self.member,
            session=self.session,
            transactionalId=self.transactional_id,
            claim=self.claim,
            at=self.at_ms,
        )

    @classmethod
    def key_bytes(cls, group: str, topic: str, partition: int) -> bytes:
        """The key of the claims on ``topic[partition]`` (readers match it byte for byte)."""
        return cls._key(group, topic=topic, partition=partition)

    @classmethod
    def _from_fields(cls, key: dict[str, Any], value: dict[str, Any]) -> Self:
        return cls(
            str(key.get("group")),
            str(key["topic"]),
            int(key["partition"]),
            str(value["member"]),
            str(value["session"]),
            str(value["transactionalId"]),
            str(value["claim"]),
            int(value["at"]),
        )

    def __repr__(self) -> str:
        via = f"via {self.transactional_id}" if self.transactional_id else "at-least-once"
        return (
            f"OwnerRecord({self.group}: {self.topic}[{self.partition}] claimed by "
            f"{self.member} (session {self.session}) as {self.claim}, {via}, at {self.at_ms})"
        )


@dataclass(frozen=True, slots=True)
class ReleaseRecord(AssignmentFormat):
    """The owner of ``claim`` stopped writing the partition after its last commit."""

    KIND: ClassVar[str] = "release"
    VERSION: ClassVar[int] = 1

    group: str
    topic: str
    partition: int
    claim: str
    at_ms: int

    def encode(self) -> tuple[bytes, bytes]:
        key = self._key(self.group, topic=self.topic, partition=self.partition)
        return key, self._value(claim=self.claim, at=self.at_ms)

    @classmethod
    def _from_fields(cls, key: dict[str, Any], value: dict[str, Any]) -> Self:
        return cls(
            str(key.get("group")),
            str(key["topic"]),
            int(key["partition"]),
            str(value["claim"]),
            int(value["at"]),
        )

    def __repr__(self) -> str:
        return (
            f"ReleaseRecord({self.group}: {self.topic}[{self.partition}] released "
            f"{self.claim} at {self.at_ms})"
        )


AssignmentRecord = MemberRecord | OwnerRecord | ReleaseRecord | CutoverRecord
_Kind = type[MemberRecord] | type[OwnerRecord] | type[ReleaseRecord] | type[CutoverRecord]

#: The record class of each key ``kind``.
_KINDS: dict[str, _Kind] = {
    cls.KIND: cls for cls in (MemberRecord, OwnerRecord, ReleaseRecord, CutoverRecord)
}


def _read_key(key: bytes | None, where: str) -> tuple[_Kind, dict[str, Any]]:
    """The record class the key names, and the decoded key."""
    k = load_object(key, "key", where)
    kind = k.get("kind")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ControlRecordError(
            f"{where}: unknown assignment key kind {kind!r} (version {k.get('k')!r}); this "
            f"k2k reads {'/'.join(_KINDS)} keys"
        )
    check_version(k.get("k"), KEY_VERSION, f"{cls.KIND} key", where, "upgrade k2k")
    return cls, k


def decode_assignment(
    key: bytes | None, value: bytes | None, where: str
) -> tuple[str, AssignmentRecord | None] | None:
    """Decode one assignment record read at ``where`` (``topic[partition]@offset``);
    returns (group, record), record None for a tombstone. Returns None for a progress
    record: the commit and assignment records may share one topic
    (:func:`~k2k.formats.codec.key_family`).

    >>> rec = ReleaseRecord("g", "orders", 2, "m1:7", 5)
    >>> decode_assignment(*rec.encode(), "t[0]@0") == ("g", rec)
    True
    >>> decode_assignment(b'{"group":"g","k":1,"partition":2,"topic":"orders"}', b"{}", "t[0]@1")
    """
    if key is not None and key_family(load_object(key, "key", where)) == "progress":
        return None
    cls, k = _read_key(key, where)
    group = str(k.get("group"))
    if value is None:
        return group, None
    return group, cls.parse(k, value, where)


def read_assignment(
    m: Message, policy: str, log: logging.Logger
) -> tuple[str, AssignmentRecord | None] | None:
    """Decode consumed assignment message ``m``; None when it is a progress record (a shared
    topic), or unreadable and ``policy`` (``onControlMessageDeserializationError``) is
    ``ignore``."""
    try:
        return decode_assignment(m.key(), m.value(), locator(m.topic(), m.partition(), m.offset()))
    except ControlRecordError as exc:
        unreadable(exc, policy, log)
        return None
