"""The runner slots of a continuous lease, and the changes the planner sends them.

Runs on: driver. A continuous lease (no ``--until-caught-up``) runs one Spark task per
runner slot until the lease must end; when the plan changes (a topic or partition appears,
a member comes or goes) only the partitions whose owner changes move, through the lease
channel (docs/architecture.md#leases-that-do-not-stop). :class:`LiveSlots` holds what each
slot copies, with its claims, and the versions of the assignments it was sent.

Invariants:
  * a partition is held by at most one slot: new partitions go to the slot that holds the
    fewest, and a partition never moves between slots of a running lease;
  * a partition let go stays *leaving* (still held, unreleased) until its slot acknowledged
    the version that dropped it, which it does after its last commit of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from k2k.kafka import TP
from k2k.pipeline.channel import Dropped, LeaseControl
from k2k.pipeline.plan import (
    PartitionOutcome,
    PartitionRange,
    ProgressSnapshot,
    RunnerGroup,
    SlotAssignment,
)
from k2k.stages.topicplan import TopicPlan

__all__ = ["LiveSlots", "TopicCatalog"]

#: How often the driver looks for a slot's acknowledgement.
_ACK_POLL_S = 0.05


@dataclass(frozen=True)
class TopicCatalog:
    """What assignments carry about topics, as discovery knows them now: each source
    topic's plan and id, and the partitions each target topic has (at least)."""

    plans: dict[str, TopicPlan]
    ids: dict[str, str]
    target_partitions: dict[str, int]


@dataclass
class _Slot:
    index: int
    transactional_id: str | None
    ranges: dict[TP, PartitionRange] = field(default_factory=dict)
    claims: dict[TP, str] = field(default_factory=dict)
    #: Dropped, not yet acknowledged: partition -> claim id.
    leaving: dict[TP, str] = field(default_factory=dict)
    version: int = 0
    #: The target partition counts this slot's runner knows of (sent, or at lease start).
    targets: dict[str, int] = field(default_factory=dict)
    #: Taken on, maybe not yet by the runner: partition -> the version that added it.
    arriving: dict[TP, int] = field(default_factory=dict)


class LiveSlots:
    """Runs on: driver. The slots of one continuous lease, started with ``groups`` (one per
    slot, some maybe empty), changed through ``control``; ``progress`` is the driver's view of
    some partitions' progress, sent with the partitions a runner takes on."""

    def __init__(
        self,
        groups: list[RunnerGroup],
        control: LeaseControl,
        catalog: TopicCatalog,
        progress: Callable[[Iterable[TP]], ProgressSnapshot | None],
    ) -> None:
        self.control = control
        self.progress = progress
        self._slots = [
            _Slot(
                g.index,
                g.transactional_id,
                {(r.topic, r.partition): r for r in g.ranges},
                {(t, p): c for t, p, c in g.claims},
                targets=dict(catalog.target_partitions),
            )
            for g in groups
        ]

    def held(self) -> set[TP]:
        """Every partition a slot copies or is still letting go."""
        return {tp for s in self._slots for tp in (*s.ranges, *s.leaving)}

    def claims(self) -> dict[TP, str]:
        """The claims of the partitions the slots copy (another member taking one of them
        ends the lease)."""
        return {tp: c for s in self._slots for tp, c in s.claims.items() if tp in s.ranges}

    def groups(self) -> list[RunnerGroup]:
        """What each slot holds now, as runner groups (releases at the lease's end)."""
        return [
            RunnerGroup(
                s.index,
                tuple(s.ranges.values()),
                s.transactional_id,
                tuple((t, p, c) for (t, p), c in {**s.claims, **s.leaving}.items()),
            )
            for s in self._slots
        ]

    def drop(self, tps: set[TP], catalog: TopicCatalog) -> None:
        """Send every slot holding some of ``tps`` an assignment without them."""
        for s in self._slots:
            gone = tps & s.ranges.keys()
            if not gone:
                continue
            for tp in gone:
                del s.ranges[tp]
                s.leaving[tp] = s.claims.pop(tp)
            self._send(s, catalog)

    def grown(self, catalog: TopicCatalog) -> None:
        """Tell every slot writing to a target topic that gained partitions (with
        ``partition: hash`` or ``producer`` records spread over all of them)."""
        for s in self._slots:
            if self._grown(s, catalog):
                self._send(s, catalog)

    def wait_dropped(
        self, timeout_s: float, stopping: Callable[[], bool]
    ) -> tuple[dict[TP, str], list[PartitionOutcome]] | None:
        """Wait for every slot to acknowledge its drops; returns the claims to release and
        the outcomes the runners reported, or None when a slot did not answer in time (or
        ended, or the lease is stopping): the lease must end instead."""
        waiting = [s for s in self._slots if s.leaving]
        deadline = time.monotonic() + timeout_s
        while any(self.control.applied(s.index) < s.version for s in waiting):
            ended = self.control.ended
            if stopping() or time.monotonic() > deadline or any(s.index in ended for s in waiting):
                return None
            time.sleep(_ACK_POLL_S)
        released: dict[TP, str] = {}
        for s in waiting:
            released.update(s.leaving)
            s.leaving.clear()
        return released, _outcomes(self.control.take_dropped())

    def place(self, ranges: Iterable[PartitionRange]) -> list[RunnerGroup]:
        """New partitions onto the slots holding the fewest; one group per slot that takes
        some (index = slot), to claim before :meth:`add`."""
        load = {s.index: len(s.ranges) + len(s.leaving) for s in self._slots}
        placed: dict[int, list[PartitionRange]] = {}
        for r in sorted(ranges, key=lambda r: (r.topic, r.partition)):
            index = min(load, key=lambda i: (load[i], i))
            load[index] += 1
            placed.setdefault(index, []).append(r)
        return [RunnerGroup(i, tuple(rs)) for i, rs in sorted(placed.items())]

    def add(self, groups: list[RunnerGroup], catalog: TopicCatalog) -> None:
        """Send the claimed ``groups`` (from :meth:`place`) to their slots."""
        by_index = {s.index: s for s in self._slots}
        for g in groups:
            s = by_index[g.index]
            s.ranges.update({(r.topic, r.partition): r for r in g.ranges})
            s.arriving.update({(r.topic, r.partition): s.version + 1 for r in g.ranges})
            s.claims.update({(t, p): c for t, p, c in g.claims})
            self._send(s, catalog)

    @staticmethod
    def _grown(s: _Slot, catalog: TopicCatalog) -> dict[str, int]:
        """The target topics of ``s`` with more partitions than its runner knows of."""
        plans = catalog.plans
        targets = {plans[r.topic].target for r in s.ranges.values() if r.topic in plans}
        counts = catalog.target_partitions
        return {t: counts[t] for t in targets if counts.get(t, 0) > s.targets.get(t, 0)}

    def _send(self, s: _Slot, catalog: TopicCatalog) -> None:
        grown = self._grown(s, catalog)
        s.targets.update(grown)
        s.version += 1
        # A runner applies the newest version it fetched: it may skip the one that added some.
        applied = self.control.applied(s.index)
        s.arriving = {tp: v for tp, v in s.arriving.items() if v > applied and tp in s.ranges}
        topics = {r.topic for r in s.ranges.values()}
        self.control.assign(
            s.index,
            SlotAssignment(
                s.version,
                tuple(s.ranges.values()),
                tuple((t, p, c) for (t, p), c in s.claims.items()),
                {t: plan for t, plan in catalog.plans.items() if t in topics},
                {t: i for t, i in catalog.ids.items() if t in topics},
                grown,
                self.progress(s.arriving) if s.arriving else None,
            ),
        )


def _outcomes(dropped: list[Dropped]) -> list[PartitionOutcome]:
    """The runners' acknowledgements' partitions, as outcomes."""
    return [
        PartitionOutcome(
            str(d["topic"]),
            int(str(d["partition"])),
            int(str(d["start"])),
            int(str(d["committed"])),
            progress_written=bool(d["progress_written"]),
            lost=int(str(d["lost"])),
        )
        for batch in dropped
        for d in batch
    ]
