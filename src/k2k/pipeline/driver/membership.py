"""This planner's membership of its commit group: its share of the partitions, and claims.

Runs on: driver. A thin layer over :class:`k2k.coordination.assignment.Assignment` in the
planner's terms (runner groups and summaries rather than partitions and claim ids); the
protocol itself (heartbeats, share, claim, wait or fence, verify) is described there. Per
lease the planner:

1. takes its share of the selected partitions (:meth:`Membership.share`);
2. claims the partitions of the runner groups it planned, one transactional id per runner
   slot in exactly-once mode (:meth:`Membership.claim`);
3. while the lease runs, watches for members coming and going, and for claims taken by
   another member (:meth:`Membership.changed`);
4. releases the partitions of every runner that returned (:meth:`Membership.release`).

Once ``k2k cutover`` drained the pipeline (:mod:`k2k.pipeline.driver.cutover`),
:attr:`Membership.cutover` holds its record: :meth:`Membership.join` raises
:class:`~k2k.pipeline.driver.cutover.CutOver`, and :meth:`Membership.changed` ends the lease.

A newer session under the same member name makes :class:`~k2k.coordination.assignment.StandDown`
propagate out of any of these; after it, :meth:`Membership.close` writes nothing more.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterable
from types import TracebackType

from confluent_kafka import KafkaException

from k2k.config import PipelineConfig
from k2k.coordination.assignment import StandDown, transactional_id
from k2k.coordination.controltopics import assignment_member
from k2k.errors import K2KError
from k2k.formats.cutover import CutoverRecord
from k2k.kafka import TP
from k2k.pipeline.driver.cutover import CutOver, describe, drained
from k2k.pipeline.plan import RunnerGroup, RunnerSummary

__all__ = ["Membership"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")


class Membership:
    """Runs on: driver. Joins the assignment topic on creation (heartbeats start) and
    leaves it on :meth:`close`, or at the end of its ``with`` block."""

    def __init__(
        self, cfg: PipelineConfig, member: str, standby: bool, assignment_partitions: int
    ) -> None:
        self.cfg = cfg
        self.member = member
        self.standby = standby
        #: Set when a newer session of this member name took over: leave nothing behind.
        self.stood_down = False
        self._fencings_counted = 0
        self._cutover_noted = False
        self._watched_claims: dict[TP, str] | None = None  # the claims looked at last tick
        self.assignment = assignment_member(
            cfg, member, standby=standby, partitions=assignment_partitions
        )

    def refuse_if_cut_over(self) -> None:
        """Read the assignment topic without joining; raises
        :class:`~k2k.pipeline.driver.cutover.CutOver` when ``k2k cutover`` drained the
        pipeline already (before Spark starts: nothing may be copied any more)."""
        self.assignment.peek()
        self._refuse_if_cut_over()

    def join(self) -> None:
        """Heartbeat and read the assignment topic up to now: other members see this one
        from here on (and give up its share), so the planner joins once Spark is up.

        Raises :class:`~k2k.pipeline.driver.cutover.CutOver` when ``k2k cutover`` drained
        the pipeline meanwhile (leaving on the way out)."""
        self.assignment.catch_up()
        self._refuse_if_cut_over()
        log.info(
            "member %s of commit group %s (%s)",
            self.member,
            self.cfg.commit_group,
            "standby" if self.standby else "active",
        )

    def _refuse_if_cut_over(self) -> None:
        record = self.cutover
        if record is not None:
            self._cutover_noted = True
            log.info("not starting: %s", describe(record))
            raise CutOver(record)

    @property
    def cutover(self) -> CutoverRecord | None:
        """The cut-over record once ``k2k cutover`` drained the pipeline (this member must
        stop), as last read; None before (a record with step ``cut`` only changes nothing)."""
        return drained(self.assignment.view)

    def drained_now(self) -> bool:
        """Read what arrived (no wait): True once the pipeline was drained, e.g. by
        ``k2k failover`` while the source is away and no lease runs."""
        self.assignment.tick()
        return self.cutover is not None

    def share(self, partitions: list[TP]) -> tuple[tuple[str, ...], set[TP]]:
        """Step 1: the active members now, and this member's share of ``partitions``."""
        self.assignment.catch_up()
        members = self.assignment.active_members()
        return members, set(self.assignment.share(partitions, members))

    def claim(self, groups: list[RunnerGroup], stopping: Callable[[], bool]) -> list[RunnerGroup]:
        """Step 2: claim every partition of ``groups`` for this member, waiting for or
        fencing previous owners; returns the groups with their transactional id and claims.

        Returns early, claims written but nothing fenced, once ``stopping()`` is true."""
        eos = self.cfg.features.exactly_once
        wanted: dict[TP, str] = {}
        for g in groups:
            txid = transactional_id(self.cfg.commit_group, self.member, g.index) if eos else ""
            for r in g.ranges:
                wanted[(r.topic, r.partition)] = txid
        claims = self.assignment.acquire(wanted, stopping)
        return [
            dataclasses.replace(
                g,
                transactional_id=(
                    transactional_id(self.cfg.commit_group, self.member, g.index) if eos else None
                ),
                claims=tuple(
                    (r.topic, r.partition, claims[(r.topic, r.partition)]) for r in g.ranges
                ),
            )
            for g in groups
        ]

    def new_fencings(self) -> int:
        """Transactional ids of previous owners this member fenced since the last call."""
        fencings = self.assignment.fencings
        new, self._fencings_counted = fencings - self._fencings_counted, fencings
        return new

    def changed(self, members: tuple[str, ...], claims: dict[TP, str]) -> bool:
        """Step 3: True when the lease should end: the active members are no longer
        ``members``, or a partition of ``claims`` was claimed by another member.

        Also True once ``k2k cutover`` drained the pipeline (:attr:`cutover`): the lease
        ends as on a stop, and the planner stops after it.

        Raises :class:`~k2k.coordination.assignment.StandDown` for a newer session of ours."""
        self.assignment.tick()
        record = self.cutover
        if record is not None:
            if not self._cutover_noted:
                self._cutover_noted = True
                log.info("%s; ending the lease and stopping", describe(record))
            return True
        now = self.assignment.active_members()
        if now != members:
            log.info(
                "members of %s now %s (were %s); re-planning",
                self.cfg.commit_group,
                ", ".join(now),
                ", ".join(members),
            )
            return True
        lost = self._claimed_elsewhere(claims)
        if lost:
            self._stand_down_from(lost)
            return True
        return False

    def _claimed_elsewhere(self, claims: dict[TP, str]) -> list[TP]:
        """Partitions of ``claims`` another member claimed. Every tick: only the partitions
        claimed since the last tick are looked at, unless ``claims`` is a new lease's."""
        view = self.assignment.view
        fresh, view.claimed = view.claimed, set()
        if claims is not self._watched_claims:
            self._watched_claims = claims
            return view.claimed_elsewhere(claims)
        return view.claimed_elsewhere({tp: claims[tp] for tp in fresh if tp in claims})

    def _stand_down_from(self, lost: list[TP]) -> None:
        """Say which partitions another member claimed since this lease was planned (this
        member was frozen or slow): the lease ends at once and this member plans again
        without them, whether or not its runners had anything left to commit. Exactly-once,
        the other member fenced them first, so nothing of theirs commits after its claim."""
        owners = self.assignment.owners
        by = sorted({owners[tp].member for tp in lost if tp in owners}) or ["nobody"]
        log.warning(
            "%d partitions (%s) claimed by member %s since this lease was planned; "
            "stood down from them, ending the lease",
            len(lost),
            ", ".join(f"{t}[{p}]" for t, p in sorted(lost)),
            ", ".join(by),
        )

    def release(
        self, lease_id: int, groups: Iterable[RunnerGroup], summaries: Iterable[RunnerSummary]
    ) -> None:
        """Step 4: release the partitions of every runner that returned cleanly (its
        producer is done). Not those of fenced runners (another member owns them now), nor
        of failed ones: exactly-once, a transaction whose abort failed may still be open,
        and an unreleased claim makes the next claimant fence its transactional id first."""
        by_index = {g.index: g for g in groups}
        done: dict[TP, str] = {}
        for s in summaries:
            if s.fenced:
                log.warning("lease %d runner %d stood down: %s", lease_id, s.group, s.fenced)
                continue
            if s.error:
                continue
            for t, p, claim in by_index[s.group].claims:
                done[(t, p)] = claim
        if done:
            self.assignment.release(done)

    def __enter__(self) -> Membership:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, StandDown):
            self.stood_down = True  # the newer session owns our name
        self.close()

    def close(self) -> None:
        """Leave the group (others take over without waiting), unless we stood down."""
        if not self.stood_down:
            # Best effort on the way out: a failure here must not hide the error that ended
            # the run, and other members take over after graceWindow anyway.
            with contextlib.suppress(K2KError, KafkaException):
                self.assignment.leave({})
        self.assignment.close()
