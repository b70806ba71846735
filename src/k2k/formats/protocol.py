"""Kafka's protocol encoding of primitive fields, as MirrorMaker 2's records use it.

MM2 writes its heartbeats and checkpoints with Kafka's internal ``Struct`` encoding, not
JSON: ``STRING`` is an int16 big-endian byte length then UTF-8 bytes (non-nullable, at most
32767 bytes); ``INT16``, ``INT32`` and ``INT64`` are big-endian. Readers raise
:class:`struct.error` or :class:`UnicodeDecodeError` on bytes that are not such fields; the
record types turn those into errors naming the record.

>>> write_string("A"), read_string(b"\\x00\\x01Arest")
(b'\\x00\\x01A', ('A', b'rest'))
"""

from __future__ import annotations

import struct

__all__ = ["INT16", "INT32", "INT64", "read_string", "write_string"]

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")


def write_string(text: str) -> bytes:
    """``text`` as a protocol STRING; raises ValueError past 32767 bytes (MM2 could not
    read it: its length would not fit the int16)."""
    raw = text.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"{len(raw)} bytes do not fit a protocol STRING (at most 32767)")
    return INT16.pack(len(raw)) + raw


def read_string(buf: bytes) -> tuple[str, bytes]:
    """One protocol STRING from the start of ``buf``, and the bytes after it."""
    (length,) = INT16.unpack_from(buf)
    end = INT16.size + length
    if length < 0 or len(buf) < end:
        raise struct.error(f"string of {length} bytes in {len(buf) - INT16.size}")
    return buf[INT16.size : end].decode(), buf[end:]
