"""Versioned record formats of k2k's control topics.

Every control record is a frozen value type that owns its encoding: ``encode()`` returns the
Kafka key and value bytes, ``decode()`` turns them back, each class declares the ``VERSION``
it writes and reads, and unknown versions fail loudly with the record's locator
(``topic[partition]@offset``). The formats are documented field by field in
``docs/formats.md`` so that other tools can read the topics; this package imports neither
Spark nor the rest of k2k, so such tools can import it alone.

* :mod:`k2k.formats.codec`: canonical JSON and the bad-record policy;
* :mod:`k2k.formats.progress`: progress records of the commit topic;
* :mod:`k2k.formats.assignment`: member, owner, release and cut-over
  (:mod:`k2k.formats.cutover`) records of the assignment topic;
* :mod:`k2k.formats.offset_mapping`: offset-mapping records (one per replicated run);
* :mod:`k2k.formats.metrics`: metrics records (the ``kafka`` metrics exporter);
* :mod:`k2k.formats.heartbeat`: MirrorMaker 2's heartbeat records, in MM2's own format;
* :mod:`k2k.formats.checkpoint`: MirrorMaker 2's checkpoint records, in MM2's own format;
* :mod:`k2k.formats.protocol`: Kafka's protocol encoding of the fields MM2's records use.

Example:

>>> rec = ProgressRecord(group="orders-dr", topic="orders", partition=3, offset=42,
...                      pipeline="orders-dr", committed_at_ms=1700000000000)
>>> key, value = rec.encode()
>>> key
b'{"group":"orders-dr","k":1,"partition":3,"topic":"orders"}'
>>> ProgressRecord.decode(key, value, "__k2k_consumer-offsets", 0, 7) == rec
True
"""

from k2k.formats.assignment import (
    AssignmentRecord,
    MemberRecord,
    OwnerRecord,
    ReleaseRecord,
    decode_assignment,
    read_assignment,
)
from k2k.formats.checkpoint import Checkpoint
from k2k.formats.codec import dumps_canonical, unreadable
from k2k.formats.cutover import CutoverRecord
from k2k.formats.heartbeat import Heartbeat
from k2k.formats.metrics import MetricsRecord
from k2k.formats.offset_mapping import OffsetMappingRecord, RunEncoder
from k2k.formats.progress import ProgressKey, ProgressRecord

__all__ = [
    "AssignmentRecord",
    "Checkpoint",
    "CutoverRecord",
    "Heartbeat",
    "MemberRecord",
    "MetricsRecord",
    "OffsetMappingRecord",
    "OwnerRecord",
    "ProgressKey",
    "ProgressRecord",
    "ReleaseRecord",
    "RunEncoder",
    "decode_assignment",
    "dumps_canonical",
    "read_assignment",
    "unreadable",
]
