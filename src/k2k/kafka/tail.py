"""Reading a compacted control topic: everything up to "now", then what comes next.

Both the driver (progress display, assignment view) and the runners (progress and claims
at task start) need the same thing from a control topic: every committed record of some
partitions up to the end offsets measured *after* the caller's last write or fence, then
new records as they arrive. Under ``read_committed`` a partition's readable end is its last
stable offset, which an open transaction of another runner holds back; reading to the high
watermark measured now waits for those transactions to end, so nothing committed before
the call is missed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition

from k2k.errors import ClusterError
from k2k.kafka.factory import FETCH_QUEUE_BACKOFF, READY_TIMEOUT_S, build_consumer, ready
from k2k.kafka.faults import cluster_error, describe, is_transient, is_unreachable, kafka_error_of

__all__ = ["SyncTimeout", "TopicTail", "read_to_end", "tail_settings"]

Handler = Callable[[Message], None]


class SyncTimeout(ClusterError):
    """The topic could not be read to its end within the allowed time."""

    def __init__(self, message: str, partitions: list[int]) -> None:
        super().__init__(message)
        self.partitions = partitions


def tail_settings(
    consumer_conf: Mapping[str, str], group_id: str, *, untransacted: bool = False
) -> dict[str, str]:
    """A control-topic reader's settings: fetching resumes as soon as the queue drains
    (unless the user's settings say otherwise), the rest fixed for reading to the end."""
    return {
        **FETCH_QUEUE_BACKOFF,
        **consumer_conf,
        "group.id": group_id,
        "enable.auto.commit": "false",
        "enable.partition.eof": "true",
        # A start offset no longer (or not yet) in the log: everything there is, not the end.
        "auto.offset.reset": "earliest",
        "isolation.level": "read_uncommitted" if untransacted else "read_committed",
        "fetch.wait.max.ms": "50",
    }


class TopicTail:
    """A ``read_committed`` reader (or ``untransacted``: ``read_uncommitted``) of some
    partitions of one topic, from the beginning."""

    def __init__(
        self,
        consumer_conf: Mapping[str, str],
        topic: str,
        partitions: Iterable[int] | None,
        *,
        group_id: str,
        timeout_s: float,
        past_open_transactions: bool = False,
        untransacted: bool = False,
        start_at: Mapping[int, int] | None = None,
    ) -> None:
        """``start_at``: where reading starts per partition (by default the beginning): a
        caller that knows what lies before these offsets reads only what follows them.

        ``past_open_transactions``: :meth:`catch_up` reads to the high watermark, waiting
        for transactions open at the call to end (a runner after fencing its predecessors:
        their committed records may lie behind another runner's open transaction). Otherwise
        it reads to the last stable offset, which never waits.

        ``untransacted``: the records the caller wants are never written in a transaction
        (assignment records), so it reads ``read_uncommitted``: the same records, but never
        held back by an open transaction of progress records sharing the topic."""
        self.topic = topic
        self.timeout_s = timeout_s
        self.bootstrap = consumer_conf.get("bootstrap.servers", "?")
        conf = tail_settings(consumer_conf, group_id, untransacted=untransacted)
        self._consumer = build_consumer(conf)
        # A read_committed client's "latest" offset is the last stable offset; the high
        # watermark needs a read_uncommitted one (it only queries offsets, never reads).
        self._ends = (
            build_consumer({**conf, "isolation.level": "read_uncommitted"})
            if past_open_transactions
            else self._consumer
        )
        try:
            if partitions is None:
                md = self._consumer.list_topics(topic, timeout=timeout_s)
                partitions = md.topics[topic].partitions
            else:
                ready(self._consumer, topic, min(timeout_s, READY_TIMEOUT_S))
        except KafkaException as exc:
            self._consumer.close()
            raise cluster_error(exc, "target", self.bootstrap, f"reading {topic}") from None
        self.partitions = sorted(set(partitions))
        starts = {p: (start_at or {}).get(p, 0) for p in self.partitions}
        #: True when ``start_at`` lay past a partition's end (the topic was created again
        #: since): everything is read from the beginning, and what the caller was told
        #: about the offsets before it does not hold.
        self.rewound = False
        try:
            self.rewound = any(starts.values()) and self._past_end(starts)
        except ClusterError:
            self.close()
            raise
        if self.rewound:
            starts = dict.fromkeys(self.partitions, 0)
        #: False once a poll failed part-way through a batch: the consumer moved past records
        #: no handler saw, so :meth:`read_to` no longer describes what was passed on.
        self.intact = True
        self._consumer.assign(
            [TopicPartition(topic, p, starts[p] or OFFSET_BEGINNING) for p in self.partitions]
        )
        self._next: dict[int, int] = starts

    def _past_end(self, starts: Mapping[int, int]) -> bool:
        """True when some start offset lies past its partition's end now."""
        deadline = time.monotonic() + self.timeout_s
        return any(at > self._end_offset(p, deadline) for p, at in starts.items() if at)

    def catch_up(
        self,
        handle: Handler,
        timeout_s: float | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> bool:
        """Pass every record up to the end offsets measured now to ``handle``, in log order
        per partition; raises :class:`SyncTimeout` naming the partitions not read in time.
        Returns False when ``abort()`` became true first (checked every 0.1 s)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        ends = {p: self._end_offset(p, deadline) for p in self.partitions}
        remaining = {p for p in self.partitions if self._next[p] < ends[p]}
        while remaining:
            if abort is not None and abort():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                raise SyncTimeout(
                    f"could not read {self.topic} partitions {sorted(remaining)} on the target "
                    f"at {self.bootstrap} to their end within {timeout:g} s",
                    sorted(remaining),
                )
            self._take_all(self._consumer.consume(10_000, min(left, 0.1)), handle)
            remaining = {p for p in remaining if self._next[p] < ends[p]}
        return True

    def _end_offset(self, partition: int, deadline: float) -> int:
        """The partition's end now; a broker that does not know the topic or partition yet
        (created a moment ago, its metadata still spreading) or is settling is asked again,
        after a pause growing to 1 s, until ``deadline``."""
        pause = 0.05
        while True:
            left = max(deadline - time.monotonic(), 0.001)
            try:
                tp = TopicPartition(self.topic, partition)
                return self._ends.get_watermark_offsets(tp, timeout=left, cached=False)[1]
            except KafkaException as exc:
                err = kafka_error_of(exc)
                settling = err is not None and (_not_known_yet(err) or is_transient(err))
                if not settling or time.monotonic() + pause >= deadline:
                    raise cluster_error(
                        exc, "target", self.bootstrap, f"reading {self.topic}"
                    ) from None
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def read_to(self) -> dict[int, int]:
        """Per partition, the offset below which every committed record was passed on
        (while :attr:`intact`)."""
        return dict(self._next)

    def poll(self, handle: Handler) -> None:
        """Pass the records that arrived since the last call (non-blocking)."""
        self._take_all(self._consumer.consume(10_000, 0), handle)

    def _take_all(self, batch: list[Message], handle: Handler) -> None:
        try:
            for m in batch:
                self._take(m, handle)
        except BaseException:
            self.intact = False
            raise

    def close(self) -> None:
        self._consumer.close()
        if self._ends is not self._consumer:
            self._ends.close()

    def _take(self, m: Message, handle: Handler) -> None:
        err, part, offset = m.error(), m.partition(), m.offset()
        if err is not None and (is_unreachable(err) or _not_known_yet(err)):
            # The consumer reconnects (or refreshes its metadata) by itself; catch_up stays
            # bounded by its timeout, and k2k start reports an outage once
            # (k2k.observability.reachability).
            return
        if err is not None and err.code() != KafkaError._PARTITION_EOF:
            raise ClusterError(f"reading {self.topic} on the target: {describe(err)}")
        # Records and EOF events of an assigned partition always carry both.
        assert part is not None and offset is not None
        if err is not None:
            # Under read_committed the end may lie past markers and aborted records.
            self._next[part] = max(self._next[part], offset)
            return
        handle(m)
        self._next[part] = offset + 1


def _not_known_yet(err: KafkaError) -> bool:
    """A broker's answer for a topic it has not heard of yet (its metadata lags the
    controller's, as on a cluster of several brokers right after the topic was created)."""
    return err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)


def read_to_end(
    consumer_conf: Mapping[str, str],
    topic: str,
    partitions: Iterable[int] | None,
    handle: Handler,
    *,
    group_id: str,
    timeout_s: float,
    setting: str,
    untransacted: bool = False,
    error: type[ClusterError] = ClusterError,
) -> None:
    """Pass every record of ``partitions`` of ``topic`` (all of them for None), up to the end
    offsets measured now, to ``handle``, once: a :class:`TopicTail` opened and closed again.

    A topic not read to its end within ``timeout_s`` raises ``error`` (a caller that waits
    outages out passes :class:`~k2k.errors.Unavailable`), naming ``setting``: the config key
    that names the topic, which is what an operator looks up.
    """
    tail = TopicTail(
        consumer_conf,
        topic,
        partitions,
        group_id=group_id,
        timeout_s=timeout_s,
        untransacted=untransacted,
    )
    try:
        tail.catch_up(handle)
    except SyncTimeout as exc:
        raise error(f"{exc} ({setting})") from None
    finally:
        tail.close()
