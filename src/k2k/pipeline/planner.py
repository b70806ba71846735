"""The planner: the driver loop of ``k2k start``.

Runs on: driver. One pass of the loop is one *lease*:

1. discover the selected source topics and their routes (internal and control topics are
   never selected), create or check the target topics;
2. turn committed progress into one offset range per source partition and split the
   partitions into at most P *runner groups* (P = Spark task slots, or ``spark.parallelism``),
   balanced by remaining lag;
3. run one Spark job, ``parallelize(groups, len(groups)).mapPartitions(run_groups)``, whose
   tasks copy until the lease deadline or until the planner ends the lease early (stop
   request, a new topic, or — with ``--until-caught-up`` — every range is done);
4. fold the runners' summaries into the committed progress; stop on a runner fault.

Progress lives on the target cluster, so the driver needs no Spark checkpoint and a
restarted driver simply reads the commit topic again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from k2k.clients.admin import ClusterView, TopicInfo
from k2k.clients.factory import consumer_settings, delivery_timeout_s, producer_settings
from k2k.config import (
    ExplicitTopicMap,
    PipelineConfig,
    PrefixSuffixTopicName,
    SameTopicName,
    StaticTopicName,
)
from k2k.coordination.assignment import (
    Assignment,
    StandDown,
    default_member_name,
    transactional_id,
)
from k2k.coordination.progress import ProgressStore
from k2k.coordination.topics import ensure_control_topic
from k2k.errors import K2KError, ReplicationError, TopicError
from k2k.pipeline import stages
from k2k.pipeline.control import LeaseControl
from k2k.pipeline.plan import (
    LeaseSpec,
    PartitionRange,
    RecordOptions,
    RunnerGroup,
    RunnerSummary,
)
from k2k.pipeline.runner import run_groups

__all__ = ["PipelineStats", "Planner", "build_router", "plan_groups"]

log = logging.getLogger("k2k.planner")

TP = tuple[str, int]

#: How long a stop request may take before the lease's Spark job is cancelled outright.
_STOP_GRACE_S = 15.0
_TICK_S = 0.5
_LAG_REFRESH_S = 2.0


@dataclass
class PipelineStats:
    """What the display shows: progress and lag per partition, and running totals."""

    started: float = field(default_factory=time.monotonic)
    committed: dict[TP, int] = field(default_factory=dict)
    latest: dict[TP, int] = field(default_factory=dict)
    ends: dict[TP, int] | None = None
    records: int = 0
    bytes: int = 0
    leases: int = 0
    topics: int = 0

    @property
    def lag(self) -> int:
        target = self.ends if self.ends is not None else self.latest
        return sum(max(0, end - self.committed.get(tp, 0)) for tp, end in target.items())

    @property
    def replicated_offsets(self) -> int:
        return sum(self.committed.values())


def build_router(cfg: PipelineConfig) -> stages.TopicRouter:
    """The sink stage's routing policy for this pipeline."""
    spec = cfg.replication.sink.topic
    if isinstance(spec, SameTopicName):
        return stages.SameName()
    if isinstance(spec, PrefixSuffixTopicName):
        return stages.PrefixSuffix(spec.prefix, spec.suffix)
    if isinstance(spec, StaticTopicName):
        return stages.Static(spec.topic)
    if isinstance(spec, ExplicitTopicMap):
        return stages.ExplicitMap(spec.mapping)
    raise TypeError(f"unknown routing {spec!r}")


def record_options(cfg: PipelineConfig) -> RecordOptions:
    t, names = cfg.features.tracing_headers, cfg.tracing.headers
    return RecordOptions(
        keep_headers=cfg.features.header_replication,
        keep_timestamp=cfg.features.keep_record_creation_timestamp,
        partition_by_key=cfg.replication.sink.partition == "hash",
        trace_topic=names.topic if t.topic else None,
        trace_partition=names.partition if t.partition else None,
        trace_offset=names.offset if t.offset else None,
        trace_pipeline=names.pipeline if t.pipeline else None,
    )


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


class Planner:
    """Runs on: driver. Owns the replication loop of one pipeline."""

    def __init__(
        self,
        cfg: PipelineConfig,
        *,
        until_caught_up: bool = False,
        on_tick: Callable[[PipelineStats], None] | None = None,
        spark: object | None = None,
        after_spark_start: Callable[[], None] | None = None,
        member: str | None = None,
        standby: bool = False,
    ) -> None:
        """``spark``: an existing SparkSession to run leases on (kept open at the end);
        by default the planner starts its own from ``spark.master``/``spark.conf``.
        ``member``: this process's name in the assignment topic (default host-pid);
        ``standby``: take partitions only while no other member is alive."""
        self.cfg = cfg
        self.until_caught_up = until_caught_up
        self.on_tick = on_tick
        self.stats = PipelineStats()
        self._stop = threading.Event()
        self.router = build_router(cfg)
        commit = cfg.coordination.commit
        self.selection = stages.TopicSelection(
            cfg.replication.source.topic,
            excluded=[commit.topic, cfg.coordination.assignment.topic],
        )
        self.source = ClusterView(
            "source", cfg.source_client("admin"), cfg.source.connect_timeout.total_seconds()
        )
        self.target = ClusterView(
            "target", cfg.target_client("admin"), cfg.target.connect_timeout.total_seconds()
        )
        self._next_latest_refresh = 0.0
        self._discovered_in_prepare = False
        self.starts: dict[TP, int] = {}
        self.has_progress: set[TP] = set()
        self.routes: dict[str, str] = {}
        self.unrouted_logged: set[str] = set()
        self.spark = spark
        self._owns_spark = spark is None
        self.after_spark_start = after_spark_start
        self.control: LeaseControl | None = None
        self.progress: ProgressStore | None = None
        self.member = member or default_member_name()
        self.standby = standby
        self.assignment: Assignment | None = None
        self._stood_down = False

    # -- public --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the loop to end the current lease cleanly and return (signal-handler safe)."""
        self._stop.set()
        if self.control is not None:
            self.control.end_lease()

    def run(self) -> PipelineStats:
        """Replicate until stopped (or caught up); returns the final statistics."""
        try:
            self._prepare()
            while not self._stop.is_set():
                if self.until_caught_up and self._caught_up():
                    break
                self._lease()
            return self.stats
        except StandDown:
            self._stood_down = True  # the newer session owns our name: write nothing more
            raise
        finally:
            self.close()

    def close(self) -> None:
        if self.assignment is not None:
            if not self._stood_down:
                with contextlib.suppress(K2KError, KafkaException):
                    self.assignment.leave({})  # others take over without waiting
            self.assignment.close()
            self.assignment = None
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        if self.spark is not None and self._owns_spark:
            with contextlib.suppress(Exception):
                self.spark.stop()
            self.spark = None

    # -- preparation ---------------------------------------------------------------------

    def _prepare(self) -> None:
        cfg = self.cfg
        commit = cfg.coordination.commit
        self.source.topics()  # reachability first: a bounded, named failure
        creation = cfg.topic_creation.control

        def control_topic(name: str, key_path: str, extra: dict[str, str] | None = None) -> int:
            return ensure_control_topic(
                self.target,
                name,
                key_path,
                auto_create=cfg.features.auto_create_control_topics,
                validate=cfg.features.validate_control_topic_settings,
                partitions=creation.partitions,
                replication_factor=creation.replication_factor,
                configs={**creation.configs, **(extra or {})},
            )

        self.commit_partitions = control_topic(commit.topic, "coordination.commit.topic")
        assign = cfg.coordination.assignment
        # One clock for liveness: the broker's (see k2k.coordination.assignment).
        self.assignment_partitions = control_topic(
            assign.topic,
            "coordination.assignment.topic",
            {"message.timestamp.type": "LogAppendTime"},
        )
        self.assignment = Assignment(
            producer_conf=producer_settings(
                cfg.target_client("producer"), False, exactly_once=True
            ),
            consumer_conf=cfg.target_client("consumer"),
            topic=assign.topic,
            partitions=self.assignment_partitions,
            group=cfg.commit_group,
            member=self.member,
            standby=self.standby,
            grace_s=assign.grace_window.total_seconds(),
            fencing_parallelism=assign.fencing_max_parallelism,
            sync_timeout_s=commit.sync_timeout.total_seconds(),
            on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
        )
        self.assignment.catch_up()
        log.info(
            "member %s of commit group %s (%s)",
            self.member,
            cfg.commit_group,
            "standby" if self.standby else "active",
        )
        self.progress = ProgressStore(
            cfg.target_client("consumer"),
            commit.topic,
            cfg.commit_group,
            sync_timeout_s=commit.sync_timeout.total_seconds(),
            on_sync_timeout=cfg.error_handling.on_commit_sync_timeout,
            on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
        )
        for tp, rec in self.progress.load().items():
            self.starts[tp] = rec.offset
            self.has_progress.add(tp)
        topics = self._discover()
        self._discovered_in_prepare = True
        if self.until_caught_up:
            tps = [(t, p) for t, info in topics.items() for p in range(info.partitions)]
            self.stats.ends = self.source.offsets(tps, "latest")
        self.stats.committed = dict(self.starts)
        self.source_consumer = consumer_settings(
            cfg.source_client("consumer"), group_id=f"k2k.{cfg.name}"
        )
        producer_props = cfg.target_client("producer")
        self.target_producer = producer_settings(
            producer_props,
            partition_by_key=cfg.replication.sink.partition == "hash",
            exactly_once=cfg.features.exactly_once,
        )
        # The user's delivery timeout, applied by the runner to whole commit batches. Not the
        # effective setting: at-least-once forces librdkafka's own expiry off (see
        # PRODUCER_FORCED); exactly-once keeps it, bounded by the transaction timeout.
        self.ack_timeout_s = delivery_timeout_s(
            self.target_producer if cfg.features.exactly_once else producer_props
        )
        if self.spark is None:
            from k2k.pipeline.spark import start_spark

            self.spark = start_spark(f"k2k:{cfg.name}", cfg.spark.master, dict(cfg.spark.conf))
            if self.after_spark_start is not None:
                self.after_spark_start()  # e.g. take SIGINT back from PySpark's own handler
        sc = self.spark.sparkContext
        if cfg.spark.master.startswith("local"):
            self.control = LeaseControl("127.0.0.1")
        else:  # executors elsewhere reach the driver at spark.driver.host
            host = sc.getConf().get("spark.driver.host", socket.gethostname())
            self.control = LeaseControl(host, bind_host="0.0.0.0")
        if self._stop.is_set():
            self.control.end_lease()

    def _discover(self) -> dict[str, TopicInfo]:
        """Selected, routed source topics; creates or checks their target topics."""
        source_topics = self.source.topics()
        listed = self.cfg.replication.source.topic
        if not isinstance(listed, str):
            absent = sorted(set(listed) - set(source_topics))
            if absent:
                raise TopicError(
                    f"replication source topic(s) {', '.join(repr(t) for t in absent)} "
                    f"listed in replication.source.topic do not exist on the source cluster at "
                    f"{self.source.bootstrap}"
                )
        selected: dict[str, TopicInfo] = {}
        for name, info in sorted(source_topics.items()):
            if not self.selection.should_replicate(name):
                continue
            target = self.router.route(name)
            if target is None:
                if name not in self.unrouted_logged:
                    log.warning(
                        "source topic %s has no route in replication.sink.topic; not replicated",
                        name,
                    )
                    self.unrouted_logged.add(name)
                continue
            if target == name and self.source.bootstrap == self.target.bootstrap:
                raise TopicError(
                    f"topic {name!r} would be replicated onto itself (same cluster, same name)"
                )
            selected[name] = info
        if self.until_caught_up and self.stats.ends is not None:
            known = {t for t, _ in self.stats.ends}
            selected = {t: i for t, i in selected.items() if t in known}
        known = getattr(self, "selected", {})
        new = [
            t
            for t in selected
            if t not in self.routes
            or known.get(t, selected[t]).partitions != selected[t].partitions
        ]
        if new:
            self._ensure_targets({t: selected[t] for t in new}, source_topics)
            for t in new:
                self.routes[t] = self.router.route(t) or t
        self.stats.topics = len(selected)
        missing_starts = [
            (t, p)
            for t, info in selected.items()
            for p in range(info.partitions)
            if (t, p) not in self.starts
        ]
        if missing_starts:
            reset = self.cfg.source_client("consumer").get("auto.offset.reset", "earliest")
            which = "latest" if reset in ("latest", "largest", "end") else "earliest"
            self.starts.update(self.source.offsets(missing_starts, which))
        self.selected = selected
        return selected

    def _ensure_targets(
        self, topics: dict[str, TopicInfo], source_topics: dict[str, TopicInfo]
    ) -> None:
        """Create (``autoCreateTopics``) or check the target topic of every new source topic."""
        cfg = self.cfg
        by_source = cfg.replication.sink.partition == "source"
        wanted: dict[str, int] = {}
        first_source: dict[str, str] = {}
        for name, info in topics.items():
            target = self.router.route(name) or name
            wanted[target] = max(wanted.get(target, 0), info.partitions)
            first_source.setdefault(target, name)
        existing = self.target.topics()
        creation = cfg.topic_creation.replicated
        for target, partitions in wanted.items():
            if target in existing:
                have = existing[target].partitions
                if by_source and have < partitions:
                    raise TopicError(
                        f"target topic {target!r} has {have} partitions but source partitions up "
                        f"to {partitions - 1} map to it (replication.sink.partition: source); "
                        f"add partitions to the target topic or use partition: hash"
                    )
                continue
            if not cfg.features.auto_create_topics:
                raise TopicError(
                    f"target topic {target!r} (for source topic {first_source[target]!r}) is "
                    f"missing on the target cluster at {self.target.bootstrap}; create it or set "
                    f"features.autoCreateTopics: enabled"
                )
            configs = {**self.source.non_default_configs(first_source[target]), **creation.configs}
            count = creation.partitions or partitions
            if by_source and count < partitions:
                raise TopicError(
                    f"topicCreation.replicated.partitions is {count} but source topic "
                    f"{first_source[target]!r} has {partitions} partitions (partition: source)"
                )
            log.info("creating target topic %s (%d partitions)", target, count)
            self.target.create_topic(target, count, creation.replication_factor, configs)
            self.target.wait_for_topic(target)

    # -- leases --------------------------------------------------------------------------

    def _caught_up(self) -> bool:
        ends = self.stats.ends or {}
        return all(
            tp in self.has_progress and self.starts.get(tp, 0) >= end for tp, end in ends.items()
        )

    def _ranges(self) -> list[PartitionRange]:
        ends = self.stats.ends
        out = []
        for t, info in self.selected.items():
            for p in range(info.partitions):
                if ends is not None and (t, p) not in ends:
                    continue  # a partition added after the start (--until-caught-up)
                end = ends.get((t, p)) if ends is not None else None
                start = self.starts[(t, p)]
                if end is not None and start >= end and (t, p) in self.has_progress:
                    continue
                out.append(PartitionRange(t, p, start, end, (t, p) in self.has_progress))
        return out

    def _lease(self) -> None:
        cfg = self.cfg
        assert self.spark is not None and self.control is not None
        if self._discovered_in_prepare:
            self._discovered_in_prepare = False  # _prepare just did it for this first pass
        else:
            self._discover()  # a lease boundary is where new topics take effect
        assert self.assignment is not None
        self.assignment.catch_up()
        members = self.assignment.active_members()
        everything = [(t, p) for t, info in self.selected.items() for p in range(info.partitions)]
        mine = set(self.assignment.share(everything, members))
        ranges = [r for r in self._ranges() if (r.topic, r.partition) in mine]
        if not ranges:
            if self.until_caught_up and mine:
                self._stop.set()  # nothing left to read: deleted topics can never catch up
                return
            self._idle_until_discovery(members)
            return
        self.stats.latest = self.source.offsets([(r.topic, r.partition) for r in ranges], "latest")
        latest = self.stats.latest

        def weight(r: PartitionRange) -> int:
            end = r.end if r.end is not None else latest.get((r.topic, r.partition), r.start)
            return max(0, end - r.start)

        slots = cfg.spark.parallelism or self.spark.sparkContext.defaultParallelism
        groups = self._claim(plan_groups(ranges, slots, weight))
        if self._stop.is_set():
            # Not released: this claim may not have fenced its predecessors yet, so the
            # next claimant must still deal with them (see Assignment.acquire).
            return
        self.stats.leases += 1
        self.control.new_lease()
        if self._stop.is_set():
            return
        commit = cfg.coordination.commit
        spec = LeaseSpec(
            lease_id=self.stats.leases,
            pipeline=cfg.name,
            commit_group=cfg.commit_group,
            commit_topic=commit.topic,
            commit_partitions=self.commit_partitions,
            source_consumer=self.source_consumer,
            target_producer=self.target_producer,
            routes={t: self.routes[t] for t in self.selected},
            options=record_options(cfg),
            batch_size=commit.batch_size,
            batch_timeout_s=commit.batch_timeout.total_seconds(),
            lease_s=cfg.spark.lease_duration.total_seconds(),
            control=self.control.address,
            ack_timeout_s=self.ack_timeout_s,
            exactly_once=cfg.features.exactly_once,
            member=self.member,
            assignment_topic=cfg.coordination.assignment.topic,
            assignment_partitions=self.assignment_partitions,
            control_consumer=cfg.target_client("consumer"),
            sync_timeout_s=commit.sync_timeout.total_seconds(),
            on_sync_timeout=cfg.error_handling.on_commit_sync_timeout,
            on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
        )
        log.debug("lease %d: %d groups over %d partitions", spec.lease_id, len(groups), len(ranges))
        summaries = self._run_job(spec, groups, members)
        self._release(groups, summaries)
        self._fold(summaries)

    def _claim(self, groups: list[RunnerGroup]) -> list[RunnerGroup]:
        """Claim every partition of the lease for this member (one transactional id per
        runner slot in exactly-once mode), waiting for or fencing previous owners."""
        assert self.assignment is not None
        eos = self.cfg.features.exactly_once
        wanted: dict[TP, str] = {}
        for g in groups:
            txid = transactional_id(self.cfg.commit_group, self.member, g.index) if eos else ""
            for r in g.ranges:
                wanted[(r.topic, r.partition)] = txid
        claims = self.assignment.acquire(wanted, self._stop.is_set)
        return [
            dataclasses.replace(
                g,
                transactional_id=wanted[(g.ranges[0].topic, g.ranges[0].partition)] or None,
                claims=tuple(
                    (r.topic, r.partition, claims[(r.topic, r.partition)]) for r in g.ranges
                ),
            )
            for g in groups
        ]

    def _release(self, groups: list[RunnerGroup], summaries: list[RunnerSummary]) -> None:
        """Release the partitions of every runner that returned (its producer is done),
        except fenced ones: another member owns those now."""
        assert self.assignment is not None
        by_index = {g.index: g for g in groups}
        done: dict[TP, str] = {}
        for s in summaries:
            if s.fenced:
                log.warning(
                    "lease %d runner %d stood down: %s", self.stats.leases, s.group, s.fenced
                )
                continue
            for t, p, claim in by_index[s.group].claims:
                done[(t, p)] = claim
        if done:
            self.assignment.release(done)

    def _run_job(
        self, spec: LeaseSpec, groups: list[RunnerGroup], members: tuple[str, ...]
    ) -> list[RunnerSummary]:
        sc = self.spark.sparkContext  # type: ignore[union-attr]
        job_group = f"k2k-{self.cfg.name}-lease-{spec.lease_id}"
        outcome: dict[str, object] = {}

        def job() -> None:
            sc.setJobGroup(job_group, f"k2k lease {spec.lease_id}", interruptOnCancel=True)
            try:
                rdd = sc.parallelize(groups, len(groups))
                outcome["result"] = rdd.mapPartitions(functools.partial(run_groups, spec)).collect()
            except Exception as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=job, name=job_group, daemon=True)
        thread.start()
        next_discovery = (
            time.monotonic() + self.cfg.replication.source.discovery_interval.total_seconds()
        )
        stop_seen: float | None = None
        cancelled = False
        handing_over = False
        claims = {(t, p): c for g in groups for t, p, c in g.claims}
        while thread.is_alive():
            thread.join(_TICK_S)
            if not handing_over and self._assignment_changed(members, claims):
                handing_over = True
                self.control.end_lease()  # type: ignore[union-attr]
            try:
                self._tick()
            except K2KError as exc:
                log.warning("progress display: %s", exc)
            now = time.monotonic()
            if self._stop.is_set():
                stop_seen = stop_seen or now
                self.control.end_lease()  # type: ignore[union-attr]
                if now - stop_seen > _STOP_GRACE_S:
                    log.warning(
                        "runners did not stop within %.0f s; cancelling the lease", _STOP_GRACE_S
                    )
                    cancelled = True
                    sc.cancelJobGroup(job_group)
                    thread.join(5)
                    break
            elif now >= next_discovery:
                next_discovery = (
                    now + self.cfg.replication.source.discovery_interval.total_seconds()
                )
                if self._topics_changed():
                    log.info("new source topics or partitions found; starting a new lease")
                    self.control.end_lease()  # type: ignore[union-attr]
        if "error" in outcome:
            if cancelled:
                return []  # our own cancel after the stop grace: uncommitted work abandoned
            raise ReplicationError(f"a runner task failed: {_spark_error_line(outcome['error'])}")
        return list(outcome.get("result", []))  # type: ignore[arg-type]

    def _fold(self, summaries: list[RunnerSummary]) -> None:
        errors = []
        for s in summaries:
            log.info(
                "lease %d runner %d: %d partitions, %d records in %.1f s%s",
                self.stats.leases,
                s.group,
                len(s.partitions),
                s.records,
                s.seconds,
                f", error: {s.error}" if s.error else "",
            )
            for o in s.partitions:
                tp = (o.topic, o.partition)
                if o.progress_written:
                    self.starts[tp] = max(self.starts.get(tp, 0), o.committed)
                    self.has_progress.add(tp)
                self.stats.committed[tp] = self.starts[tp]
            self.stats.records += s.records
            self.stats.bytes += s.bytes
            if s.error:
                errors.append(s.error)
        self._tick()
        if errors:
            raise ReplicationError(errors[0])

    def _topics_changed(self) -> bool:
        if self.until_caught_up:
            return False  # the set of partitions is fixed at start in this mode
        try:
            current = self.source.topics()
        except K2KError as exc:
            log.warning("topic discovery failed: %s", exc)
            return False
        for name, info in current.items():
            if not self.selection.should_replicate(name) or self.router.route(name) is None:
                continue
            if self.until_caught_up and name not in self.selected:
                continue
            known = self.selected.get(name)
            if known is None or known.partitions != info.partitions:
                return True
        return False

    def _idle_until_discovery(self, members: tuple[str, ...]) -> None:
        deadline = time.monotonic() + self.cfg.replication.source.discovery_interval.total_seconds()
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._stop.wait(_TICK_S)
            self._tick()
            if self._assignment_changed(members, {}):
                return

    def _assignment_changed(self, members: tuple[str, ...], claims: dict[TP, str]) -> bool:
        """True when the lease should end: the members changed, or a partition of ours was
        claimed by another member. Raises :class:`StandDown` for a newer session of ours."""
        assert self.assignment is not None
        try:
            self.assignment.tick()
        except StandDown:
            self._stood_down = True
            raise
        now = self.assignment.active_members()
        if now != members:
            log.info(
                "members of %s now %s (were %s); re-planning",
                self.cfg.commit_group,
                ", ".join(now),
                ", ".join(members),
            )
            return True
        lost = self.assignment.claimed_elsewhere(claims)
        if lost:
            log.info("%d partitions claimed by another member; re-planning", len(lost))
            return True
        return False

    def _tick(self) -> None:
        now = time.monotonic()
        if self.stats.ends is None and now >= self._next_latest_refresh and self.stats.latest:
            # Continuous mode: refresh the source's end offsets for the lag shown live.
            self._next_latest_refresh = now + _LAG_REFRESH_S
            try:
                self.stats.latest = self.source.offsets(list(self.stats.latest), "latest")
            except K2KError as exc:
                log.warning("could not refresh source end offsets: %s", exc)
        if self.progress is not None:
            for rec in self.progress.poll():
                tp = (rec.topic, rec.partition)
                self.stats.committed[tp] = max(self.stats.committed.get(tp, 0), rec.offset)
        if self.on_tick is not None:
            self.on_tick(self.stats)


def _spark_error_line(exc: object) -> str:
    """The last meaningful line of a Spark/Py4J error (the Python exception, if any)."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("at ")]  # Java stack frames
    for ln in reversed(lines):
        if _EXCEPTION_LINE.match(ln):
            return ln[:500]
    return (lines[-1] if lines else repr(exc))[:500]


#: "SomeError: message" or "pkg.SomeException(...)", as Python and Java print exceptions.
_EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception)\b")
