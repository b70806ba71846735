"""Plain, picklable values the planner (driver) sends to runner tasks and gets back.

Everything here crosses the driver/executor boundary through pickle, so it holds only
builtins and frozen dataclasses: no clients, no locks, no config models. :func:`plan_groups`
is the one piece of logic: how the planner splits a lease's partitions into runner groups.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from k2k.formats import ProgressRecord
from k2k.stages.topicplan import TopicPlan

if TYPE_CHECKING:
    from k2k.config.base import Policy
    from k2k.pipeline.task.commit import CommitStrategy
    from k2k.pipeline.task.observe import RunObserver

__all__ = [
    "ClientSpec",
    "CommitSpec",
    "ControlTopicSpec",
    "LeaseSpec",
    "PartitionOutcome",
    "PartitionRange",
    "PolicySpec",
    "ProgressSnapshot",
    "RunnerGroup",
    "RunnerSummary",
    "SlotAssignment",
    "plan_groups",
]


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """One source partition a runner copies during a lease.

    ``start`` is the first offset to read (the committed progress, or the resolved initial
    offset). ``end`` is exclusive: the runner stops that partition once it has read up to
    ``end`` (``--until-caught-up``); ``None`` means open-ended until the lease ends.
    ``has_progress`` is False when no progress record exists yet, so the runner writes one
    even if the partition stays empty (a later ``latest`` reset must not skip records).
    """

    topic: str
    partition: int
    start: int
    end: int | None
    has_progress: bool


@dataclass(frozen=True, slots=True)
class ProgressSnapshot:
    """The driver's view of the commit topic, so that a runner taking partitions on reads
    only what was written since instead of the whole topic
    (docs/architecture.md#taking-partitions-on).

    ``read_to``: per commit-topic partition, the offset below which the driver has read every
    committed record; ``records``: for each partition it covers, the newest progress record
    below those offsets (None: none).
    """

    read_to: dict[int, int]
    records: dict[tuple[str, int], ProgressRecord | None]

    def covers(self, tps: Iterable[tuple[str, int]]) -> bool:
        return all(tp in self.records for tp in tps)


@dataclass(frozen=True, slots=True)
class RunnerGroup:
    """The source partitions one Spark task copies during one lease.

    ``transactional_id`` is set in exactly-once mode; ``claims`` maps each partition to the
    claim id the planner wrote in the assignment topic (the runner verifies it still holds);
    ``progress`` the driver's view of their progress (None: the runner reads it all).
    """

    index: int
    ranges: tuple[PartitionRange, ...]
    transactional_id: str | None = None
    claims: tuple[tuple[str, int, str], ...] = ()
    progress: ProgressSnapshot | None = None


@dataclass(frozen=True, slots=True)
class SlotAssignment:
    """A runner slot's whole assignment from some point of a continuous lease on, sent
    over the lease channel; the runner applies the difference to what it copies
    (docs/architecture.md#leases-that-do-not-stop).

    ``version`` grows with every change of the slot; ``topics`` and ``topic_ids`` hold at
    least the plans and ids of the topics of ``ranges`` (a runner keeps the plans it has);
    ``grown`` the target topics of those that gained partitions since the slot's previous
    assignment, with their partition count now (its producers must see them before
    writing there); ``progress`` the driver's view of the progress of the partitions the
    runner may not have taken on yet.
    """

    version: int
    ranges: tuple[PartitionRange, ...]
    claims: tuple[tuple[str, int, str], ...]
    topics: dict[str, TopicPlan]
    topic_ids: dict[str, str]
    grown: dict[str, int]
    progress: ProgressSnapshot | None = None


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """The settings runners build their clients from.

    They contain credentials: they travel to executors as Spark task data and are never
    logged.
    """

    #: The consumer reading the records to copy.
    source_consumer: dict[str, str]
    #: The producer writing copies and control records (exactly-once: one per transactional id).
    target_producer: dict[str, str]
    #: The target consumer reading control topics at task start; empty: none is read.
    control_consumer: dict[str, str]
    #: ``statistics.interval.ms`` of the source consumer and target producer, whose
    #: statistics go into the metrics frames (``-t`` with ``metrics.clientStatistics``);
    #: None: librdkafka's statistics are not collected.
    statistics_interval_ms: int | None


@dataclass(frozen=True, slots=True)
class CommitSpec:
    """When copied records count as committed: the delivery mode and its batches."""

    exactly_once: bool
    batch_size: int
    batch_timeout_s: float
    #: The user's delivery timeout: a commit batch not acknowledged within it fails the lease.
    ack_timeout_s: float
    #: ``offsets: identical``: a partition's progress is its target partition's end offset
    #: (k2k.pipeline.task.identical).
    identical_offsets: bool


@dataclass(frozen=True, slots=True)
class ControlTopicSpec:
    """The control topics runners read and write, and who their progress records name."""

    pipeline: str
    #: Assignment member name, written into progress records.
    member: str
    commit_group: str
    commit_topic: str
    commit_partitions: int
    assignment_topic: str
    assignment_partitions: int
    #: How long reading a control topic to its end may take.
    sync_timeout_s: float
    #: Exactly-once: how long another runner's open transaction can hold the commit topic's
    #: readable end back (its timeout, then the broker aborts it); 0 at-least-once.
    open_transaction_s: float


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """The ``errorHandling`` choices runners apply themselves."""

    on_sync_timeout: Policy
    on_bad_record: Policy
    #: ``onSourceRecordsLost``: ``fail`` or ``continue``.
    on_records_lost: str
    #: ``onForeignWrites``: ``warn`` or ``fail``.
    on_foreign_writes: str
    #: ``onOffsetGap`` (identical offsets): ``fail`` or ``map``.
    on_offset_gap: str


@dataclass(frozen=True)
class LeaseSpec:
    """Everything a runner task needs for one lease (shared by all groups of the lease).

    The runner hands each of its parts only the spec parts it uses. No field has a default:
    the config model is the one source of defaults, and whoever builds a spec sets every
    value (:func:`k2k.pipeline.driver.lease.lease_template`).
    """

    lease_id: int
    #: The compiled plan of every topic the lease may copy, by source topic.
    topics: dict[str, TopicPlan]
    #: The id of every source topic of ``topics`` (source topic -> id), written into
    #: progress records: progress of a deleted topic never applies to a re-created one.
    topic_ids: dict[str, str]
    #: How long the lease runs, on the executor's clock.
    lease_s: float
    #: A continuous lease: runners keep running while their partitions change (they take
    #: :class:`SlotAssignment` changes over the lease channel), also with none at all.
    live: bool
    #: The lease channel's address; None: no driver to listen to.
    control: tuple[str, int, str] | None
    #: Builds each runner's observer of produced runs (offset mapping, metrics) on the
    #: executor, given the runner's commit strategy (records that must commit with a batch
    #: go through its ``add``); a picklable callable. None: no observer, the fast path.
    observer: Callable[[CommitStrategy], RunObserver] | None
    #: ``-t/--telemetry``: runners count records, bytes, latency and commits, and send
    #: their totals to the driver over the lease channel (k2k.metrics).
    telemetry: bool
    clients: ClientSpec
    commit: CommitSpec
    control_topics: ControlTopicSpec
    policies: PolicySpec


@dataclass(slots=True)
class PartitionOutcome:
    """What a runner achieved for one partition: ``committed`` is the progress written last."""

    topic: str
    partition: int
    start: int
    committed: int
    reached_end: bool = False
    progress_written: bool = False
    #: Records deleted by retention before they were replicated, jumped over under
    #: ``errorHandling.onSourceRecordsLost: continue``.
    lost: int = 0


@dataclass(slots=True)
class RunnerSummary:
    """The small picklable result of one runner task; the planner decides what happens next.

    ``error`` is a one-line message of a fault the runner could not handle (the lease's
    uncommitted work is abandoned; committed progress stays valid).
    """

    group: int
    partitions: list[PartitionOutcome] = field(default_factory=list)
    records: int = 0
    bytes: int = 0
    error: str | None = None
    #: The fault's class (e.g. ``ReplicationError``), for the errors metric.
    error_class: str | None = None
    seconds: float = 0.0
    #: Set when another owner took the partitions over (fenced, or claimed elsewhere): the
    #: lease's uncommitted work was abandoned; not an error, the planner re-plans.
    fenced: str | None = None
    #: With telemetry: the runner's last metrics frame (k2k.metrics.frames), all totals.
    metrics: builtins.bytes | None = None
    #: Bidirectional replication: source records the other direction wrote, not copied back.
    skipped: int = 0
    #: ``replication[].transforms``: records a filter dropped, and records left out because
    #: a step failed on them (``onError: skip``).
    filtered: int = 0
    transform_failed: int = 0
    #: Schema mapping: schemas (and references) this runner had the target registry resolve.
    schemas_registered: int = 0


def plan_groups(
    ranges: list[PartitionRange], slots: int, weight: Callable[[PartitionRange], int]
) -> list[RunnerGroup]:
    """Split ranges into at most ``slots`` groups, heaviest first onto the lightest group.

    >>> rs = [PartitionRange("t", p, 0, w, False) for p, w in enumerate([5, 1, 4, 2])]
    >>> [[r.partition for r in g.ranges] for g in plan_groups(rs, 2, lambda r: r.end)]
    [[0, 1], [2, 3]]
    """
    n = max(1, min(slots, len(ranges)))
    loads = [0] * n
    members: list[list[PartitionRange]] = [[] for _ in range(n)]
    for r in sorted(ranges, key=lambda r: (-weight(r), r.topic, r.partition)):
        i = loads.index(min(loads))
        members[i].append(r)
        loads[i] += max(1, weight(r))
    return [
        RunnerGroup(i, tuple(sorted(m, key=lambda r: (r.topic, r.partition))))
        for i, m in enumerate(members)
        if m
    ]
