"""Progress records of the commit topic: how far each source partition has been replicated.

One compacted key per (commit group, source topic, source partition); the value holds the
next source offset to read. ``docs/formats.md`` describes the same fields for other tools.

>>> rec = ProgressRecord("orders-dr", "orders", 3, 42, "orders-dr", 1700000000000, "host-a")
>>> rec
ProgressRecord(orders-dr: orders[3] -> next offset 42, by orders-dr at 1700000000000)
>>> rec.key
ProgressKey(orders-dr: orders[3])
>>> rec.encode_value()
b'{"committedAt":1700000000000,"offset":42,"owner":"host-a","pipeline":"orders-dr","v":1}'
>>> ProgressRecord.decode(*rec.encode(), "__k2k_consumer-offsets", 0, 7) == rec
True

Since the source topic's id was added (optional, so records without it still decode):

>>> rec = ProgressRecord("dr", "orders", 0, 5, "dr", 1700000000000, "a", "Sx1vT5XqQ2aJ0e1b6nWz9g")
>>> rec.encode_value()
b'{"committedAt":1700000000000,"offset":5,"owner":"a","pipeline":"dr","topicId":"Sx1vT5XqQ2aJ0e1b6nWz9g","v":1}'
>>> ProgressRecord.decode(*rec.encode(), "__k2k_consumer-offsets", 0, 8).topic_id
'Sx1vT5XqQ2aJ0e1b6nWz9g'

Since foreign writes are counted (optional too, and written only when not zero):

>>> rec = ProgressRecord("dr", "orders", 0, 5, "dr", 1700000000000, foreign=3)
>>> rec.encode_value()
b'{"committedAt":1700000000000,"foreign":3,"offset":5,"pipeline":"dr","v":1}'
>>> ProgressRecord.decode(*rec.encode(), "__k2k_consumer-offsets", 0, 9).foreign
3
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from k2k.errors import ControlRecordError
from k2k.formats.codec import check_version, dumps_canonical, key_family, load_object, locator

__all__ = ["ProgressKey", "ProgressRecord", "ValueWriter"]

#: Encodes a progress value from (offset, committed-at milliseconds, foreign records, the
#: source end seen or None, the offset identical offsets ended at or None).
ValueWriter = Callable[[int, int, int, int | None, int | None], bytes]

# Records under a key of another version are never compacted away by ours: remove them.
_CLEAN = "upgrade k2k or clean the topic"


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
    def decode(cls, raw: bytes | None, where: str) -> ProgressKey:
        """Decode the key read at ``where`` (``topic[partition]@offset``, named in errors)."""
        key = cls.decode_shared(raw, where)
        if key is None:
            raise ControlRecordError(f"{where}: an assignment record's key, not a progress key")
        return key

    @classmethod
    def decode_shared(cls, raw: bytes | None, where: str) -> ProgressKey | None:
        """Like :meth:`decode`, for a commit topic that may also hold assignment records
        (:func:`~k2k.formats.codec.key_family`): None for an assignment record's key.

        >>> ProgressKey.decode_shared(b'{"group":"g","k":1,"kind":"member","member":"m"}', "t[0]@1")
        """
        obj = load_object(raw, "key", where)
        if key_family(obj) == "assignment":
            return None
        check_version(obj.get("k"), cls.VERSION, "progress key", where, _CLEAN)
        try:
            return cls(str(obj["group"]), str(obj["topic"]), int(obj["partition"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlRecordError(f"{where}: malformed progress key ({exc!r})") from None

    @staticmethod
    def other_groups_filter(group: str) -> Callable[[bytes | None], bool]:
        """A test that tells, from the raw bytes alone, a key written for another commit
        group: keys are canonical JSON, whose first field is ``group``. A shared commit topic
        holds every pipeline's progress, and a reader decodes only its own group's records.
        Anything the test cannot be sure of (another layout, an escaped name, a second
        ``group`` field) is left to the full decode.

        >>> other = ProgressKey.other_groups_filter("orders-dr")
        >>> other(ProgressKey("billing", "t", 0).encode()), other(ProgressKey("orders-dr", "t", 0).encode())
        (True, False)
        >>> other(b'{"k":1,"group":"billing"}'), other(None), other(b'{"group":"orders-\\\\u0064r","k":1}')
        (False, False, False)
        """
        if json.dumps(group) != f'"{group}"':
            return lambda raw: False  # a name JSON escapes: leave every key to the decoder
        own = group.encode()
        head = b'{"group":"'
        start = len(head)

        def of_another_group(raw: bytes | None) -> bool:
            if raw is None or not raw.startswith(head):
                return False
            end = raw.find(b'"', start)
            name = raw[start:end]
            return (
                end > 0
                and raw[end + 1 : end + 2] == b","
                and name != own
                and b"\\" not in name
                and raw.count(b'"group"') == 1
            )

        return of_another_group

    def __repr__(self) -> str:
        return f"ProgressKey({self.group}: {self.topic}[{self.partition}])"


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
    #: The source topic's id when the record was written ("" when unknown): a topic deleted
    #: and created again under the same name has a new id, and this progress is not its.
    topic_id: str = ""
    #: Records found on the target partition this source partition replicates to that the
    #: pipeline did not write (docs/operations.md#foreign-writes-on-the-target), counted
    #: since the partition was first replicated; 0 when none (or from older writers).
    foreign: int = 0
    #: The source partition's end offset the runner had seen when it wrote the record (its
    #: consumer's last stable offset from the last fetch); None when not known. What a
    #: failover reports as known not replicated is ``end - offset``.
    end: int | None = None
    #: ``offsets: identical``: the source offset from which this partition's target offsets
    #: are no longer its source offsets (``errorHandling.onOffsetGap: map``), translated by
    #: offset mappings from there; None while they are identical (or for other pipelines).
    mapped_from: int | None = None

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
        if self.topic_id:
            value["topicId"] = self.topic_id
        if self.foreign:
            value["foreign"] = self.foreign
        if self.end is not None:
            value["end"] = self.end
        if self.mapped_from is not None:
            value["mappedFrom"] = self.mapped_from
        return dumps_canonical(value)

    @classmethod
    def value_writer(cls, pipeline: str, owner: str = "", topic_id: str = "") -> ValueWriter:
        """A writer of the values of one partition's progress records: the same bytes as
        :meth:`encode_value`, with only the offset, the time, the foreign records and the
        source end filled in per record.

        A runner writes a progress record per partition at every commit point, so the fields
        that never change within a lease are encoded once. Canonical JSON sorts the keys, and
        ``committedAt``, ``end``, ``foreign``, ``mappedFrom`` and ``offset`` sort before
        every other field:

        >>> write = ProgressRecord.value_writer("dr", "a", "Sx1vT5XqQ2aJ0e1b6nWz9g")
        >>> write(5, 1700000000000, 0, None, None) == ProgressRecord(
        ...     "dr", "orders", 0, 5, "dr", 1700000000000, "a", "Sx1vT5XqQ2aJ0e1b6nWz9g"
        ... ).encode_value()
        True
        >>> write(5, 1, 2, 9, 4) == ProgressRecord(
        ...     "dr", "orders", 0, 5, "dr", 1, "a", "Sx1vT5XqQ2aJ0e1b6nWz9g", 2, 9, 4
        ... ).encode_value()
        True
        >>> ProgressRecord.value_writer("dr")(7, 1, 0, 8, None)
        b'{"committedAt":1,"end":8,"offset":7,"pipeline":"dr","v":1}'
        """
        fixed = cls("", "", 0, 0, pipeline, 0, owner, topic_id).encode_value()
        head = b'{"committedAt":0,"offset":0,'
        assert fixed.startswith(head), "committedAt and offset must sort first"
        rest = b'"offset":%d,' + fixed[len(head) :].replace(b"%", b"%%")

        def write(
            offset: int, committed_at_ms: int, foreign: int, end: int | None, mapped: int | None
        ) -> bytes:
            out = b'{"committedAt":%d,' % committed_at_ms
            if end is not None:
                out += b'"end":%d,' % end
            if foreign:
                out += b'"foreign":%d,' % foreign
            if mapped is not None:
                out += b'"mappedFrom":%d,' % mapped
            return out + rest % offset

        return write

    @classmethod
    def decode(
        cls, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int
    ) -> ProgressRecord:
        """Decode one record read at ``topic[partition]@offset`` (the locator in errors)."""
        where = locator(topic, partition, offset)
        return cls.decode_value(ProgressKey.decode(key, where), value, where)

    @classmethod
    def decode_value(cls, key: ProgressKey, value: bytes | None, where: str) -> ProgressRecord:
        """The record from its decoded ``key`` and its value read at ``where`` (readers that
        look at the key first, e.g. to skip other commit groups, use this)."""
        obj = load_object(value, "value", where)
        check_version(obj.get("v"), cls.VERSION, "progress value", where, "upgrade k2k")
        try:
            return cls(
                key.group,
                key.topic,
                key.partition,
                int(obj["offset"]),
                str(obj["pipeline"]),
                int(obj["committedAt"]),
                str(obj.get("owner", "")),
                str(obj.get("topicId", "")),
                int(obj.get("foreign", 0)),
                None if obj.get("end") is None else int(obj["end"]),
                None if obj.get("mappedFrom") is None else int(obj["mappedFrom"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlRecordError(f"{where}: malformed progress value ({exc!r})") from None

    def __repr__(self) -> str:
        return (
            f"ProgressRecord({self.group}: {self.topic}[{self.partition}] -> next offset "
            f"{self.offset}, by {self.pipeline} at {self.committed_at_ms})"
        )
