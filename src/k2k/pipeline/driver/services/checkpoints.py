"""MirrorMaker 2 checkpoints: the driver's periodic translation of the selected source
groups' committed offsets into the target's ``<source alias>.checkpoints.internal``
(``features.checkpoints``).

Runs on: driver, in a daemon thread of its own, from the planner's preparation until it
closes; never on the record path. Before the first pass it reads the checkpoints already in
the topic, so MM2's write-again rule holds across restarts (as MM2's ``CheckpointStore``
does since 3.8). Each pass (every ``checkpoints.interval``):

1. list the source's consumer groups and keep those ``checkpoints.groups`` selects (the
   source is only read, by the admin API);
2. read their committed offsets and metadata;
3. read the offset mappings written since the last pass (this pipeline's only);
4. translate each group exactly as the Offset Mapping app does
   (:func:`~k2k.offsetmapping.checkpoints.group_checkpoints`);
5. write the checkpoints MM2's rule lets through (new, advanced, or after a reset of the
   source group) and wait for their delivery; a checkpoint that was not delivered is
   written again next pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message

from k2k.config import PipelineConfig
from k2k.coordination.topics import ensure_mm2_topic
from k2k.errors import ClusterError, ControlRecordError, K2KError
from k2k.formats.checkpoint import Checkpoint
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView
from k2k.kafka.factory import build_producer, producer_settings
from k2k.kafka.groups import committed_offsets, list_groups
from k2k.kafka.tail import TopicTail
from k2k.offsetmapping.checkpoints import LastCheckpoints, group_checkpoints
from k2k.offsetmapping.index import PartitionIndex
from k2k.offsetmapping.resolve import RunReader
from k2k.offsetmapping.store import MappingStore

__all__ = ["CheckpointEmitter", "CheckpointPass", "ensure_checkpoints_topic"]

log = logging.getLogger("k2k.planner")


def ensure_checkpoints_topic(cfg: PipelineConfig, target: ClusterView) -> None:
    """Create the target's checkpoints topic when missing, as MM2 does: one partition,
    compacted (one checkpoint per group and partition survives), with
    ``topicCreation.control``'s replication factor and configs. An existing one (e.g. MM2's)
    is used as it is."""
    ensure_mm2_topic(
        target,
        cfg.checkpoints_topic(),
        "features.checkpoints",
        cfg.topic_creation.control.coordination(),
        validate=cfg.features.validate_control_topic_settings,
    )


@dataclass(slots=True)
class CheckpointPass:
    """What one pass did (logged; returned for tests)."""

    groups: int = 0
    written: list[Checkpoint] = field(default_factory=list)
    unchanged: int = 0
    untranslated: int = 0


class CheckpointEmitter:
    """Runs on: driver. A pass at start, then one every ``checkpoints.interval``, until
    :meth:`close`."""

    def __init__(self, cfg: PipelineConfig) -> None:
        self.topic = cfg.checkpoints_topic()
        self.pipeline = cfg.name
        self.settings = cfg.checkpoints
        self.timeout_s = max(
            cfg.source.connect_timeout.total_seconds(), cfg.target.connect_timeout.total_seconds()
        )
        self.source = ClusterView.of(cfg.source)
        consumer = cfg.control_consumer()
        self._consumer_conf = consumer
        self._loaded = False
        self.store = MappingStore(consumer, cfg.offset_mapping.topic, self.timeout_s)
        self.runs = RunReader(cfg.target_client("consumer"), self.timeout_s)
        self._producer = build_producer(producer_settings(cfg.target_client("producer"), False))
        self.last = LastCheckpoints()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="k2k-checkpoints", daemon=True)
        self._failing = False

    def start(self) -> None:
        log.info(
            "emitting MM2 checkpoints into %s every %.3g s",
            self.topic,
            self.settings.interval.total_seconds(),
        )
        self._thread.start()

    def close(self) -> None:
        """Stop after the pass in progress (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.store.close()
        self.runs.close()

    def last_pass(self) -> None:
        """Stop the periodic passes and make one more, when the pipeline ended cleanly: the
        checkpoints then cover everything it replicated (``--until-caught-up`` before a
        cut-over). A failure is logged; the checkpoints of the last good pass stay."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        try:
            report = self.one_pass()
        except K2KError as exc:
            log.warning("MM2 checkpoints: the last pass failed: %s", exc)
        else:
            log.info("MM2 checkpoints: last pass wrote %d", len(report.written))

    def one_pass(self) -> CheckpointPass:
        """Steps 1-5 of the module doc; raises :class:`~k2k.errors.ClusterError` when a
        cluster does not answer."""
        report = CheckpointPass()
        if not self._loaded:
            self.load()
        groups = list_groups(self.source.admin, self.timeout_s)  # Step 1.
        selected = [g for g in groups if self.settings.selects(g)]
        offsets, errors = committed_offsets(self.source.admin, selected, self.timeout_s)  # 2.
        for error in errors:
            log.warning("checkpoints: %s; retried next pass", error)
        self.store.catch_up()  # Step 3.
        due: list[Checkpoint] = []
        for group, committed in sorted(offsets.items()):  # Step 4.
            found = group_checkpoints(group, committed, self._indexes, self.runs.resolve)
            report.untranslated += len(found.untranslated) + len(found.shared)
            for checkpoint in found.checkpoints:
                if self.last.worth_writing(checkpoint):
                    due.append(checkpoint)
                else:
                    report.unchanged += 1
        report.groups = len(offsets)
        report.written = self._write(due)  # Step 5.
        return report

    def load(self) -> int:
        """Take the checkpoints already in the topic as the last written (an earlier run's,
        or MM2's); returns how many records were read. An unreadable record is skipped: the
        checkpoint it held is written again."""
        tail = TopicTail(
            self._consumer_conf,
            self.topic,
            [0],
            group_id=f"k2k-checkpoints-{self.pipeline}",
            timeout_s=self.timeout_s,
            untransacted=True,
        )
        read = 0

        def take(m: Message) -> None:
            nonlocal read
            read += 1
            try:
                checkpoint = Checkpoint.decode(
                    m.key(), m.value(), self.topic, m.partition() or 0, m.offset() or 0
                )
            except ControlRecordError as exc:
                log.warning("skipping an unreadable checkpoint: %s", exc)
                return
            self.last.written(checkpoint)

        try:
            tail.catch_up(take)
        finally:
            tail.close()
        self._loaded = True
        return read

    def _indexes(self, tp: TP) -> Mapping[str, PartitionIndex]:
        """Only this pipeline's mappings: checkpoints describe the flow it replicates."""
        mine = self.store.indexes(tp).get(self.pipeline)
        return {} if mine is None else {self.pipeline: mine}

    def _write(self, due: list[Checkpoint]) -> list[Checkpoint]:
        """Produce ``due`` to partition 0 and wait for the acknowledgements; returns them
        (now the last written). Raises ClusterError when some were not delivered: those are
        written again next pass."""
        delivered: list[Checkpoint] = []
        failed: list[KafkaError] = []
        for checkpoint in due:
            key, value = checkpoint.encode()

            def on_delivery(
                err: KafkaError | None, _m: Message, c: Checkpoint = checkpoint
            ) -> None:
                if err is None:
                    delivered.append(c)
                else:
                    failed.append(err)

            self._producer.produce(self.topic, value, key, partition=0, on_delivery=on_delivery)
            self._producer.poll(0)
        left = self._producer.flush(self.timeout_s)
        for checkpoint in delivered:
            self.last.written(checkpoint)
        if failed or left:
            why = failed[0].str() if failed else "not acknowledged in time"
            raise ClusterError(
                f"{len(failed) + left} checkpoint(s) not delivered to {self.topic}: {why}"
            )
        return delivered

    def _run(self) -> None:
        interval_s = self.settings.interval.total_seconds()
        while not self._stop.is_set():
            try:
                report = self.one_pass()
            except K2KError as exc:
                # A cluster that does not answer now may next pass: say so once, not per pass.
                if not self._failing:
                    log.warning("MM2 checkpoints failed, retried every pass: %s", exc)
                self._failing = True
            else:
                if self._failing:
                    log.info("MM2 checkpoints written again")
                self._failing = False
                log.debug(
                    "checkpoints: %d groups, %d written, %d unchanged, %d untranslated",
                    report.groups,
                    len(report.written),
                    report.unchanged,
                    report.untranslated,
                )
            if self._stop.wait(interval_s):
                return
