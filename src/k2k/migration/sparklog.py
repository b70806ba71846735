"""A Spark Structured Streaming checkpoint's offset log: the Kafka positions a restarted
query reads, parsed and written back.

``offsets/<batch>`` holds ``v1``, the batch's metadata (one JSON line), then one line per
source of the query, in the query's order: ``{"topic":{"partition":offset}}`` for a Kafka
source, another JSON for other sources, ``-`` for one without an offset yet.
``commits/<batch>`` exists once the batch finished. A restarted query starts after the
newest committed batch from that batch's offsets, or runs an uncommitted newest batch again
from the offsets of the batch before it: those one or two files are what a query moving to
another cluster needs translated. Hadoop's local file system keeps a checksum,
``.<name>.crc``, beside each file; a rewritten file gets a new one (docs/offset-mapping.md).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from k2k.errors import ConfigError
from k2k.kafka import TP

__all__ = ["OffsetFile", "files_to_translate", "kafka_offsets", "write_with_checksum"]

#: The offset log version Spark 3 and 4 write.
VERSION = "v1"
#: Bytes covered by each CRC-32 of a Hadoop checksum file.
_CRC_CHUNK = 512


@dataclass(frozen=True)
class OffsetFile:
    """One batch's ``offsets/<batch>`` file."""

    path: Path
    batch: int
    metadata: str
    #: One line per source of the query, as Spark wrote it.
    sources: tuple[str, ...]

    @classmethod
    def read(cls, path: Path) -> OffsetFile:
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) < 2 or lines[0] != VERSION:
            found = f"starts with {lines[0]!r}" if lines else "is empty"
            raise ConfigError(
                f"--spark: {path}: {found}; expected a Structured Streaming "
                f"offset log file starting with {VERSION!r} (Spark 3 or 4)"
            )
        return cls(path, int(path.name), lines[1], tuple(lines[2:]))

    def kafka(self) -> dict[int, dict[TP, int]]:
        """The Kafka sources' positions, by the source's place among the query's sources."""
        return {i: found for i, line in enumerate(self.sources) if (found := kafka_offsets(line))}

    def text(self, replaced: dict[int, dict[TP, int]]) -> str:
        """The file with the Kafka sources of ``replaced`` holding those positions."""
        sources = [
            _kafka_line(replaced[i]) if i in replaced else line
            for i, line in enumerate(self.sources)
        ]
        return "\n".join([VERSION, self.metadata, *sources])


def kafka_offsets(line: str) -> dict[TP, int] | None:
    """A Kafka source's positions from its offset-log line; None for another source.

    >>> kafka_offsets('{"orders":{"1":7,"0":5}}')
    {('orders', 1): 7, ('orders', 0): 5}
    >>> kafka_offsets('{"logOffset":3}'), kafka_offsets("-")
    (None, None)
    """
    try:
        parsed = json.loads(line)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not parsed:
        return None
    out: dict[TP, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            return None
        for partition, offset in partitions.items():
            if not (partition.isdigit() and isinstance(offset, int)):
                return None
            out[(topic, int(partition))] = offset
    return out


def _kafka_line(offsets: dict[TP, int]) -> str:
    """A Kafka source's line as Spark writes it (topics, then partitions, in order).

    >>> _kafka_line({("b", 1): 4, ("a", 0): 2, ("b", 0): 3})
    '{"a":{"0":2},"b":{"0":3,"1":4}}'
    """
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(nested, separators=(",", ":"))


def files_to_translate(checkpoint: Path) -> list[OffsetFile]:
    """The offset files a restarted query reads: the newest batch's, and the one before it
    when the newest did not commit."""
    offsets = checkpoint / "offsets"
    batches = sorted(int(p.name) for p in _listing(offsets) if p.name.isdigit())
    if not batches:
        raise ConfigError(
            f"--spark: {checkpoint} has no batch in offsets/; expected the checkpoint "
            "directory of a Structured Streaming query that ran at least one batch (one "
            "that never did can simply start on the target)"
        )
    newest = batches[-1]
    chosen = [newest]
    if not (checkpoint / "commits" / str(newest)).exists() and newest - 1 in batches:
        chosen.insert(0, newest - 1)
    return [OffsetFile.read(offsets / str(b)) for b in chosen]


def _listing(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigError(f"--spark: cannot read {directory}: {exc.strerror}") from None


def write_with_checksum(path: Path, text: str) -> None:
    """Replace ``path`` (by a rename: a reader never sees half a file) and its Hadoop
    checksum file."""
    data = text.encode("utf-8")
    crc = path.with_name(f".{path.name}.crc")
    _replace(crc, hadoop_checksum(data))
    _replace(path, data)


def hadoop_checksum(data: bytes) -> bytes:
    """The ``.crc`` file Hadoop's local file system keeps for ``data``: a header, then the
    CRC-32 of every 512-byte chunk.

    >>> hadoop_checksum(b"v1")
    b'crc\\x00\\x00\\x00\\x02\\x00ib\\xcc\\xb5'
    """
    sums = b"".join(
        struct.pack(">I", zlib.crc32(data[i : i + _CRC_CHUNK]))
        for i in range(0, len(data), _CRC_CHUNK)
    )
    return b"crc\x00" + struct.pack(">i", _CRC_CHUNK) + sums


def _replace(path: Path, data: bytes) -> None:
    scratch = path.with_name(f".{path.name}.k2k-tmp")
    scratch.write_bytes(data)
    os.replace(scratch, path)
