"""MirrorMaker 2's heartbeat records (the ``heartbeats`` topic), in MM2's own format.

Not a k2k format: MM2's clients decode these records (``Heartbeat.deserializeRecord``), so
the bytes follow MM2's ``Heartbeat`` exactly, in Kafka's protocol encoding (``STRING``: int16
big-endian length, then UTF-8; ``INT16``/``INT64``: big-endian):

* key: ``sourceClusterAlias: STRING``, ``targetClusterAlias: STRING``;
* value: a header ``version: INT16`` (0), then version 0's ``timestamp: INT64`` (epoch ms).

``docs/formats.md`` (section Heartbeats) describes the same fields.

>>> beat = Heartbeat("A", "B", 1700000000000)
>>> beat
Heartbeat(A -> B at 1700000000000)
>>> key, value = beat.encode()
>>> key.hex(), value.hex()
('000141000142', '00000000018bcfe56800')
>>> Heartbeat.decode(key, value, "heartbeats", 0, 7) == beat
True
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from k2k.errors import ControlRecordError
from k2k.formats.codec import locator
from k2k.formats.protocol import INT16, INT64, read_string, write_string

__all__ = ["Heartbeat"]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One heartbeat: the flow ``source_alias -> target_alias`` was alive at
    ``timestamp_ms``. The key is the compaction identity: one heartbeat per flow survives."""

    VERSION: ClassVar[int] = 0

    source_alias: str
    target_alias: str
    timestamp_ms: int

    def __repr__(self) -> str:
        return f"Heartbeat({self.source_alias} -> {self.target_alias} at {self.timestamp_ms})"

    def encode(self) -> tuple[bytes, bytes]:
        """The record's key and value bytes."""
        key = write_string(self.source_alias) + write_string(self.target_alias)
        return key, INT16.pack(self.VERSION) + INT64.pack(self.timestamp_ms)

    @classmethod
    def decode(
        cls, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int
    ) -> Heartbeat:
        """The heartbeat in a record of ``topic[partition]@offset``; raises
        :class:`~k2k.errors.ControlRecordError` naming it for bytes that are not one, or an
        unknown version.

        >>> Heartbeat.decode(b"\\x00\\x01A\\x00\\x01B", b"\\x00\\x01", "heartbeats", 0, 3)
        Traceback (most recent call last):
        ...
        k2k.errors.ControlRecordError: heartbeats[0]@3: heartbeat value version 1 is unknown (this k2k reads version 0)
        """
        where = locator(topic, partition, offset)
        if key is None or value is None:
            raise ControlRecordError(f"{where}: heartbeat key or value is null")
        try:
            source, rest = read_string(key)
            target, rest = read_string(rest)
            (version,) = INT16.unpack_from(value)
        except (struct.error, UnicodeDecodeError) as exc:
            raise ControlRecordError(f"{where}: not a heartbeat record ({exc})") from None
        if version != cls.VERSION:
            raise ControlRecordError(
                f"{where}: heartbeat value version {version} is unknown "
                f"(this k2k reads version {cls.VERSION})"
            )
        if rest or len(value) != INT16.size + INT64.size:
            raise ControlRecordError(f"{where}: not a heartbeat record (wrong length)")
        (timestamp_ms,) = INT64.unpack_from(value, INT16.size)
        return cls(source, target, timestamp_ms)
