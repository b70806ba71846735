"""MirrorMaker 2 heartbeats: the driver's periodic ``{source alias, target alias, time}``
record in the target's ``heartbeats`` topic (``features.heartbeats``).

Runs on: driver, in a daemon thread of its own, from the planner's preparation until it
closes; never on the record path. As MM2's heartbeat connector does, the flow A -> B writes
into B only (k2k never writes to the source); the heartbeats *of* A reach B when the pipeline
replicates A's ``heartbeats`` topic under its replication policy (``A.heartbeats``).
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import KafkaError, Message

from k2k.config import PipelineConfig
from k2k.coordination.topics import ensure_mm2_topic
from k2k.formats.heartbeat import Heartbeat
from k2k.kafka.admin import ClusterView
from k2k.kafka.factory import build_producer, producer_settings
from k2k.stages.policies import HEARTBEATS_TOPIC

__all__ = ["HeartbeatEmitter", "ensure_heartbeats_topic"]

log = logging.getLogger("k2k.planner")

#: How long closing waits for the last heartbeats to be delivered.
_CLOSE_FLUSH_S = 5.0


def ensure_heartbeats_topic(cfg: PipelineConfig, target: ClusterView) -> None:
    """Create the target's ``heartbeats`` topic when missing, as MM2 does: one partition,
    compacted, with ``topicCreation.control``'s replication factor and configs. An existing
    one (e.g. MM2's) is used as it is."""
    settings = cfg.topic_creation.control.coordination()
    ensure_mm2_topic(target, HEARTBEATS_TOPIC, "features.heartbeats", settings, validate=False)


class HeartbeatEmitter:
    """Runs on: driver. Writes one heartbeat at start, then one every
    ``heartbeats.interval``, until :meth:`close`."""

    def __init__(self, cfg: PipelineConfig) -> None:
        assert cfg.source.alias is not None and cfg.target.alias is not None  # validated
        self.source_alias, self.target_alias = cfg.source.alias, cfg.target.alias
        self.interval_s = cfg.heartbeats.interval.total_seconds()
        self._producer = build_producer(producer_settings(cfg.target_client("producer"), False))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="k2k-heartbeats", daemon=True)
        self._failing = False

    def start(self) -> None:
        log.info(
            "emitting MM2 heartbeats %s -> %s into %s every %.3g s",
            self.source_alias,
            self.target_alias,
            HEARTBEATS_TOPIC,
            self.interval_s,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop emitting and deliver what is queued (bounded wait; idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._producer.flush(_CLOSE_FLUSH_S)

    def _run(self) -> None:
        while True:
            now_ms = int(time.time() * 1000)
            key, value = Heartbeat(self.source_alias, self.target_alias, now_ms).encode()
            self._producer.produce(
                HEARTBEATS_TOPIC,
                value,
                key,
                partition=0,
                timestamp=now_ms,
                on_delivery=self._delivered,
            )
            self._producer.poll(0)
            if self._stop.wait(self.interval_s):
                return

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        """Runs on: the emitter's thread (its poll). Says once when heartbeats start failing
        and once when they are delivered again: an outage must not flood the log."""
        if err is not None and not self._failing:
            log.warning("MM2 heartbeat not delivered: %s", err.str())
        elif err is None and self._failing:
            log.info("MM2 heartbeats delivered again")
        self._failing = err is not None
