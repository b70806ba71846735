"""The planner: the driver loop of ``k2k start``.

Runs on: driver. After preparing the run's scope (control topics, MM2 heartbeats and
checkpoints, membership, committed progress, a first discovery, Spark and the lease channel:
:mod:`k2k.pipeline.driver.runscope`), one pass of the loop is one *lease*:

1. **discover** the selected source topics and their routes, create or check the target
   topics (:mod:`k2k.pipeline.driver.discovery`);
2. **plan**: turn committed progress into one offset range per partition of this member's
   share (:mod:`k2k.pipeline.driver.positions`) and split them into at most P *runner groups*
   (P = Spark task slots, or ``spark.parallelism``), balanced by remaining lag
   (:func:`k2k.pipeline.plan.plan_groups`);
3. **claim** the partitions in the assignment topic (:mod:`k2k.pipeline.driver.membership`);
4. **run** one Spark job whose tasks copy until the lease deadline or until the planner ends
   the lease early (:mod:`k2k.pipeline.driver.lease`, asking the planner through
   :mod:`k2k.pipeline.driver.watcher`), then release the partitions;
5. **fold** the runners' summaries into the committed progress; stop on a runner fault,
   but wait out an outage (a cluster that did not answer in time) and plan again
   (:mod:`k2k.pipeline.driver.outage`).

Progress lives on the target cluster, so the driver needs no Spark checkpoint and a
restarted driver simply reads the commit topic again.

Once ``k2k cutover`` drained the pipeline the run ends cleanly, as on a stop, and
:attr:`PipelineStats.cutover <k2k.observability.stats.PipelineStats.cutover>` says so
(:mod:`k2k.pipeline.driver.cutover`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from k2k.config import PipelineConfig
from k2k.coordination.assignment import default_member_name
from k2k.errors import (
    ClusterError,
    ReplicationError,
    SchemaMappingError,
    TopicError,
    Unavailable,
)
from k2k.kafka import TP
from k2k.observability.stats import PipelineStats
from k2k.pipeline.driver.cutover import CutOver
from k2k.pipeline.driver.lease import STOP_GRACE_S, LeaseJob
from k2k.pipeline.driver.planning import PlanningState
from k2k.pipeline.driver.runscope import RunOptions, RunScope, open_run
from k2k.pipeline.driver.slots import LiveSlots, TopicCatalog
from k2k.pipeline.driver.watcher import IdleWatch, LeaseWatch
from k2k.pipeline.plan import PartitionRange, RunnerGroup, RunnerSummary, plan_groups
from k2k.spark.session import context_of

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from k2k.pipeline.driver.discovery import Discovery

__all__ = ["PipelineStats", "Planner"]

log = logging.getLogger("k2k.planner")


class Planner:
    """Runs on: driver. Owns the replication loop of one pipeline: its config, its stop
    request and its statistics; what one run opens lives in its
    :class:`~k2k.pipeline.driver.runscope.RunScope`."""

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
        start_at: Mapping[TP, int] | None = None,
        status_snapshot: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        """Runs on: driver. Connects nothing yet: :meth:`run` does.

        ``spark``: an existing SparkSession (or SparkContext) to run leases on (kept open
        at the end); by default the planner starts its own from ``spark.master`` and
        ``spark.conf`` (and stops it at the end), or joins the SparkContext the process
        runs (and keeps it).
        ``member``: this process's name in the assignment topic (default host-pid);
        ``standby``: take partitions only while no other member is alive;
        ``telemetry``: export metrics (k2k.metrics, chosen by ``OTEL_*`` variables);
        ``start_at``: where partitions without progress start, instead of
        ``auto.offset.reset`` (the reverse run's fork point; see
        :func:`~k2k.pipeline.driver.positions.starts_at`);
        ``status_snapshot``: with ``telemetry``, the status page's source (the ``k2k status
        --json`` document, read when the page is viewed)."""
        self.cfg = cfg
        self.options = RunOptions(
            member=member or default_member_name(),
            until_caught_up=until_caught_up,
            on_tick=on_tick,
            spark=None if spark is None else context_of(spark),
            after_spark_start=after_spark_start,
            standby=standby,
            telemetry=telemetry,
            start_at=start_at,
            status_snapshot=status_snapshot,
        )
        #: What the planner plans by; the statistics (and the display) read it.
        self.planning = PlanningState()
        self.stats = PipelineStats(planning=self.planning)
        self._stop = threading.Event()
        #: The run's scope while :meth:`run` runs: a stop request reaches its lease channel.
        self._scope: RunScope | None = None

    # -- public --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Runs on: driver, any thread. Ask the loop to end the current lease cleanly and
        return (signal-handler safe)."""
        self._stop.set()
        scope = self._scope
        if scope is not None:
            scope.control.end_lease()

    def run(self) -> PipelineStats:
        """Runs on: driver. Replicate until stopped (or caught up, or cut over: then
        ``stats.cutover`` is set); returns the final statistics. Closes everything it
        opened, also on errors."""
        try:
            with open_run(self.cfg, self.options, self.planning, self.stats, self._stop) as scope:
                self._scope = scope
                try:
                    self._loop(scope)
                finally:
                    self._scope = None
        except CutOver as exc:  # at the join: nothing claimed, nothing copied
            self.stats.cutover = exc.record
        return self.stats

    def _loop(self, scope: RunScope) -> None:
        """Lease after lease until stopped (or caught up), riding out outages; the
        checkpoints' last pass after a clean end."""
        discover = False  # open_run just discovered, for the first lease
        while not self._stop.is_set():
            if self._cut_over(scope):
                break
            if self.options.until_caught_up and self.planning.caught_up():
                break
            try:
                self._lease(scope, discover=discover)
            except Unavailable as exc:
                scope.outages.wait(exc)  # raises once the outage outlasts maxOutage
            else:
                scope.outages.over()
            discover = True
        if scope.checkpoints is not None:
            scope.checkpoints.last_pass()
        if scope.group_sync is not None:
            scope.group_sync.last_pass()

    def _cut_over(self, scope: RunScope) -> bool:
        """True once ``k2k cutover`` drained the pipeline (noted in the statistics)."""
        record = scope.membership.cutover
        if record is not None:
            self.stats.cutover = record
        return record is not None

    def _slots(self, job: LeaseJob) -> int:
        """Runner groups per lease: ``spark.parallelism``, else Spark's default parallelism.
        A local master never runs more tasks at once than it has cores, and a group beyond
        them would wait for a free one until the lease ends, so there it is capped."""
        slots: int = job.sc.defaultParallelism
        wanted = self.cfg.spark.parallelism
        if wanted is None:
            return slots
        return min(wanted, slots) if (job.sc.master or "").startswith("local") else wanted

    # -- leases --------------------------------------------------------------------------

    def _lease(self, scope: RunScope, *, discover: bool) -> None:
        """One pass of the loop: discover -> plan -> claim -> run -> fold."""
        membership, discovery, job = scope.membership, scope.discovery, scope.job
        if discover:
            # A lease boundary is where new topics take effect.
            self.stats.topics = self.planning.discover(discovery)
        members, mine = membership.share(discovery.partitions())
        if membership.cutover is not None:
            return  # claim nothing: the loop stops
        everything = self.planning.positions.ranges(discovery.selected, self.planning.ends)
        ranges = [r for r in everything if (r.topic, r.partition) in mine]
        if not ranges:
            if self.options.until_caught_up and not self.planning.left_to_others(everything):
                self._stop.set()  # nothing left to read: deleted topics can never catch up
                return
            # The rest is another member's, maybe one that died and is not yet past its
            # grace window: wait for it to finish or for its partitions to be dealt anew.
            job.idle(IdleWatch(scope, members, everything))
            self._give_up_if_decided(job)
            return
        live = not self.options.until_caught_up
        slots = self._slots(job)
        groups = membership.claim(self._plan(scope, ranges, slots, live), self._stopping)
        if self._stopping():
            # Not released: this claim may not have fenced its predecessors yet, so the
            # next claimant must still deal with them (see Assignment.acquire).
            return
        snapshot = scope.live.snapshot
        groups = [
            dataclasses.replace(g, progress=snapshot((r.topic, r.partition) for r in g.ranges))
            for g in groups
        ]
        self.stats.leases += 1
        if scope.metrics is not None:
            scope.metrics.lease_started()
        scope.control.new_lease()
        if self._stop.is_set():
            return
        scope.outages.resumed()
        spec = dataclasses.replace(
            scope.template,
            lease_id=self.stats.leases,
            topics=discovery.plans(),
            topic_ids=discovery.topic_ids(),
            live=live,
            lease_s=math.inf if live else scope.template.lease_s,
        )
        level = logging.INFO if spec.lease_id == 1 else logging.DEBUG  # the last start-up step
        log.log(
            level, "lease %d: %d groups over %d partitions", spec.lease_id, len(groups), len(ranges)
        )
        claims = {(t, p): c for g in groups for t, p, c in g.claims}
        live_slots = (
            LiveSlots(groups, scope.control, _catalog(discovery), scope.live.snapshot)
            if live
            else None
        )
        adjust = functools.partial(self._adjust, scope, live_slots) if live_slots else None
        summaries = job.run(spec, groups, LeaseWatch(scope, members, claims, adjust))
        held = live_slots.groups() if live_slots is not None else groups
        membership.release(spec.lease_id, held, summaries)
        if scope.metrics is not None:
            scope.metrics.lease_ended(spec.lease_id, summaries, membership.new_fencings())
        self.planning.fold(spec.lease_id, summaries, self.stats)
        scope.live.tick()
        self._give_up_if_decided(job)  # before the runners' own errors: the documented line
        failed = [s for s in summaries if s.error]
        if failed and membership.cutover is not None:
            # Drained: progress reached the cut everywhere before k2k cutover said so.
            log.warning(
                "lease %d: a runner failed while stopping: %s", spec.lease_id, failed[0].error
            )
        elif failed:
            self._lease_failed(scope, spec.lease_id, failed)

    def _stopping(self) -> bool:
        """A stop was requested, or ``k2k cutover`` drained the pipeline meanwhile."""
        scope = self._scope
        return self._stop.is_set() or (scope is not None and scope.membership.cutover is not None)

    def _lease_failed(self, scope: RunScope, lease_id: int, failed: list[RunnerSummary]) -> None:
        """After runners failed: a target topic deleted meanwhile ends the run; else plan
        again if the source topics changed under them; raise :class:`Unavailable` for an
        outage (:meth:`run` waits it out); else end the run with the runners' error."""
        self._check_targets_after_failure(scope)
        if scope.discovery.sources_changed():
            log.info("lease %d failed while source topics changed; planning again", lease_id)
            return
        # Only outages are waited out: failures that say a cluster did not answer, or
        # any failure while a cluster does not answer the probes. Others end the run.
        outage = all(s.error_class == Unavailable.__name__ for s in failed)
        outage = outage or scope.watch.reachability.down_since() is not None
        if outage:
            raise Unavailable(failed[0].error)
        # A schema-mapping failure keeps its class: callers and the CLI can tell it apart.
        mapping = [s for s in failed if s.error_class == SchemaMappingError.__name__]
        raise (SchemaMappingError if mapping else ReplicationError)((mapping or failed)[0].error)

    def _give_up_if_decided(self, job: LeaseJob) -> None:
        """End the run when the lease or the idle wait was ended for ``maxOutage`` (unless a
        stop was requested since: a stop ends the run cleanly)."""
        if job.gave_up is not None and not self._stop.is_set():
            raise job.gave_up

    def _check_targets_after_failure(self, scope: RunScope) -> None:
        """A target topic deleted while replicating is why a lease's writes failed: say that
        (:class:`~k2k.errors.TopicError`). Skipped while a cluster does not answer the
        probes, and a check that gets no answer changes nothing: the lease's own error
        stands."""
        if scope.watch.reachability.down_since() is not None:
            return
        try:
            scope.discovery.check_targets()
        except TopicError:
            raise
        except ClusterError:
            return  # no answer: the lease's own error stands

    def _adjust(self, scope: RunScope, slots: LiveSlots, watch: LeaseWatch, discover: bool) -> bool:
        """Change a continuous lease in place: after a discovery (``discover``) or a change of
        members, the partitions this member lost are dropped by their slots and released,
        then the ones it gained are claimed and sent to the slots holding the fewest.
        False when the lease must end instead: a stop, ``k2k cutover``, a partition of this
        member's share claimed by another member (one it is losing may be claimed before it
        lets go), a topic deleted or created again, or a slot that did not acknowledge (docs/architecture.md#leases-that-do-not-stop)."""
        membership, discovery = scope.membership, scope.discovery
        if self._stopping():
            return False
        if discover:
            self.stats.topics = self.planning.discover(discovery)
            if discovery.recreated:
                return False
        partitions = discovery.partitions()
        held = slots.held()
        if held - set(partitions):
            return False  # a topic was deleted: its runners may have failed on it already
        members, mine = membership.share(partitions)
        if set(membership.assignment.view.claimed_elsewhere(watch.claims)) & mine:
            return False  # claimed from under us although still ours: this member was frozen
        catalog = _catalog(discovery)
        leaving = held - mine
        if leaving:
            slots.drop(leaving, catalog)
            dropped = slots.wait_dropped(STOP_GRACE_S, self._stopping)
            if dropped is None:
                return False
            released, outcomes = dropped
            membership.assignment.release(released)
            self.planning.let_go(outcomes)
            log.info("handed over %d partitions without ending the lease", len(leaving))
        arriving = mine - held
        if arriving:
            everything = self.planning.positions.ranges(discovery.selected, self.planning.ends)
            placed = slots.place(r for r in everything if (r.topic, r.partition) in arriving)
            placed = membership.claim(placed, self._stopping)
            if self._stopping():
                return False
            slots.add(placed, catalog)
            self.planning.latest.update(discovery.source.offsets(sorted(arriving), "latest"))
            log.info("took on %d partitions without ending the lease", len(arriving))
        slots.grown(catalog)
        watch.members, watch.claims = members, slots.claims()
        return True

    def _plan(
        self, scope: RunScope, ranges: list[PartitionRange], slots: int, live: bool
    ) -> list[RunnerGroup]:
        """Split ``ranges`` into at most ``slots`` runner groups balanced by their lag now;
        ``live`` (a continuous lease): exactly ``slots`` groups, some maybe empty, so that
        every slot can take partitions on later."""
        discovery = scope.discovery
        latest = self.planning.latest = discovery.source.offsets(
            [(r.topic, r.partition) for r in ranges], "latest"
        )
        discovery.saw_ends(latest)

        def weight(r: PartitionRange) -> int:
            end = r.end if r.end is not None else latest.get((r.topic, r.partition), r.start)
            return max(0, end - r.start)

        groups = plan_groups(ranges, slots, weight)
        if live:
            groups += [RunnerGroup(i, ()) for i in range(len(groups), slots)]
        return groups


def _catalog(discovery: Discovery) -> TopicCatalog:
    """Discovery's topics as assignments carry them; a target topic has at least as many
    partitions as the largest source topic routed to it (discovery grew it, or stopped)."""
    counts: dict[str, int] = {}
    routes = discovery.routes()
    for topic, info in discovery.selected.items():
        target = routes.get(topic)
        if target is not None:
            counts[target] = max(counts.get(target, 0), info.partitions)
    return TopicCatalog(discovery.plans(), discovery.topic_ids(), counts)
