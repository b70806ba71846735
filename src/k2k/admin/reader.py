"""Read-only access to one pipeline's state, shared by ``k2k status`` and ``k2k offsets``.

Runs on: the operator's machine. Reads the commit and assignment topics on the target and
offsets and records on the source, and writes nothing to either cluster: every consumer is
*assigned* its partitions (no group membership) with ``enable.auto.commit`` off and never
commits, and a control topic that does not exist reads as empty (it is not created).

Liveness for an observer. Members judge each other by record timestamps of the assignment
topic (``LogAppendTime``: the broker's clock) against their own newest heartbeat. An
observer writes no heartbeat, so it has no "now" on that clock; the newest timestamp it
reads is no substitute, because once every member is gone the last heartbeat of a dead one
would be "now" and it would look alive forever. So the observer takes its own wall clock,
but never earlier than the newest timestamp it read (:meth:`AssignmentState.observer_now`),
and applies the members' rule (:meth:`~k2k.coordination.assignment.AssignmentView.alive_at`).
It agrees with the members as long as its clock is within ``graceWindow`` minus one
heartbeat interval of the brokers' (NTP).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException, Message, TopicPartition

from k2k.config import PipelineConfig
from k2k.coordination.assignment import AssignmentView
from k2k.coordination.progress import ProgressStore
from k2k.formats import MemberRecord, OwnerRecord, ProgressRecord, read_assignment
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView, TopicInfo
from k2k.kafka.factory import build_consumer
from k2k.kafka.faults import cluster_error
from k2k.kafka.peek import first_records, peek_settings
from k2k.kafka.tail import read_to_end

__all__ = [
    "AssignmentState",
    "MemberState",
    "PipelineReader",
    "now_ms",
]

log = logging.getLogger("k2k.admin")

#: The member name no heartbeat is ever read for: the observer's view of the group.
_OBSERVER = ""


def now_ms() -> int:
    """The wall clock in milliseconds (the observer's clock, see the module docstring)."""
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class MemberState:
    """One member of the commit group as an observer sees it now."""

    record: MemberRecord
    timestamp_ms: int
    #: ``alive``, ``left`` (clean stop) or ``dead`` (no heartbeat within ``graceWindow``).
    state: str


@dataclass(frozen=True, slots=True)
class AssignmentState:
    """What was read of the commit group's assignment records, and the observer's clock."""

    view: AssignmentView
    #: The newest record timestamp read (the brokers' clock), 0 when nothing was read.
    newest_ms: int

    def observer_now(self, wall_ms: int) -> int:
        """The observer's "now" on the topic's clock (see the module docstring)."""
        return max(wall_ms, self.newest_ms)

    def members(self, at_ms: int) -> list[MemberState]:
        """Every member ever read, by name, with its state at ``at_ms``."""
        alive = self.view.alive_at(at_ms)
        out = []
        for name, (rec, ts) in sorted(self.view.members.items()):
            state = "alive" if name in alive else "left" if rec.state == "left" else "dead"
            out.append(MemberState(rec, ts, state))
        return out

    def alive(self, at_ms: int, exclude: str = "") -> dict[str, MemberRecord]:
        """The members alive at ``at_ms`` (the members' own rule), but ``exclude``."""
        return {n: r for n, r in self.view.alive_at(at_ms).items() if n != exclude}

    def owner(self, tp: TP) -> tuple[OwnerRecord, bool] | None:
        """The newest claim on ``tp`` and whether it was released, or None."""
        rec = self.view.owners.get(tp)
        if rec is None:
            return None
        unsettled = self.view.unsettled.get(tp, [])
        return rec, all(r.claim != rec.claim for r in unsettled)


class PipelineReader:
    """Runs on: the operator's machine. One pipeline's state, read without writing."""

    def __init__(self, cfg: PipelineConfig) -> None:
        self.cfg = cfg
        self.source = ClusterView.of(cfg.source)
        self.target = ClusterView.of(cfg.target)
        self.sync_timeout_s = cfg.coordination.commit.sync_timeout.total_seconds()
        self._source_topics: dict[str, TopicInfo] | None = None
        self._target_topics: dict[str, TopicInfo] | None = None

    # -- topics --------------------------------------------------------------------------

    def source_topics(self) -> dict[str, TopicInfo]:
        if self._source_topics is None:
            self._source_topics = self.source.topics()
        return self._source_topics

    def target_topics(self) -> dict[str, TopicInfo]:
        if self._target_topics is None:
            self._target_topics = self.target.topics()
        return self._target_topics

    def selected(self) -> dict[str, TopicInfo]:
        """The source topics the pipeline replicates now: selected and routed (the
        planner's discovery rule; listed topics that do not exist are simply absent)."""
        cfg = self.cfg
        selection = cfg.topic_selection()
        router = cfg.topic_router()
        return {
            name: info
            for name, info in sorted(self.source_topics().items())
            if selection.should_replicate(name) and router.route(name) is not None
        }

    def partitions(self, progress: Iterable[TP]) -> list[TP]:
        """Every partition of the selected topics, plus every partition with progress."""
        tps = {(t, p) for t, info in self.selected().items() for p in range(info.partitions)}
        return sorted(tps | set(progress))

    def on_source(self, tps: Iterable[TP]) -> list[TP]:
        """The partitions of ``tps`` that exist on the source now."""
        topics = self.source_topics()
        return [(t, p) for t, p in tps if t in topics and p < topics[t].partitions]

    # -- control topics ------------------------------------------------------------------

    def progress(self) -> dict[TP, ProgressRecord]:
        """The newest progress record per partition of the commit group ({} without a
        commit topic)."""
        cfg = self.cfg
        topic = cfg.coordination.commit.topic
        if topic not in self.target_topics():
            return {}
        store = ProgressStore(
            cfg.control_consumer(),
            topic,
            cfg.commit_group,
            sync_timeout_s=self.sync_timeout_s,
            # Never a partial view: plans and lag computed from it would be wrong.
            on_sync_timeout="fail",
            on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
        )
        try:
            return store.load()
        finally:
            store.close()

    def assignment(self) -> AssignmentState:
        """The commit group's members and claims, read to the end of the assignment topic."""
        cfg = self.cfg
        grace_ms = int(cfg.coordination.assignment.grace_window.total_seconds() * 1000)
        view = AssignmentView(cfg.commit_group, _OBSERVER, _OBSERVER, grace_ms)
        topic = cfg.coordination.assignment.topic
        info = self.target_topics().get(topic)
        if info is None:
            return AssignmentState(view, 0)
        policy = cfg.error_handling.on_control_message_deserialization_error
        newest = 0

        def take(m: Message) -> None:
            nonlocal newest
            newest = max(newest, m.timestamp()[1])
            read = read_assignment(m, policy, log)
            if read is not None and read[1] is not None:
                view.apply(read[1], m.timestamp()[1])

        read_to_end(
            cfg.control_consumer(),
            topic,
            range(info.partitions),
            take,
            group_id=f"k2k.{cfg.commit_group}.assignment-reader",
            timeout_s=self.sync_timeout_s,
            setting="coordination.assignment.topic",
            untransacted=True,
        )
        return AssignmentState(view, newest)

    # -- source offsets and records ------------------------------------------------------

    def offsets(self, tps: Iterable[TP], which: str) -> dict[TP, int]:
        """Earliest or latest (last stable) offsets of the partitions of ``tps`` that exist
        on the source."""
        return self.source.offsets(self.on_source(tps), which)

    def offsets_for_time(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int]:
        """The first offset whose record timestamp is at or after ``timestamp_ms``, per
        partition; the latest offset where no record is that recent (Kafka's rule)."""
        found = self.source.offsets_at(tps, timestamp_ms)
        latest = self.source.offsets([tp for tp, o in found.items() if o < 0], "latest")
        return {tp: o if o >= 0 else latest[tp] for tp, o in found.items()}

    def first_timestamps(self, starts: Mapping[TP, int]) -> dict[TP, int | None]:
        """The timestamp of the first readable record at or after ``starts[tp]``
        (``read_committed``), None when nothing is readable before the end (what is left
        are transaction markers or aborted records). Partitions not read within
        ``source.connectTimeout`` are absent."""
        if not starts:
            return {}
        cfg = self.cfg
        conf = peek_settings(cfg.source_client("consumer"), f"k2k.{cfg.name}")
        consumer = build_consumer(conf)
        try:
            consumer.assign([TopicPartition(t, p, o) for (t, p), o in starts.items()])
            return first_records(consumer, set(starts), self.source.timeout_s)
        except KafkaException as exc:
            raise cluster_error(exc, "source", self.source.bootstrap, "reading records") from None
        finally:
            consumer.close()
