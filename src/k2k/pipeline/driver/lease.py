"""One lease: its spec, its Spark job, and the driver watching that job.

Runs on: driver. A lease is one Spark job,
``sc.parallelize(groups, len(groups)).mapPartitions(run_groups)``, run from a thread of its
own so the driver keeps watching while the runners copy. The driver ends the lease early
through the lease channel (:mod:`k2k.pipeline.channel`) when:

* a stop was requested: runners get :data:`STOP_GRACE_S` to commit and return, then the
  job is cancelled (its uncommitted work is abandoned; committed progress stays valid);
* a cluster has not answered for longer than ``errorHandling.maxOutage``: the same, with
  :data:`OUTAGE_GRACE_S` (runners waiting for a target that is away would otherwise wait
  out their delivery timeout, minutes past the bound);
* (``--until-caught-up`` only) the members of the commit group changed, or topic discovery,
  every ``replication[].source.discoveryInterval``, finds a new topic or partition;
* another member claimed one of its partitions, a topic was deleted or created again, or a
  runner returned.

A continuous lease (no ``--until-caught-up``) takes new topics and partitions, and members
coming and going, without ending: the watcher's ``adjust`` moves only the partitions whose
owner changes (:mod:`k2k.pipeline.driver.slots`). An ``--until-caught-up`` lease ends at its
deadline (``spark.leaseDuration``, on the executors' clock) or when every range is done.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from typing import TYPE_CHECKING

from k2k.config import PipelineConfig
from k2k.errors import K2KError, ReplicationError, Unavailable
from k2k.kafka.factory import consumer_settings, delivery_timeout_s, producer_settings
from k2k.pipeline.channel import LeaseControl
from k2k.pipeline.plan import (
    ClientSpec,
    CommitSpec,
    ControlTopicSpec,
    LeaseSpec,
    PolicySpec,
    RunnerGroup,
    RunnerSummary,
)
from k2k.pipeline.task.runner import run_groups
from k2k.spark.session import spark_error_line

if TYPE_CHECKING:
    from pyspark import SparkContext

    from k2k.pipeline.driver.watcher import LeaseWatcher

__all__ = ["OUTAGE_GRACE_S", "STOP_GRACE_S", "TICK_S", "LeaseJob", "lease_template"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")

#: How long a stop request may take before the lease's Spark job is cancelled outright.
STOP_GRACE_S = 15.0
#: The same after an outage outlasted ``errorHandling.maxOutage``: the run is ending, and
#: only runners whose clusters answer (the source was away) can still commit.
OUTAGE_GRACE_S = 5.0
#: How often a broker looks for transactions past their timeout to abort them (its
#: ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` default).
BROKER_ABORT_CHECK_S = 10.0
#: How often the driver checks the job, the assignment topic and the display.
TICK_S = 0.5


def lease_template(
    cfg: PipelineConfig, *, commit_partitions: int, assignment_partitions: int, member: str
) -> LeaseSpec:
    """Runs on: driver, once per start. The lease spec without its per-lease values: no
    ``lease_id``, ``topics`` or ``topic_ids`` yet, no ``control`` until the channel is open,
    no observer and no telemetry (nor client statistics); the planner fills those in with
    :func:`dataclasses.replace`."""
    clients = ClientSpec(
        source_consumer=consumer_settings(
            cfg.source_client("consumer"), group_id=f"k2k.{cfg.name}"
        ),
        target_producer=producer_settings(
            cfg.target_client("producer"),
            partition_by_key=cfg.replication.sink.partition != "source",
            exactly_once=cfg.features.exactly_once,
        ),
        control_consumer=cfg.control_consumer(),
        statistics_interval_ms=None,
    )
    return LeaseSpec(
        lease_id=0,
        topics={},
        topic_ids={},
        lease_s=cfg.spark.lease_duration.total_seconds(),
        live=False,
        control=None,
        observer=None,
        telemetry=False,
        clients=clients,
        commit=_commit_spec(cfg, clients.target_producer),
        control_topics=ControlTopicSpec(
            pipeline=cfg.name,
            member=member,
            commit_group=cfg.commit_group,
            commit_topic=cfg.coordination.commit.topic,
            commit_partitions=commit_partitions,
            assignment_topic=cfg.coordination.assignment.topic,
            assignment_partitions=assignment_partitions,
            sync_timeout_s=cfg.coordination.commit.sync_timeout.total_seconds(),
            open_transaction_s=_open_transaction_s(cfg),
        ),
        policies=PolicySpec(
            on_sync_timeout=cfg.error_handling.on_commit_sync_timeout,
            on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
            on_records_lost=cfg.error_handling.on_source_records_lost,
            on_foreign_writes=cfg.error_handling.on_foreign_writes,
            on_offset_gap=cfg.error_handling.on_offset_gap,
        ),
    )


def _open_transaction_s(cfg: PipelineConfig) -> float:
    """How long a runner's take-on may wait for another runner's open transaction:
    exactly-once, its timeout plus the broker's abort check, unless the user set
    ``coordination.commit.syncTimeout`` (then that is the bound); 0 at-least-once."""
    commit = cfg.coordination.commit
    if not cfg.features.exactly_once or "sync_timeout" in commit.model_fields_set:
        return 0.0
    return cfg.transaction_timeout_ms() / 1000 + BROKER_ABORT_CHECK_S


def _commit_spec(cfg: PipelineConfig, target_producer: dict[str, str]) -> CommitSpec:
    """``coordination.commit`` and the delivery mode, for :func:`lease_template`."""
    commit = cfg.coordination.commit
    exactly_once = cfg.features.exactly_once
    return CommitSpec(
        exactly_once=exactly_once,
        batch_size=commit.batch_size,
        batch_timeout_s=commit.batch_timeout.total_seconds(),
        # The user's delivery timeout, applied by the runner to whole commit batches. Not
        # the effective setting: at-least-once forces librdkafka's own expiry off (see
        # PRODUCER_FORCED); exactly-once keeps it, bounded by the transaction timeout.
        ack_timeout_s=delivery_timeout_s(
            target_producer if exactly_once else cfg.target_client("producer")
        ),
        identical_offsets=cfg.replication.sink.offsets.identical,
    )


@dataclasses.dataclass
class _Outcome:
    """What the job thread hands back: the summaries, or the error Spark raised."""

    result: list[RunnerSummary] = dataclasses.field(default_factory=list)
    error: Exception | None = None


class LeaseJob:
    """Runs on: driver. Runs leases on ``sc`` and watches them; ``stop`` is the planner's
    stop request, ``control`` the lease channel, ``discovery_interval_s`` how often topic
    discovery looks for changes while a lease runs."""

    def __init__(
        self,
        sc: SparkContext,
        pipeline: str,
        control: LeaseControl,
        stop: threading.Event,
        discovery_interval_s: float,
    ) -> None:
        self.sc = sc
        self.pipeline = pipeline
        self.control = control
        self.stop = stop
        self.discovery_interval_s = discovery_interval_s
        #: Why the last lease or idle wait was ended for ``errorHandling.maxOutage``.
        self.gave_up: Unavailable | None = None

    def run(
        self, spec: LeaseSpec, groups: list[RunnerGroup], watcher: LeaseWatcher
    ) -> list[RunnerSummary]:
        """Run lease ``spec`` over ``groups`` and return the runners' summaries.

        While it runs, every :data:`TICK_S`: ``watcher.reassigned()`` true ends the lease
        (once), ``watcher.outlasted()`` (an outage past ``errorHandling.maxOutage``: the
        error to end the run with) ends it too and is kept in :attr:`gave_up`,
        ``watcher.tick()`` refreshes the display, and every discovery interval
        ``watcher.topics_changed()`` true ends it. Raises
        :class:`~k2k.errors.ReplicationError` when a runner task failed; returns no
        summaries when the job was cancelled after a stop or an outage."""
        self.gave_up = None
        job_group = f"k2k-{self.pipeline}-lease-{spec.lease_id}"
        outcome = _Outcome()
        sc = self.sc

        def job() -> None:
            sc.setJobGroup(job_group, f"k2k lease {spec.lease_id}", interruptOnCancel=True)
            try:
                rdd = sc.parallelize(groups, len(groups))
                outcome.result = rdd.mapPartitions(functools.partial(run_groups, spec)).collect()
            except Exception as exc:  # re-raised on the driver's main thread below
                outcome.error = exc

        thread = threading.Thread(target=job, name=job_group, daemon=True)
        thread.start()
        cancelled = self._watch(thread, job_group, watcher)
        if outcome.error is not None:
            if cancelled or self.gave_up is not None:
                # Our own cancel after a grace, or a failure while ending for maxOutage (the
                # run ends with that): uncommitted work abandoned.
                log.debug("lease %d ended: %s", spec.lease_id, spark_error_line(outcome.error))
                return []
            raise ReplicationError(f"a runner task failed: {spark_error_line(outcome.error)}")
        return list(outcome.result)

    def idle(self, watcher: LeaseWatcher) -> None:
        """No partitions for this member: wait until the next discovery, a stop request,
        ``watcher.reassigned()`` (e.g. a member left), or ``watcher.outlasted()`` (kept in
        :attr:`gave_up`), calling ``watcher.tick()`` meanwhile."""
        self.gave_up = None
        deadline = time.monotonic() + self.discovery_interval_s
        while not self.stop.is_set() and time.monotonic() < deadline:
            self.stop.wait(TICK_S)
            watcher.tick()
            if watcher.reassigned():
                return
            self.gave_up = watcher.outlasted()
            if self.gave_up is not None:
                return

    def _must_end(self, watcher: LeaseWatcher) -> bool:
        """A runner returned, or the plan changed and the lease cannot take the change in
        place (a continuous lease changes in place: ``watcher.adjust``)."""
        if self.control.ended:
            return True
        return watcher.reassigned() and not watcher.adjust(False)

    def _watch(self, thread: threading.Thread, job_group: str, watcher: LeaseWatcher) -> bool:
        """Watch the job thread until it ends; returns True when the job was cancelled."""
        next_discovery = time.monotonic() + self.discovery_interval_s
        ending: tuple[float, float] | None = None  # (since, grace) once the lease must end
        handing_over = False
        while thread.is_alive():
            thread.join(TICK_S)
            if not thread.is_alive():
                break  # the lease is over: nothing to end or cancel
            if not handing_over and self._must_end(watcher):
                handing_over = True
                self.control.end_lease()
            try:
                watcher.tick()
            except K2KError as exc:
                log.warning("progress display: %s", exc)
            now = time.monotonic()
            if ending is None and self.stop.is_set():
                ending = (now, STOP_GRACE_S)
            elif ending is None and (gave_up := watcher.outlasted()) is not None:
                self.gave_up = gave_up
                log.warning("ending the lease: %s", gave_up)
                ending = (now, OUTAGE_GRACE_S)
            if ending is not None:
                self.control.end_lease()
                if now - ending[0] > ending[1] and thread.is_alive():
                    log.warning(
                        "runners did not stop within %.0f s; cancelling the lease", ending[1]
                    )
                    self.sc.cancelJobGroup(job_group)
                    thread.join(5)
                    return True
            elif now >= next_discovery:
                next_discovery = now + self.discovery_interval_s
                if watcher.topics_changed() and not watcher.adjust(True):
                    log.info(
                        "source topics changed (new, grown, deleted or created again); starting a new lease"
                    )
                    self.control.end_lease()
        return False
