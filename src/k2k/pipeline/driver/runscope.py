"""What lives for one run of the planner, opened in start-up order and closed on one stack.

Runs on: driver, once per ``k2k start``. :func:`open_run` prepares a run step by step: both
clusters answer and the control topics exist, the cluster watch starts, this member joins
its commit group, MM2 heartbeats and checkpoints start, Spark starts (in the background,
beside the next two steps), committed progress is read, the first discovery runs, metrics
start (``-t``), Spark runs and the lease channel listens.
A pipeline that ``k2k cutover`` drained stops at the join
(:class:`~k2k.pipeline.driver.cutover.CutOver`): before Spark, progress and the MM2
services, having written nothing but its own member records.
Each resource goes onto one :class:`contextlib.ExitStack` the moment it opens, so a step
that fails closes exactly what the steps before it opened.

The stack closes in reverse: the lease channel (no runner frame after the metrics' last
export), the metrics (their last export counts the error that ended the run), the progress
store, the membership (other members take over at once: it leaves before Spark stops), the
checkpoints and heartbeats, the cluster watch, and last the SparkContext the run started
(the slow step). A newer session of this member's name (``StandDown``) leaves nothing
behind in the assignment topic.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from k2k.config import PipelineConfig
from k2k.coordination.assignment import StandDown
from k2k.coordination.controltopics import ControlTopics, ensure_control_topics
from k2k.coordination.progress import ProgressStore
from k2k.kafka import TP
from k2k.kafka.diagnose import diagnosed_on_failure
from k2k.observability.reachability import ClusterWatch
from k2k.observability.readiness import PipelineReadiness
from k2k.observability.stats import PipelineStats
from k2k.pipeline.channel import LeaseControl, open_channel
from k2k.pipeline.driver.discovery import Discovery
from k2k.pipeline.driver.lease import LeaseJob, lease_template
from k2k.pipeline.driver.membership import Membership
from k2k.pipeline.driver.outage import OutageRider
from k2k.pipeline.driver.planning import LiveProgress, PlanningState
from k2k.pipeline.driver.services.aclsync import TopicAclSync
from k2k.pipeline.driver.services.checkpoints import CheckpointEmitter, ensure_checkpoints_topic
from k2k.pipeline.driver.services.configsync import TopicConfigSync
from k2k.pipeline.driver.services.groupsync import GroupOffsetSync
from k2k.pipeline.driver.services.heartbeats import HeartbeatEmitter, ensure_heartbeats_topic
from k2k.pipeline.plan import LeaseSpec
from k2k.pipeline.task.mappings import MappingPublisher
from k2k.schemamapping import check_registries
from k2k.spark.session import spark_context_running, start_spark, stop_spark

if TYPE_CHECKING:
    from pyspark import SparkContext

    from k2k.metrics.replicator import ReplicatorMetrics

__all__ = ["RunOptions", "RunScope", "open_run"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How the planner runs, beside its config (see :class:`~k2k.pipeline.driver.planner.Planner`)."""

    member: str
    until_caught_up: bool = False
    on_tick: Callable[[PipelineStats], None] | None = None
    #: The caller's SparkContext (kept open at the end); None: join or start one.
    spark: SparkContext | None = None
    after_spark_start: Callable[[], None] | None = None
    standby: bool = False
    telemetry: bool = False
    #: Start offsets for partitions without progress (the reverse run's fork point).
    start_at: Mapping[TP, int] | None = None
    #: With ``telemetry``: the status page's ``k2k status --json`` document, read when viewed.
    status_snapshot: Callable[[], dict[str, Any]] | None = None


@dataclasses.dataclass(frozen=True)
class RunScope:
    """Runs on: driver. Everything one run uses, all of it open (see :func:`open_run`);
    ``heartbeats``, ``checkpoints`` and ``metrics`` are None when not enabled."""

    cfg: PipelineConfig
    options: RunOptions
    planning: PlanningState
    discovery: Discovery
    watch: ClusterWatch
    outages: OutageRider
    membership: Membership
    live: LiveProgress
    #: Topic config and ACL sync, each when enabled: services beside the copy.
    syncs: tuple[TopicConfigSync | TopicAclSync, ...]
    heartbeats: HeartbeatEmitter | None
    checkpoints: CheckpointEmitter | None
    group_sync: GroupOffsetSync | None
    metrics: ReplicatorMetrics | None
    control: LeaseControl
    job: LeaseJob
    #: Every field but ``lease_id`` and ``topics`` is the same for all leases.
    template: LeaseSpec


@contextlib.contextmanager
def open_run(
    cfg: PipelineConfig,
    options: RunOptions,
    planning: PlanningState,
    stats: PipelineStats,
    stop: threading.Event,
) -> Iterator[RunScope]:
    """Runs on: driver. Prepare one run into ``planning`` and ``stats`` and yield its scope;
    everything opened is closed when the ``with`` block ends, also on errors."""
    discovery = Discovery(cfg, options.start_at)
    syncs = _syncs(cfg, discovery)  # their intervals count from now
    views = {"source": discovery.source, "target": discovery.target}
    watch = ClusterWatch(views)
    with contextlib.ExitStack() as stack:
        spark = _RunSpark(cfg, options)
        stack.callback(spark.close)
        stack.callback(watch.close)
        control_topics = _connect(cfg, discovery)
        watch.start()  # both answered: from now on an outage is reported (and when it ends)
        heartbeats, checkpoints = _mm2_services(cfg, discovery, stack)
        group_sync = _group_sync(cfg, stack)
        membership = stack.enter_context(
            Membership(cfg, options.member, options.standby, control_topics.assignment)
        )
        membership.refuse_if_cut_over()  # CutOver once k2k cutover drained the pipeline
        spark.begin()  # the slow step, beside reading progress and the first discovery
        progress = _load_progress(cfg, planning, stack)
        _first_discovery(discovery, planning, stats, options.until_caught_up)
        # Join once Spark is up: other members hand this one its share at the join, and
        # those partitions wait for its first lease (docs/architecture.md#leases-that-do-not-stop).
        sc = spark.context()
        log.info("joining commit group %s", cfg.commit_group)
        membership.join()
        for service in (heartbeats, checkpoints, group_sync):
            if service is not None:
                service.start()
        template = _lease_template(cfg, options.member, control_topics)
        metrics = None
        if options.telemetry:
            seen = (discovery, watch, membership)
            metrics = _start_metrics(cfg, options, stats, seen, stack)
            template = dataclasses.replace(template, telemetry=True)
            statistics = cfg.metrics.client_statistics
            if statistics.enabled:
                clients = dataclasses.replace(
                    template.clients, statistics_interval_ms=statistics.interval_ms
                )
                template = dataclasses.replace(template, clients=clients)
        control = _open_channel(cfg, sc, metrics, stop, stack)
        interval_s = cfg.replication.source.discovery_interval.total_seconds()
        yield RunScope(
            cfg=cfg,
            options=options,
            planning=planning,
            discovery=discovery,
            watch=watch,
            outages=OutageRider(
                views,
                _seconds(cfg.error_handling.max_outage),
                stop,
                watch.reachability.down_since,
                describe=watch.reachability.describe,
                ended=membership.drained_now,
            ),
            membership=membership,
            live=LiveProgress(planning, stats, discovery.source, progress, options.on_tick),
            syncs=syncs,
            heartbeats=heartbeats,
            checkpoints=checkpoints,
            group_sync=group_sync,
            metrics=metrics,
            control=control,
            job=LeaseJob(sc, cfg.name, control, stop, interval_s),
            template=dataclasses.replace(template, control=control.address),
        )


def _seconds(duration: timedelta | None) -> float | None:
    return None if duration is None else duration.total_seconds()


def _connect(cfg: PipelineConfig, discovery: Discovery) -> ControlTopics:
    """Both clusters answer, the control topics exist (and the registries answer, with
    schema mapping): the partitions of the commit, assignment and mapping topics."""
    with diagnosed_on_failure(cfg, logging.getLogger("k2k.diagnose")):
        log.info("connecting to the source at %s", discovery.source.bootstrap)
        discovery.source.topics()  # reachability first: a bounded, named failure
        log.info("checking control topics on the target at %s", discovery.target.bootstrap)
        control_topics = ensure_control_topics(cfg, discovery.target)
    if cfg.features.schema_mapping:
        log.info("checking the source and target schema registries")
        check_registries(cfg)
    return control_topics


def _mm2_services(
    cfg: PipelineConfig, discovery: Discovery, stack: contextlib.ExitStack
) -> tuple[HeartbeatEmitter | None, CheckpointEmitter | None]:
    """MM2's heartbeats and checkpoints, when enabled: driver threads of their own, their
    topics checked and their closing on the stack (so they stop after this member left),
    started by the caller once the member joined (a cut-over pipeline writes nothing)."""
    heartbeats = checkpoints = None
    if cfg.features.heartbeats:
        ensure_heartbeats_topic(cfg, discovery.target)
        heartbeats = HeartbeatEmitter(cfg)
        stack.callback(heartbeats.close)
    if cfg.features.checkpoints:
        ensure_checkpoints_topic(cfg, discovery.target)
        checkpoints = CheckpointEmitter(cfg)
        stack.callback(checkpoints.close)
    return heartbeats, checkpoints


def _group_sync(cfg: PipelineConfig, stack: contextlib.ExitStack) -> GroupOffsetSync | None:
    """Group offset sync, when enabled: a driver thread of its own, closed on the stack."""
    if not cfg.features.sync_group_offsets:
        return None
    sync = GroupOffsetSync(cfg)
    stack.callback(sync.close)
    return sync


def _syncs(cfg: PipelineConfig, discovery: Discovery) -> tuple[TopicConfigSync | TopicAclSync, ...]:
    """Topic config and ACL sync, those enabled: checked while a lease runs."""
    syncs = (
        TopicConfigSync.of(cfg, discovery.source, discovery.target),
        TopicAclSync.of(cfg, discovery.source, discovery.target),
    )
    return tuple(sync for sync in syncs if sync is not None)


def _load_progress(
    cfg: PipelineConfig, planning: PlanningState, stack: contextlib.ExitStack
) -> ProgressStore:
    """This commit group's progress store (on the stack before it reads, so that it is
    closed also when the read fails), its committed progress read: where each partition
    starts."""
    commit = cfg.coordination.commit
    progress = ProgressStore(
        cfg.control_consumer(),
        commit.topic,
        cfg.commit_group,
        sync_timeout_s=commit.sync_timeout.total_seconds(),
        on_sync_timeout=cfg.error_handling.on_commit_sync_timeout,
        on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
    )
    stack.callback(progress.close)
    log.info("reading committed progress from %s", commit.topic)
    committed = progress.load()
    for tp, rec in committed.items():
        planning.take_identity(tp, rec)
    planning.positions.load(
        {tp: rec.offset for tp, rec in committed.items()},
        {tp: rec.topic_id for tp, rec in committed.items()},
    )
    return progress


def _first_discovery(
    discovery: Discovery, planning: PlanningState, stats: PipelineStats, until_caught_up: bool
) -> None:
    """The selected topics, their targets and start offsets; ``--until-caught-up``, the
    ends to reach, captured now."""
    stats.topics = planning.discover(discovery)
    log.info("source topics selected: %d", stats.topics)
    if until_caught_up:
        planning.ends = discovery.source.offsets(discovery.partitions(), "latest")
    planning.committed = dict(planning.positions.starts)


def _open_channel(
    cfg: PipelineConfig,
    sc: SparkContext,
    metrics: ReplicatorMetrics | None,
    stop: threading.Event,
    stack: contextlib.ExitStack,
) -> LeaseControl:
    """The lease channel, listening; runner frames go to ``metrics``. A stop requested
    meanwhile ends the first lease at once."""
    control = open_channel(sc, cfg.spark.control_host, cfg.spark.control_port)
    stack.callback(control.close)
    if metrics is not None:
        control.on_frame = metrics.on_frame
    if stop.is_set():
        control.end_lease()
    return control


def _lease_template(cfg: PipelineConfig, member: str, control_topics: ControlTopics) -> LeaseSpec:
    """What every lease's spec shares, offset mappings' publisher included."""
    template = lease_template(
        cfg,
        commit_partitions=control_topics.commit,
        assignment_partitions=control_topics.assignment,
        member=member,
    )
    if control_topics.mappings:
        publisher = MappingPublisher(cfg.name, cfg.offset_mapping.topic, control_topics.mappings)
        template = dataclasses.replace(template, observer=publisher)
    return template


def _start_metrics(
    cfg: PipelineConfig,
    options: RunOptions,
    stats: PipelineStats,
    seen: tuple[Discovery, ClusterWatch, Membership],
    stack: contextlib.ExitStack,
) -> ReplicatorMetrics:
    """With ``-t``: the replicator's metrics and readiness (``seen``: the clusters, their
    watch and this member's membership), counting source records lost to a deleted topic; the error that ends the
    run is counted before their last export."""
    from k2k.metrics.replicator import replicator_metrics  # OpenTelemetry only with -t

    discovery, watch, membership = seen
    readiness = PipelineReadiness(
        lambda: _own_progress(stats),
        watch.reachability.down_since,
        watch.reachability.describe,
        cfg.metrics.health.unready_after.total_seconds(),
    )
    metrics = replicator_metrics(
        cfg,
        options.member,
        stats,
        (discovery.source, discovery.target),
        (readiness, lambda: len(membership.assignment.alive())),
        status_snapshot=options.status_snapshot,
    )

    def last_export(_type: object, exc: BaseException | None, _tb: object) -> None:
        if isinstance(exc, Exception) and not isinstance(exc, StandDown):
            metrics.failed(exc)
        metrics.close()

    stack.push(last_export)
    discovery.on_records_lost = lambda t, p, n: metrics.lost(t, p, n, "deleted-topic")
    return metrics


def _own_progress(stats: PipelineStats) -> tuple[int, int]:
    """Records behind and the sum of committed offsets, of this member's partitions only:
    another member's progress must not make a stuck one look ready."""
    lags = stats.lag_by_partition()
    committed = dict(stats.committed)
    return sum(lags.values()), sum(committed.get(tp, 0) for tp in lags)


class _RunSpark:
    """The SparkContext leases run on: the caller's, or the one this process runs already,
    or one started here, the only kind the run stops. On the stack before anything else,
    so it stops last.

    Started from a thread of its own (:meth:`begin`) while the driver reads progress and
    discovers topics, so start-up waits for the slower of the two rather than for both;
    PySpark leaves the SIGINT handler alone off the main thread."""

    def __init__(self, cfg: PipelineConfig, options: RunOptions) -> None:
        self.cfg = cfg
        self.given = options.spark
        self.after_start = options.after_spark_start
        self._started: SparkContext | None = None
        self._thread: threading.Thread | None = None
        self._sc: SparkContext | None = None
        self._failed: BaseException | None = None

    def begin(self) -> None:
        """Start Spark in the background (nothing to start with the caller's context)."""
        if self.given is None and self._thread is None:
            self._thread = threading.Thread(target=self._start, name="k2k-spark-start")
            self._thread.start()

    def _start(self) -> None:
        cfg = self.cfg
        log.info("starting Spark")
        try:
            owned = not spark_context_running()  # else the embedding program's
            sc = start_spark(f"k2k:{cfg.name}", cfg.spark.master, dict(cfg.spark.conf))
        except BaseException as exc:  # raised again on the driver's thread by context()
            self._failed = exc
            return
        self._sc = sc
        if owned:
            self._started = sc
        # The real master: spark-submit's, when it launched k2k (see start_spark).
        log.info("Spark started (master %s)", sc.master)

    def context(self) -> SparkContext:
        """The context, once started (waits for :meth:`begin`'s start, or starts it)."""
        if self.given is not None:
            return self.given
        self.begin()
        assert self._thread is not None
        self._thread.join()
        if self._failed is not None:
            raise self._failed
        sc = self._sc
        assert sc is not None
        if self.after_start is not None:
            self.after_start()  # e.g. take SIGINT back from PySpark's own handler
            self.after_start = None
        return sc

    def close(self) -> None:
        """Stop the context started here, once its start is over (a start cannot be
        interrupted half-way)."""
        if self._thread is not None:
            self._thread.join()
        if self._started is not None:
            # Best effort on the way out: must not hide the error that ended the run.
            with contextlib.suppress(Exception):
                stop_spark(self._started)
            self._started = None
