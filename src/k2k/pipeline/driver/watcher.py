"""What the lease job asks the planner while a lease runs, or while this member waits idle.

Runs on: driver, every :data:`~k2k.pipeline.driver.lease.TICK_S` of a lease or an idle wait
(:class:`~k2k.pipeline.driver.lease.LeaseJob`). The job decides *when* to end a lease, the
watcher *whether*: :class:`LeaseWatcher` is the contract, :class:`LeaseWatch` the running
lease's answers and :class:`IdleWatch` those of a member with no partitions of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from k2k.errors import ClusterError

if TYPE_CHECKING:
    from k2k.errors import Unavailable
    from k2k.pipeline.driver.runscope import RunScope
    from k2k.pipeline.plan import PartitionRange

__all__ = ["IdleWatch", "LeaseWatch", "LeaseWatcher"]

log = logging.getLogger("k2k.planner")

TP = tuple[str, int]


class LeaseWatcher(Protocol):
    """The planner's side of a running lease, asked by the lease job."""

    def reassigned(self) -> bool:
        """True ends the lease (the job asks until it is true once): the members changed,
        or another member claimed a partition of it."""
        ...

    def tick(self) -> None:
        """Refresh the planner's view and the display."""
        ...

    def topics_changed(self) -> bool:
        """Every discovery interval while a lease runs: True ends it (new topics or
        partitions take effect at the next lease)."""
        ...

    def outlasted(self) -> Unavailable | None:
        """The error to end the run with once an outage outlasted ``errorHandling.maxOutage``;
        None until then."""
        ...

    def adjust(self, topics_changed: bool) -> bool:
        """After :meth:`reassigned` or :meth:`topics_changed` said true: move only the
        partitions whose owner changed, without ending the lease; False when the lease
        must end instead."""
        ...


class LeaseWatch:
    """Runs on: driver. The watcher of one running lease: planned for ``members``, holding
    ``claims``; it follows topic changes unless the run is ``--until-caught-up``.
    ``adjust`` (a continuous lease) changes the lease in place; it updates ``members`` and
    ``claims`` when it did."""

    def __init__(
        self,
        scope: RunScope,
        members: tuple[str, ...],
        claims: dict[TP, str],
        adjust: Callable[[LeaseWatch, bool], bool] | None = None,
    ) -> None:
        self.scope = scope
        self.members = members
        self.claims = claims
        self._adjust = adjust

    def adjust(self, topics_changed: bool) -> bool:
        if self._adjust is None:
            return False
        try:
            return self._adjust(self, topics_changed)
        except ClusterError as exc:
            # A request that got no answer in time: the next lease plans afresh (and waits
            # an outage out the usual way) rather than the run failing here.
            log.warning("ending the lease to plan it again: %s", exc)
            return False

    def reassigned(self) -> bool:
        return self.scope.membership.changed(self.members, self.claims)

    def tick(self) -> None:
        self.scope.live.tick()

    def topics_changed(self) -> bool:
        """Syncs topic configs and ACLs when due (they need no new lease); True when the
        source topics changed. Never with ``--until-caught-up``: its topics are fixed."""
        scope = self.scope
        if scope.options.until_caught_up:
            return False
        for sync in scope.syncs:
            sync.maybe_sync(scope.discovery.routes())
        return scope.discovery.topics_changed()

    def outlasted(self) -> Unavailable | None:
        return self.scope.outages.outlasted()


class IdleWatch(LeaseWatch):
    """Runs on: driver. The watcher of a member whose share is empty while ``others`` (the
    ranges of the other members) are copied: it plans again when the members change or,
    ``--until-caught-up``, once the others' partitions reached their ends."""

    def __init__(
        self, scope: RunScope, members: tuple[str, ...], others: list[PartitionRange]
    ) -> None:
        super().__init__(scope, members, {})
        self.others = others

    def reassigned(self) -> bool:
        scope = self.scope
        if scope.membership.changed(self.members, {}):
            return True
        return scope.options.until_caught_up and not scope.planning.left_to_others(self.others)
