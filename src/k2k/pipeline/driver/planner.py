"""The planner: the driver loop of ``k2k start``.

Runs on: driver. After preparing (control topics, MM2 heartbeats and checkpoints,
membership, committed progress, a first discovery, Spark and the lease channel), one pass of
the loop is one *lease*:

1. **discover** the selected source topics and their routes, create or check the target
   topics (:mod:`k2k.pipeline.driver.discovery`);
2. **plan**: turn committed progress into one offset range per partition of this member's
   share (:mod:`k2k.pipeline.driver.positions`) and split them into at most P *runner groups*
   (P = Spark task slots, or ``spark.parallelism``), balanced by remaining lag
   (:func:`k2k.pipeline.plan.plan_groups`);
3. **claim** the partitions in the assignment topic (:mod:`k2k.pipeline.driver.membership`);
4. **run** one Spark job whose tasks copy until the lease deadline or until the planner ends
   the lease early (:mod:`k2k.pipeline.driver.lease`), then release the partitions;
5. **fold** the runners' summaries into the committed progress; stop on a runner fault,
   but wait out an outage (a cluster that did not answer in time) and plan again
   (:mod:`k2k.pipeline.driver.outage`).

Progress lives on the target cluster, so the driver needs no Spark checkpoint and a
restarted driver simply reads the commit topic again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from k2k.config import PipelineConfig
from k2k.coordination.assignment import StandDown, default_member_name
from k2k.coordination.controltopics import ControlTopics, ensure_control_topics
from k2k.coordination.progress import ProgressStore
from k2k.errors import (
    ClusterError,
    ReplicationError,
    SchemaMappingError,
    TopicError,
    Unavailable,
)
from k2k.kafka.diagnose import diagnosed_on_failure
from k2k.observability.reachability import ClusterWatch
from k2k.observability.stats import LiveStats, PipelineStats
from k2k.pipeline.channel import LeaseControl
from k2k.pipeline.driver.discovery import Discovery
from k2k.pipeline.driver.lease import LeaseJob, lease_template, open_channel
from k2k.pipeline.driver.membership import Membership
from k2k.pipeline.driver.outage import OutageRider
from k2k.pipeline.driver.positions import StartPositions
from k2k.pipeline.driver.services.aclsync import TopicAclSync
from k2k.pipeline.driver.services.checkpoints import CheckpointEmitter, ensure_checkpoints_topic
from k2k.pipeline.driver.services.configsync import TopicConfigSync
from k2k.pipeline.driver.services.heartbeats import HeartbeatEmitter, ensure_heartbeats_topic
from k2k.pipeline.plan import LeaseSpec, PartitionRange, RunnerGroup, RunnerSummary, plan_groups
from k2k.pipeline.task.mappings import MappingPublisher
from k2k.schemamapping import check_registries
from k2k.spark.session import context_of, spark_context_running, start_spark, stop_spark

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from k2k.metrics.replicator import ReplicatorMetrics

__all__ = ["PipelineStats", "Planner"]


def _seconds(duration: timedelta | None) -> float | None:
    return None if duration is None else duration.total_seconds()


log = logging.getLogger("k2k.planner")


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """What :meth:`Planner._prepare` sets up for the leases."""

    live: LiveStats
    job: LeaseJob
    #: Every field but ``lease_id`` and ``topics`` is the same for all leases.
    template: LeaseSpec


class Planner:
    """Runs on: driver. Owns the replication loop of one pipeline."""

    def __init__(
        self,
        cfg: PipelineConfig,
        *,
        until_caught_up: bool = False,
        on_tick: Callable[[PipelineStats], None] | None = None,
        spark: SparkSession | SparkContext | None = None,
        after_spark_start: Callable[[], None] | None = None,
        member: str | None = None,
        standby: bool = False,
        telemetry: bool = False,
    ) -> None:
        """Runs on: driver. Connects nothing yet: :meth:`run` does.

        ``spark``: an existing SparkSession (or SparkContext) to run leases on (kept open
        at the end); by default the planner starts its own from ``spark.master`` and
        ``spark.conf`` (and stops it at the end), or joins the SparkContext the process
        runs (and keeps it).
        ``member``: this process's name in the assignment topic (default host-pid);
        ``standby``: take partitions only while no other member is alive;
        ``telemetry``: export metrics (k2k.metrics, chosen by ``OTEL_*`` variables)."""
        self.cfg = cfg
        self.until_caught_up = until_caught_up
        self.on_tick = on_tick
        self.stats = PipelineStats()
        self.discovery = Discovery(cfg)
        self.config_sync = TopicConfigSync.of(cfg, self.discovery.source, self.discovery.target)
        self.acl_sync = TopicAclSync.of(cfg, self.discovery.source, self.discovery.target)
        self.watch = ClusterWatch(
            {"source": self.discovery.source, "target": self.discovery.target}
        )
        self.positions = StartPositions()
        self.member = member or default_member_name()
        self.standby = standby
        self.spark = None if spark is None else context_of(spark)
        self._owns_spark = spark is None
        self.after_spark_start = after_spark_start
        self._stop = threading.Event()
        # Opened by run(), closed by close():
        self.membership: Membership | None = None
        self.progress: ProgressStore | None = None
        self.control: LeaseControl | None = None
        self.telemetry = telemetry
        self.metrics: ReplicatorMetrics | None = None
        self.outages: OutageRider | None = None
        self.heartbeats: HeartbeatEmitter | None = None
        self.checkpoints: CheckpointEmitter | None = None
        self._fencings = 0

    # -- public --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Runs on: driver, any thread. Ask the loop to end the current lease cleanly and
        return (signal-handler safe)."""
        self._stop.set()
        if self.control is not None:
            self.control.end_lease()

    def run(self) -> PipelineStats:
        """Runs on: driver. Replicate until stopped (or caught up); returns the final
        statistics. Closes everything it opened, also on errors."""
        try:
            prepared = self._prepare()
            outages = self.outages = OutageRider(
                {"source": self.discovery.source, "target": self.discovery.target},
                _seconds(self.cfg.error_handling.max_outage),
                self._stop,
                self.watch.reachability.down_since,
                describe=self.watch.reachability.describe,
            )
            discover = False  # _prepare just discovered, for the first lease
            while not self._stop.is_set():
                if self.until_caught_up and self.positions.caught_up(self.stats.ends or {}):
                    break
                try:
                    self._lease(prepared, discover=discover)
                except Unavailable as exc:
                    outages.wait(exc)  # raises once the outage outlasts maxOutage
                else:
                    outages.over()
                discover = True
            if self.checkpoints is not None:
                self.checkpoints.last_pass()
            return self.stats
        except StandDown:
            if self.membership is not None:
                self.membership.stood_down = True  # the newer session owns our name
            raise
        except Exception as exc:
            if self.metrics is not None:
                self.metrics.failed(exc)  # before close(): the last export carries it
            raise
        finally:
            self.close()

    def _start_mm2_emitters(self) -> None:
        """MM2's heartbeats and checkpoints, when enabled: driver threads of their own,
        stopped by :meth:`close`."""
        cfg, target = self.cfg, self.discovery.target
        if cfg.features.heartbeats:
            ensure_heartbeats_topic(cfg, target)
            self.heartbeats = HeartbeatEmitter(cfg)
            self.heartbeats.start()
        if cfg.features.checkpoints:
            ensure_checkpoints_topic(cfg, target)
            self.checkpoints = CheckpointEmitter(cfg)
            self.checkpoints.start()

    def _slots(self, job: LeaseJob) -> int:
        """Runner groups per lease: ``spark.parallelism``, else Spark's default parallelism.
        A local master never runs more tasks at once than it has cores, and a group beyond
        them would wait for a free one until the lease ends, so there it is capped."""
        slots: int = job.sc.defaultParallelism
        wanted = self.cfg.spark.parallelism
        if wanted is None:
            return slots
        return min(wanted, slots) if (job.sc.master or "").startswith("local") else wanted

    def close(self) -> None:
        """Runs on: driver. Stop the heartbeats and checkpoints, leave the commit group, then
        close the lease channel, the progress store and the SparkContext this planner
        started (idempotent)."""
        self.watch.close()
        if self.heartbeats is not None:
            self.heartbeats.close()
            self.heartbeats = None
        if self.checkpoints is not None:
            self.checkpoints.close()
            self.checkpoints = None
        if self.membership is not None:
            self.membership.close()
            self.membership = None
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        if self.spark is not None and self._owns_spark:
            # Best effort on the way out: must not hide the error that ended the run.
            with contextlib.suppress(Exception):
                stop_spark(self.spark)
            self.spark = None
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None

    # -- preparation ---------------------------------------------------------------------

    def _prepare(self) -> _Prepared:
        """Everything before the first lease: the clusters answer, the control topics exist,
        this member joined, committed progress is read, Spark runs."""
        cfg = self.cfg
        control_topics = self._connect()
        self.watch.start()  # both answered: from now on an outage is reported (and when it ends)
        self._start_mm2_emitters()
        log.info("joining commit group %s", cfg.commit_group)
        self.membership = Membership(cfg, self.member, self.standby, control_topics.assignment)
        self.membership.join()
        progress = self._load_progress()
        self._discover()
        log.info("source topics selected: %d", self.stats.topics)
        if self.until_caught_up:
            self.stats.ends = self.discovery.source.offsets(self.discovery.partitions(), "latest")
        self.stats.committed = dict(self.positions.starts)
        template = self._lease_template(control_topics)
        sc = self._start_spark()
        self.control = open_channel(sc, cfg.spark.control_host, cfg.spark.control_port)
        if self.metrics is not None:
            self.control.on_frame = self.metrics.on_frame
        if self._stop.is_set():
            self.control.end_lease()
        return _Prepared(
            live=LiveStats(self.stats, self.discovery.source, progress, self.on_tick),
            job=LeaseJob(
                sc,
                cfg.name,
                self.control,
                self._stop,
                cfg.replication.source.discovery_interval.total_seconds(),
            ),
            template=dataclasses.replace(template, control=self.control.address),
        )

    def _connect(self) -> ControlTopics:
        """Both clusters answer, the control topics exist (and the registries answer, with
        schema mapping): the partitions of the commit, assignment and mapping topics."""
        cfg = self.cfg
        with diagnosed_on_failure(cfg, logging.getLogger("k2k.diagnose")):
            log.info("connecting to the source at %s", self.discovery.source.bootstrap)
            self.discovery.source.topics()  # reachability first: a bounded, named failure
            log.info("checking control topics on the target at %s", self.discovery.target.bootstrap)
            control_topics = ensure_control_topics(cfg, self.discovery.target)
        if cfg.features.schema_mapping:
            log.info("checking the source and target schema registries")
            check_registries(cfg)
        return control_topics

    def _load_progress(self) -> ProgressStore:
        """This commit group's progress store (kept on ``self`` before it reads, so that
        :meth:`close` closes it also when the read fails), its committed progress read:
        where each partition starts."""
        commit = self.cfg.coordination.commit
        self.progress = progress = ProgressStore(
            self.cfg.target_client("consumer"),
            commit.topic,
            self.cfg.commit_group,
            sync_timeout_s=commit.sync_timeout.total_seconds(),
            on_sync_timeout=self.cfg.error_handling.on_commit_sync_timeout,
            on_bad_record=self.cfg.error_handling.on_control_message_deserialization_error,
        )
        log.info("reading committed progress from %s", commit.topic)
        committed = progress.load()
        self.positions.load(
            {tp: rec.offset for tp, rec in committed.items()},
            {tp: rec.topic_id for tp, rec in committed.items()},
        )
        return progress

    def _lease_template(self, control_topics: ControlTopics) -> LeaseSpec:
        """What every lease's spec shares; with ``-t``, the replicator's metrics start here,
        and source records lost to a deleted topic are counted."""
        cfg = self.cfg
        template = lease_template(
            cfg,
            commit_partitions=control_topics.commit,
            assignment_partitions=control_topics.assignment,
            member=self.member,
        )
        if control_topics.mappings:
            publisher = MappingPublisher(
                cfg.name, cfg.offset_mapping.topic, control_topics.mappings
            )
            template = dataclasses.replace(template, observer=publisher)
        if self.telemetry:
            from k2k.metrics.replicator import replicator_metrics  # OpenTelemetry only with -t

            self.metrics = replicator_metrics(cfg, self.member, self.stats, self.discovery.target)
            metrics = self.metrics
            self.discovery.on_records_lost = lambda t, p, n: metrics.lost(t, p, n, "deleted-topic")
            template = dataclasses.replace(template, telemetry=True)
        return template

    def _start_spark(self) -> SparkContext:
        if self.spark is None:
            cfg = self.cfg
            log.info("starting Spark")
            self._owns_spark = not spark_context_running()  # else the embedding program's
            self.spark = start_spark(f"k2k:{cfg.name}", cfg.spark.master, dict(cfg.spark.conf))
            # The real master: spark-submit's, when it launched k2k (see start_spark).
            log.info("Spark started (master %s)", self.spark.master)
            if self.after_spark_start is not None:
                self.after_spark_start()  # e.g. take SIGINT back from PySpark's own handler
        return self.spark

    def _discover(self) -> None:
        ends = self.stats.ends
        topics = self.discovery.discover(
            self.positions, ends, self.stats.latest, self.stats.committed
        )
        self.stats.topics = len(topics)
        if ends is not None:
            # --until-caught-up: a deleted topic has no end to reach; a re-created one's is
            # the new topic's.
            kept = {tp: end for tp, end in ends.items() if tp[0] in topics}
            again = [tp for tp in kept if tp[0] in self.discovery.recreated]
            kept.update(self.discovery.source.offsets(again, "latest"))
            self.stats.ends = kept

    # -- leases --------------------------------------------------------------------------

    def _replan_now(self, members: tuple[str, ...], others: list[PartitionRange]) -> bool:
        """An idle member plans again when the members change or, ``--until-caught-up``,
        once the others' partitions reached their ends."""
        assert self.membership is not None
        if self.membership.changed(members, {}):
            return True
        return self.until_caught_up and not self._left_to_others(others)

    def _left_to_others(self, ranges: list[PartitionRange]) -> list[PartitionRange]:
        """``--until-caught-up``: of ``ranges`` (none of them this member's), those whose
        end no member has committed yet, as the commit topic's tail says."""
        committed = self.stats.committed
        return [
            r
            for r in ranges
            if r.end is not None and committed.get((r.topic, r.partition), r.start) < r.end
        ]

    def _lease(self, prepared: _Prepared, *, discover: bool) -> None:
        """One pass of the loop: discover -> plan -> claim -> run -> fold."""
        assert self.membership is not None and self.control is not None
        membership, live, job = self.membership, prepared.live, prepared.job
        if discover:
            self._discover()  # a lease boundary is where new topics take effect
        members, mine = membership.share(self.discovery.partitions())
        everything = self.positions.ranges(self.discovery.selected, self.stats.ends)
        ranges = [r for r in everything if (r.topic, r.partition) in mine]
        if not ranges:
            if self.until_caught_up and not self._left_to_others(everything):
                self._stop.set()  # nothing left to read: deleted topics can never catch up
                return
            # The rest is another member's, maybe one that died and is not yet past its
            # grace window: wait for it to finish or for its partitions to be dealt anew.
            job.idle(lambda: self._replan_now(members, everything), live.tick, self._outlasted)
            self._give_up_if_decided(job)
            return
        slots = self._slots(job)
        groups = membership.claim(self._plan(ranges, slots), self._stop.is_set)
        if self._stop.is_set():
            # Not released: this claim may not have fenced its predecessors yet, so the
            # next claimant must still deal with them (see Assignment.acquire).
            return
        self.stats.leases += 1
        if self.metrics is not None:
            self.metrics.lease_started()
        self.control.new_lease()
        if self._stop.is_set():
            return
        if self.outages is not None:
            self.outages.resumed()
        spec = dataclasses.replace(
            prepared.template,
            lease_id=self.stats.leases,
            topics=self.discovery.plans(),
            topic_ids=self.discovery.topic_ids(),
        )
        level = logging.INFO if spec.lease_id == 1 else logging.DEBUG  # the last start-up step
        log.log(
            level, "lease %d: %d groups over %d partitions", spec.lease_id, len(groups), len(ranges)
        )
        claims = {(t, p): c for g in groups for t, p, c in g.claims}
        summaries = job.run(
            spec,
            groups,
            reassigned=lambda: membership.changed(members, claims),
            tick=live.tick,
            topics_changed=None if self.until_caught_up else self._check_topics,
            outlasted=self._outlasted,
        )
        membership.release(spec.lease_id, groups, summaries)
        if self.metrics is not None:
            fencings, self._fencings = membership.fencings - self._fencings, membership.fencings
            self.metrics.lease_ended(spec.lease_id, summaries, fencings)
        self.positions.fold(spec.lease_id, summaries, self.stats)
        live.tick()
        self._give_up_if_decided(job)  # before the runners' own errors: the documented line
        failed = [s for s in summaries if s.error]
        if failed:
            self._lease_failed(spec.lease_id, failed)

    def _lease_failed(self, lease_id: int, failed: list[RunnerSummary]) -> None:
        """After runners failed: a target topic deleted meanwhile ends the run; else plan
        again if the source topics changed under them; raise :class:`Unavailable` for an
        outage (:meth:`run` waits it out); else end the run with the runners' error."""
        self._check_targets_after_failure()
        if self.discovery.sources_changed():
            log.info("lease %d failed while source topics changed; planning again", lease_id)
            return
        # Only outages are waited out: failures that say a cluster did not answer, or
        # any failure while a cluster does not answer the probes. Others end the run.
        outage = all(s.error_class == Unavailable.__name__ for s in failed)
        outage = outage or self.watch.reachability.down_since() is not None
        if outage:
            raise Unavailable(failed[0].error)
        # A schema-mapping failure keeps its class: callers and the CLI can tell it apart.
        mapping = [s for s in failed if s.error_class == SchemaMappingError.__name__]
        raise (SchemaMappingError if mapping else ReplicationError)((mapping or failed)[0].error)

    def _outlasted(self) -> Unavailable | None:
        return self.outages.outlasted() if self.outages is not None else None

    def _give_up_if_decided(self, job: LeaseJob) -> None:
        """End the run when the lease or the idle wait was ended for ``maxOutage`` (unless a
        stop was requested since: a stop ends the run cleanly)."""
        if job.gave_up is not None and not self._stop.is_set():
            raise job.gave_up

    def _check_topics(self) -> bool:
        """Runs on: driver, every discovery interval while a lease runs. Syncs topic configs
        and ACLs when due (they need no new lease); True when the topics changed (a new
        lease)."""
        for sync in (self.config_sync, self.acl_sync):
            if sync is not None:
                sync.maybe_sync(self.discovery.routes())
        return self.discovery.topics_changed()

    def _check_targets_after_failure(self) -> None:
        """A target topic deleted while replicating is why a lease's writes failed: say that
        (:class:`~k2k.errors.TopicError`). Skipped while a cluster does not answer the
        probes, and a check that gets no answer changes nothing: the lease's own error
        stands."""
        if self.watch.reachability.down_since() is not None:
            return
        try:
            self.discovery.check_targets()
        except TopicError:
            raise
        except ClusterError:
            return  # no answer: the lease's own error stands

    def _plan(self, ranges: list[PartitionRange], slots: int) -> list[RunnerGroup]:
        """Split ``ranges`` into at most ``slots`` runner groups balanced by their lag now."""
        self.stats.latest = self.discovery.source.offsets(
            [(r.topic, r.partition) for r in ranges], "latest"
        )
        latest = self.stats.latest
        self.discovery.saw_ends(latest)

        def weight(r: PartitionRange) -> int:
            end = r.end if r.end is not None else latest.get((r.topic, r.partition), r.start)
            return max(0, end - r.start)

        return plan_groups(ranges, slots, weight)
