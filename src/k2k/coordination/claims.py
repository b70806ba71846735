"""A runner's check that the newest claim on each of its partitions is still its own.

Runs on: executor, once per runner task, after the runner initialised its transactional ids
(which fences every earlier producer of them) and before it reads progress. Step 5 of the
protocol in :mod:`k2k.coordination.assignment`: a claim written after this runner's was
planned means another member owns the partition now, and this runner must not write it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from confluent_kafka import Message

from k2k.errors import Unavailable
from k2k.formats import OwnerRecord, read_assignment
from k2k.kafka import TP
from k2k.kafka.murmur2 import murmur2_partition
from k2k.kafka.tail import read_to_end

if TYPE_CHECKING:
    from k2k.config.base import Policy

__all__ = ["NOBODY", "lost_claims", "lost_of"]

log = logging.getLogger("k2k.claims")

#: The owner named for a lost partition when no claim on it was read at all.
NOBODY = "nobody"


def lost_claims(
    consumer_conf: Mapping[str, str],
    topic: str,
    partitions: int,
    group: str,
    mine: Mapping[TP, str],
    *,
    sync_timeout_s: float,
    on_bad_record: Policy,
    reader_group_id: str | None = None,
) -> dict[TP, str]:
    """Which of ``mine`` (partition -> claim id) are no longer this runner's.

    Reads the owner records of ``mine`` in commit group ``group`` from assignment topic
    ``topic`` (``partitions`` partitions) up to its end, and returns each lost partition
    with the member whose claim is newest now (:data:`NOBODY` when none was read); empty
    when every claim is still ours. ``reader_group_id`` is the consumer group id of the
    reader, by default ``k2k.<group>.runner``.

    Raises :class:`ClusterError` naming ``coordination.assignment.topic`` when the topic
    cannot be read to its end within ``sync_timeout_s``; an undecodable record is handled by
    ``on_bad_record`` (``errorHandling.onControlMessageDeserializationError``).
    """
    if not mine:
        return {}
    keys = {OwnerRecord.key_bytes(group, t, p): (t, p) for t, p in mine}
    newest: dict[TP, OwnerRecord] = {}

    def take(m: Message) -> None:
        key = m.key()
        tp = keys.get(key) if key is not None else None
        if tp is None:
            return  # another partition's claim, or not a claim at all
        read = read_assignment(m, on_bad_record, log)
        if read is not None and isinstance(read[1], OwnerRecord):
            newest[tp] = read[1]

    read_to_end(
        consumer_conf,
        topic,
        {murmur2_partition(k, partitions) for k in keys},
        take,
        group_id=reader_group_id or f"k2k.{group}.runner",
        timeout_s=sync_timeout_s,
        setting="coordination.assignment.topic",
        untransacted=True,
        error=Unavailable,
    )
    return lost_of(mine, newest)


def lost_of(mine: Mapping[TP, str], newest: Mapping[TP, OwnerRecord]) -> dict[TP, str]:
    """The partitions of ``mine`` (partition -> claim id) whose newest claim in ``newest``
    is another one, each with the member that holds it (:data:`NOBODY` when none), in the
    order of ``mine``.

    >>> claim = OwnerRecord("g", "t", 1, "host-b", "s2", "", "s2/1", 0)
    >>> lost_of({("t", 0): "s1/1", ("t", 1): "s1/2"}, {("t", 1): claim})
    {('t', 0): 'nobody', ('t', 1): 'host-b'}
    """
    return {
        tp: newest[tp].member if tp in newest else NOBODY
        for tp, claim in mine.items()
        if tp not in newest or newest[tp].claim != claim
    }
