"""The member side of ``k2k cutover`` (k2k.pipeline.driver.cutover, membership, planner):
a drained cut-over record stops a member, at the join or while it runs; a record with step
``cut`` only changes nothing; a member's watch of its claims on every tick. No clients: the
assignment is a fake around a real view."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import k2k
from k2k.coordination.assignment import AssignmentView
from k2k.formats import CutoverRecord, MemberRecord, OwnerRecord
from k2k.pipeline.driver import membership as membership_module
from k2k.pipeline.driver import planner as planner_module
from k2k.pipeline.driver.cutover import CutOver, describe, drained
from k2k.pipeline.driver.membership import Membership
from k2k.pipeline.driver.planner import Planner
from k2k.pipeline.driver.watcher import IdleWatch, LeaseWatch

GROUP = "cut-unit"
DOC: dict[str, Any] = {
    "name": GROUP,
    "source": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:1"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:2"}}},
    "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": "source"}}],
}
STARTED_MS = 1_700_000_000_000


def record(*steps: str, group: str = GROUP) -> CutoverRecord:
    return CutoverRecord(
        group, GROUP, steps, {("orders", 0): 42}, {}, (), (), STARTED_MS, STARTED_MS + 5, "host-a"
    )


def view_with(*records: CutoverRecord) -> AssignmentView:
    view = AssignmentView(GROUP, "m", "s1", 10_000)
    view.apply(MemberRecord(GROUP, "m", "s1", "alive", False, "h", 1), 1_000)
    for i, rec in enumerate(records):
        view.apply(rec, 2_000 + i)
    return view


# -- the record's meaning for a member ------------------------------------------------------


def test_only_a_drained_record_of_our_group_stops_a_member():
    assert drained(view_with()) is None
    assert drained(view_with(record("cut"))) is None
    assert drained(view_with(record("cut", "drain", group="other"))) is None
    stop = record("cut", "drain")
    assert drained(view_with(record("cut"), stop)) == stop
    done = record("cut", "drain", "stop", "groups")
    assert drained(view_with(stop, done)) == done  # a start after the cut-over stops too


def test_the_line_names_the_cut_over_its_time_and_host():
    assert describe(record("cut", "drain")) == (
        "the pipeline was cut over to the target by k2k cutover "
        "(cut at 2023-11-14T22:13:20Z, host host-a)"
    )


# -- Membership ---------------------------------------------------------------------------


class _Assignment:
    """What Membership uses of Assignment: a real view, fed by the test."""

    def __init__(self) -> None:
        self.view = view_with()
        self.owners: dict[Any, Any] = {}
        self.left = False

    def catch_up(self) -> None:
        pass

    def tick(self) -> None:
        pass

    def active_members(self) -> tuple[str, ...]:
        return ("m",)

    def leave(self, claims: dict[Any, str]) -> None:
        self.left = True

    def close(self) -> None:
        pass


@pytest.fixture
def member(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Membership, _Assignment]]:
    fake = _Assignment()
    monkeypatch.setattr(membership_module, "assignment_member", lambda *args, **kwargs: fake)
    yield Membership(k2k.load_pipeline(DOC, env={}), "m", False, 1), fake


def test_a_running_member_ends_its_lease_once_drained_not_at_the_cut(member, caplog):
    membership, fake = member
    fake.view.apply(OwnerRecord(GROUP, "orders", 0, "m", "s1", "k2k-0", "c1", 0), 1_500)
    assert not membership.changed(("m",), {("orders", 0): "c1"})
    fake.view.apply(record("cut"), 3_000)
    assert not membership.changed(("m",), {("orders", 0): "c1"})  # still copying to the cut
    assert membership.cutover is None
    fake.view.apply(record("cut", "drain"), 4_000)
    with caplog.at_level(logging.INFO, "k2k.planner"):
        assert membership.changed(("m",), {("orders", 0): "c1"})
        assert membership.changed(("m",), {})  # and stays ended (idle, standby)
    assert membership.cutover == record("cut", "drain")
    said = [r.getMessage() for r in caplog.records if "cut over" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith("ending the lease and stopping"), said


def test_a_member_joining_after_the_cut_over_stops_and_leaves(member):
    membership, fake = member
    fake.view.apply(record("cut", "drain", "stop"), 3_000)
    with pytest.raises(CutOver) as raised, membership:
        membership.join()
    assert raised.value.record.steps == ("cut", "drain", "stop")
    assert fake.left  # its "left" record: nobody waits for it


def test_a_member_joining_at_the_cut_joins(member):
    membership, fake = member
    fake.view.apply(record("cut"), 3_000)
    membership.join()  # k2k cutover waits for the members to copy up to the cut


def test_an_idle_member_or_standby_stops_too(member):
    membership, fake = member
    scope = SimpleNamespace(membership=membership, options=SimpleNamespace(until_caught_up=False))
    idle = IdleWatch(scope, ("m",), [])  # type: ignore[arg-type]
    assert not idle.reassigned()
    fake.view.apply(record("cut", "drain"), 3_000)
    assert idle.reassigned()
    assert LeaseWatch(scope, ("m",), {}).reassigned()  # type: ignore[arg-type]


# -- Planner ------------------------------------------------------------------------------


def test_a_run_cut_over_at_the_join_returns_its_record(monkeypatch: pytest.MonkeyPatch):
    @contextlib.contextmanager
    def open_run(*args: Any) -> Iterator[Any]:
        raise CutOver(record("cut", "drain"))
        yield  # pragma: no cover

    monkeypatch.setattr(planner_module, "open_run", open_run)
    stats = Planner(k2k.load_pipeline(DOC, env={}), member="m").run()
    assert stats.cutover == record("cut", "drain")
    assert (stats.leases, stats.records) == (0, 0)


class _Membership:
    def __init__(self, cut_at_share: bool) -> None:
        self.cutover: CutoverRecord | None = None
        self.cut_at_share = cut_at_share
        self.claimed = False

    def share(self, partitions: Any) -> tuple[tuple[str, ...], set[Any]]:
        if self.cut_at_share:
            self.cutover = record("cut", "drain")
        return ("m",), {("orders", 0)}

    def claim(self, *args: Any) -> list[Any]:
        self.claimed = True
        raise AssertionError("claimed after the cut-over")


def _scope(membership: _Membership) -> Any:
    discovery = SimpleNamespace(partitions=lambda: [("orders", 0)])
    outages = SimpleNamespace(over=lambda: None)
    return SimpleNamespace(
        membership=membership,
        discovery=discovery,
        job=None,
        checkpoints=None,
        group_sync=None,
        outages=outages,
    )


def test_the_loop_stops_before_claiming_once_drained():
    planner = Planner(k2k.load_pipeline(DOC, env={}), member="m")
    membership = _Membership(cut_at_share=True)
    planner._loop(_scope(membership))  # returns: no lease, no claim
    assert not membership.claimed
    assert planner.stats.cutover == record("cut", "drain")
    assert planner.stats.leases == 0


def test_the_loop_stops_after_a_lease_ended_by_the_cut_over():
    planner = Planner(k2k.load_pipeline(DOC, env={}), member="m")
    membership = _Membership(cut_at_share=False)
    membership.cutover = record("cut", "drain", "stop")
    stopped = threading.Event()
    planner._stop = stopped
    planner._loop(_scope(membership))
    assert planner.stats.cutover == record("cut", "drain", "stop")
    assert not stopped.is_set()  # no stop request: the cut-over ended the run


def test_a_lease_watch_looks_at_new_claims_only_and_sees_a_taker(member, monkeypatch):
    """Every tick: a full look at a new lease's claims, then only at partitions claimed
    since the last tick (a whole cluster's claims are not scanned twice a second)."""
    membership, fake = member
    view = fake.view
    claims = {("orders", p): f"s1/{p}" for p in range(3)}
    for p in range(3):
        view.apply(OwnerRecord(GROUP, "orders", p, "m", "s1", "k2k-0", f"s1/{p}", 0), 1_500)
    looked: list[int] = []
    full = view.claimed_elsewhere
    monkeypatch.setattr(view, "claimed_elsewhere", lambda c: looked.append(len(c)) or full(c))
    assert not membership.changed(("m",), claims)
    assert not membership.changed(("m",), claims)
    assert looked == [3, 0]
    view.apply(OwnerRecord(GROUP, "orders", 2, "x", "s9", "k2k-0", "s9/1", 0), 2_500)
    assert membership.changed(("m",), claims)  # another member took orders[2]
    assert looked == [3, 0, 1]
