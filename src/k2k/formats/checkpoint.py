"""MirrorMaker 2's checkpoint records (``<source alias>.checkpoints.internal``), in MM2's
own format.

Not a k2k format: MM2's client (``MirrorClient.remoteConsumerOffsets``, used by
``RemoteClusterUtils.translateOffsets``) decodes these records with ``Checkpoint.
deserializeRecord``, so the bytes follow MM2's ``Checkpoint`` exactly, in Kafka's protocol
encoding (:mod:`k2k.formats.protocol`):

* key: ``group: STRING``, ``topic: STRING``, ``partition: INT32``, where topic and partition
  are the *target* partition the offset is valid on (MM2's client uses them as they are);
* value: a header ``version: INT16`` (0), then version 0's ``upstreamOffset: INT64`` (the
  group's committed offset on the source), ``offset: INT64`` (the translated offset on the
  target) and ``metadata: STRING`` (the group's commit metadata, ``""`` when none).

The key is the compaction identity: one checkpoint per (group, target partition) survives.
``docs/formats.md`` (section Checkpoints) describes the same fields.

>>> c = Checkpoint("grp", "A.orders", 3, 1200, 1151, "")
>>> c
Checkpoint(grp A.orders[3]: 1200 -> 1151)
>>> key, value = c.encode()
>>> key.hex(), value.hex()
('00036772700008412e6f726465727300000003', '000000000000000004b0000000000000047f0000')
>>> Checkpoint.decode(key, value, "A.checkpoints.internal", 0, 7) == c
True
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from k2k.errors import ControlRecordError
from k2k.formats.codec import locator
from k2k.formats.protocol import INT16, INT32, INT64, read_string, write_string

__all__ = ["Checkpoint"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where consumer group ``group`` continues on target partition ``topic[partition]``:
    at ``downstream_offset``, translated from its committed ``upstream_offset`` on the
    source."""

    VERSION: ClassVar[int] = 0

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def __repr__(self) -> str:
        return (
            f"Checkpoint({self.group} {self.topic}[{self.partition}]: "
            f"{self.upstream_offset} -> {self.downstream_offset})"
        )

    def encode(self) -> tuple[bytes, bytes]:
        """The record's key and value bytes."""
        key = write_string(self.group) + write_string(self.topic) + INT32.pack(self.partition)
        value = (
            INT16.pack(self.VERSION)
            + INT64.pack(self.upstream_offset)
            + INT64.pack(self.downstream_offset)
            + write_string(self.metadata)
        )
        return key, value

    @classmethod
    def decode(
        cls, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int
    ) -> Checkpoint:
        """The checkpoint in a record of ``topic[partition]@offset``; raises
        :class:`~k2k.errors.ControlRecordError` naming it for bytes that are not one, or an
        unknown version.

        >>> Checkpoint.decode(b"\\x00\\x01g\\x00\\x01t\\x00\\x00\\x00\\x00", b"\\x00\\x01",
        ...                   "A.checkpoints.internal", 0, 3)
        Traceback (most recent call last):
        ...
        k2k.errors.ControlRecordError: A.checkpoints.internal[0]@3: checkpoint value version 1 is unknown (this k2k reads version 0)
        """
        where = locator(topic, partition, offset)
        if key is None or value is None:
            raise ControlRecordError(f"{where}: checkpoint key or value is null")
        try:
            group, rest = read_string(key)
            target_topic, rest = read_string(rest)
            (target_partition,) = INT32.unpack(rest)
            (version,) = INT16.unpack_from(value)
            if version != cls.VERSION:
                raise ControlRecordError(
                    f"{where}: checkpoint value version {version} is unknown "
                    f"(this k2k reads version {cls.VERSION})"
                )
            upstream, downstream = struct.unpack_from(">qq", value, INT16.size)
            metadata, tail = read_string(value[INT16.size + 2 * INT64.size :])
        except (struct.error, UnicodeDecodeError) as exc:
            raise ControlRecordError(f"{where}: not a checkpoint record ({exc})") from None
        if tail:
            raise ControlRecordError(f"{where}: not a checkpoint record (wrong length)")
        return cls(group, target_topic, target_partition, upstream, downstream, metadata)
