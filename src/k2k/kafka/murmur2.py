"""Kafka's murmur2 key hash: where the Java client's default partitioner puts a keyed record.

k2k uses it to place its own control records (progress and assignment keys) and to document
and test where ``partition: hash`` puts replicated records.
"""

from __future__ import annotations

__all__ = ["murmur2", "murmur2_partition"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed int.

    Used to document and verify where keyed records land; the producer itself places them
    (librdkafka's ``murmur2_random`` partitioner is the same function).

    >>> murmur2(b"21")
    -973932308
    >>> murmur2(b"abc")
    479470107
    """
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    tail = data[n4 * 4 :]
    if rest == 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner picks for a non-null ``key``.

    >>> murmur2_partition(b"21", 10)
    0
    """
    return (murmur2(key) & 0x7FFFFFFF) % partitions
