"""The progress store: committed replication progress, read from the commit topic.

Runs on: driver and executors. At start the planner reads the whole (compacted) commit
topic up to its end offsets, keeping the newest record per (commit group, topic, partition)
of its own commit group; while the pipeline runs it tails the topic for the live display.
The topic may be shared with other commit groups and with assignment records (one topic for
both, as K2K allows): those records are skipped, never reported as unreadable.

Invariants: the newest record for a key wins (log order within a partition; a key always
lands in the same partition); a tombstone (null value) removes the key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from confluent_kafka import Message

from k2k.errors import ClusterError, ControlRecordError
from k2k.formats import ProgressKey, ProgressRecord, unreadable
from k2k.formats.codec import locator
from k2k.kafka.tail import SyncTimeout, TopicTail

if TYPE_CHECKING:
    from k2k.config.base import Policy

__all__ = ["ProgressStore"]

log = logging.getLogger("k2k.progress")


class ProgressStore:
    """Runs on: driver or executor. Loads and tails the progress records of one commit group.

    ``partitions`` limits reading to the commit-topic partitions a runner's keys hash to;
    ``start_at`` (commit-topic partition -> offset) and ``known`` (the newest records below
    those offsets) let a reader that was told what lies before them read only what follows.
    ``open_transaction_s``: with ``past_open_transactions``, the read may wait this long for
    a transaction another writer holds open, even past ``sync_timeout_s``: that writer is
    alive, and its transaction ends by its timeout at the latest.
    """

    def __init__(
        self,
        consumer_conf: Mapping[str, str],
        topic: str,
        group: str,
        *,
        sync_timeout_s: float,
        on_sync_timeout: Policy,
        on_bad_record: Policy,
        partitions: list[int] | None = None,
        past_open_transactions: bool = False,
        open_transaction_s: float = 0.0,
        start_at: Mapping[int, int] | None = None,
        known: Mapping[tuple[str, int], ProgressRecord] | None = None,
    ) -> None:
        self.topic = topic
        self.group = group
        self.sync_timeout_s = sync_timeout_s
        self.read_timeout_s = max(
            sync_timeout_s, open_transaction_s if past_open_transactions else 0
        )
        self.on_sync_timeout = on_sync_timeout
        self.on_bad_record = on_bad_record
        self._tail = TopicTail(
            consumer_conf,
            topic,
            partitions,
            group_id=f"k2k.{group}.progress-reader",
            timeout_s=self.read_timeout_s,
            past_open_transactions=past_open_transactions,
            start_at=start_at,
        )
        #: Another commit group's record, told by its key's bytes (not decoded).
        self._of_other_group = ProgressKey.other_groups_filter(group)
        #: The newest record per partition; ``known`` is dropped when the commit topic was
        #: created again since it was read (its offsets are not the known ones).
        self.latest: dict[tuple[str, int], ProgressRecord] = (
            {} if self._tail.rewound else dict(known or {})
        )
        self.skipped = 0
        self._fresh: list[ProgressRecord] = []

    def load(self) -> dict[tuple[str, int], ProgressRecord]:
        """Read the commit topic to its end; bounded by ``coordination.commit.syncTimeout``."""
        return self.load_unless(lambda: False) or {}

    def load_unless(
        self, abort: Callable[[], bool]
    ) -> dict[tuple[str, int], ProgressRecord] | None:
        """:meth:`load`, or None when ``abort()`` became true first."""
        try:
            if not self._tail.catch_up(self._apply, abort=abort):
                return None
        except SyncTimeout as exc:
            self._sync_timed_out(exc)
        self._fresh.clear()
        return dict(self.latest)

    def poll(self) -> list[ProgressRecord]:
        """New progress records of this group since the last call (non-blocking)."""
        self._tail.poll(self._apply)
        fresh, self._fresh = self._fresh, []
        return fresh

    def read_to(self) -> dict[int, int] | None:
        """Per commit-topic partition, the offset below which :attr:`latest` holds every
        record read (with ``latest`` read after it: a consistent view); None once a read
        failed part-way (an unreadable record, a client error): some were skipped."""
        return self._tail.read_to() if self._tail.intact else None

    def close(self) -> None:
        self._tail.close()

    def _apply(self, m: Message) -> None:
        if self._of_other_group(m.key()):
            return
        where = locator(m.topic(), m.partition(), m.offset())
        try:
            key = ProgressKey.decode_shared(m.key(), where)
            if key is None or key.group != self.group:  # None: an assignment record
                return
            value = m.value()
            if value is None:
                self.latest.pop((key.topic, key.partition), None)
                return
            rec = ProgressRecord.decode_value(key, value, where)
        except ControlRecordError as exc:
            self.skipped += 1
            unreadable(exc, self.on_bad_record, log)
            return
        self.latest[(rec.topic, rec.partition)] = rec
        self._fresh.append(rec)

    def _sync_timed_out(self, exc: SyncTimeout) -> None:
        bound = "coordination.commit.syncTimeout"
        if self.read_timeout_s > self.sync_timeout_s:
            bound += " or, past open transactions, the producer's transaction.timeout.ms"
        msg = (
            f"could not read progress from {self.topic} partitions {exc.partitions} on the "
            f"target at {self._tail.bootstrap} within {self.read_timeout_s:g} s ({bound})"
        )
        if self.on_sync_timeout == "fail":
            raise ClusterError(msg + "; errorHandling.onCommitSyncTimeout is 'fail'")
        log.warning(
            "%s; continuing with what was read (errorHandling.onCommitSyncTimeout: ignore)", msg
        )
