"""The progress store: committed replication progress, read from the commit topic.

Runs on: driver. At start the planner reads the whole (compacted) commit topic up to its
end offsets, keeping the newest record per (commit group, topic, partition) of its own
commit group; while the pipeline runs it tails the topic for the live display.

Invariants: the newest record for a key wins (log order within a partition; a key always
lands in the same partition); a tombstone (null value) removes the key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Literal

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from k2k.clients.faults import cluster_error, describe
from k2k.coordination.formats import ProgressKey, ProgressRecord
from k2k.errors import ClusterError, ControlRecordError

__all__ = ["ProgressStore"]

log = logging.getLogger("k2k.progress")

Policy = Literal["fail", "ignore"]


class ProgressStore:
    """Runs on: driver. Loads and tails the progress records of one commit group."""

    def __init__(
        self,
        consumer_conf: Mapping[str, str],
        topic: str,
        group: str,
        *,
        sync_timeout_s: float,
        on_sync_timeout: Policy,
        on_bad_record: Policy,
    ) -> None:
        self.topic = topic
        self.group = group
        self.sync_timeout_s = sync_timeout_s
        self.on_sync_timeout = on_sync_timeout
        self.on_bad_record = on_bad_record
        self.bootstrap = consumer_conf.get("bootstrap.servers", "?")
        conf = {
            **consumer_conf,
            "group.id": f"k2k.{group}.progress-reader",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "isolation.level": "read_committed",
        }
        self._consumer = Consumer(conf)
        self.latest: dict[tuple[str, int], ProgressRecord] = {}
        self.skipped = 0

    def load(self) -> dict[tuple[str, int], ProgressRecord]:
        """Read the commit topic to its end; bounded by ``coordination.commit.syncTimeout``."""
        deadline = time.monotonic() + self.sync_timeout_s
        try:
            md = self._consumer.list_topics(self.topic, timeout=self.sync_timeout_s)
            parts = sorted(md.topics[self.topic].partitions)
            ends = {
                p: self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=self.sync_timeout_s
                )[1]
                for p in parts
            }
        except KafkaException as exc:
            raise cluster_error(exc, "target", self.bootstrap, f"reading {self.topic}") from None
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in parts])
        remaining = {p for p in parts if ends[p] > 0}
        while remaining:
            left = deadline - time.monotonic()
            if left <= 0:
                self._sync_timed_out(remaining, ends)
                break
            for m in self._consumer.consume(10_000, min(left, 0.2)):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[m.partition()]:
                            remaining.discard(m.partition())
                        continue
                    raise ClusterError(f"reading {self.topic} on the target: {describe(err)}")
                self._apply(m)
                if m.offset() + 1 >= ends[m.partition()]:
                    remaining.discard(m.partition())
        return dict(self.latest)

    def poll(self) -> list[ProgressRecord]:
        """New progress records of this group since the last call (non-blocking)."""
        fresh: list[ProgressRecord] = []
        for m in self._consumer.consume(10_000, 0):
            if m.error() is None:
                rec = self._apply(m)
                if rec is not None:
                    fresh.append(rec)
        return fresh

    def close(self) -> None:
        self._consumer.close()

    def _apply(self, m: object) -> ProgressRecord | None:
        topic, part, off = m.topic(), m.partition(), m.offset()  # type: ignore[attr-defined]
        try:
            key = ProgressKey.decode(m.key(), f"{topic}[{part}]@{off}")  # type: ignore[attr-defined]
            if key.group != self.group:
                return None
            value = m.value()  # type: ignore[attr-defined]
            if value is None:
                self.latest.pop((key.topic, key.partition), None)
                return None
            rec = ProgressRecord.decode(m.key(), value, topic, part, off)  # type: ignore[attr-defined]
        except ControlRecordError as exc:
            if self.on_bad_record == "fail":
                raise ControlRecordError(
                    f"{exc} (errorHandling.onControlMessageDeserializationError: fail)"
                ) from None
            self.skipped += 1
            log.warning("skipping unreadable control record: %s", exc)
            return None
        self.latest[(rec.topic, rec.partition)] = rec
        return rec

    def _sync_timed_out(self, remaining: set[int], ends: dict[int, int]) -> None:
        msg = (
            f"could not read progress from {self.topic} partitions {sorted(remaining)} on the "
            f"target at {self.bootstrap} within {self.sync_timeout_s:g} s "
            f"(coordination.commit.syncTimeout)"
        )
        if self.on_sync_timeout == "fail":
            raise ClusterError(msg + "; errorHandling.onCommitSyncTimeout is 'fail'")
        log.warning(
            "%s; continuing with what was read (errorHandling.onCommitSyncTimeout: ignore)", msg
        )
