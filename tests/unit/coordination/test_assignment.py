"""The assignment view, fed record values one at a time: liveness, the split, claim chains.

Every test applies its records through :func:`feed`, which checks the view's invariants (the
"Invariants" list of :class:`AssignmentView`) after every single record, then asserts on
the outcome. No clients: the real topic is exercised by tests/integration/test_exactly_once.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from k2k.coordination.assignment import TOOL_MEMBER, AssignmentView
from k2k.coordination.claims import lost_of
from k2k.formats import AssignmentRecord, MemberRecord, OwnerRecord, ReleaseRecord

GROUP = "orders-dr"
GRACE_MS = 10_000
TP0 = ("orders", 0)
TP1 = ("orders", 1)

Step = tuple[AssignmentRecord, int]


def assert_invariants(view: AssignmentView, applied: list[Step]) -> None:
    """The invariants A-F of :class:`AssignmentView`, given every record applied so far."""
    ours = [(r, ts) for r, ts in applied if r.group == view.group]
    newest_member = {r.member: (r, ts) for r, ts in ours if isinstance(r, MemberRecord)}
    claims: dict[tuple[str, int], list[OwnerRecord]] = {}
    for r, _ in ours:
        if isinstance(r, OwnerRecord):
            claims.setdefault((r.topic, r.partition), []).append(r)
    # A. The newest member record per name, with its timestamp.
    assert view.members == newest_member
    # B. The newest claim per partition.
    assert view.owners == {tp: chain[-1] for tp, chain in claims.items()}
    # C. A chain is a contiguous suffix of the partition's claims, so it ends with the owner.
    assert set(view.unsettled) <= set(view.owners)
    for tp, chain in view.unsettled.items():
        if chain:
            assert claims[tp][-len(chain) :] == chain
            assert chain[-1] is view.owners[tp]
    # D. No claim left in a chain was named by a release read after it.
    for tp, chain in view.unsettled.items():
        for claim in chain:
            after = ours[[r for r, _ in ours].index(claim) + 1 :]
            assert not any(
                isinstance(r, ReleaseRecord)
                and (r.topic, r.partition) == tp
                and r.claim == claim.claim
                for r, _ in after
            ), f"{claim} is still unsettled after its release"
    # E. now_ms is the newest timestamp of our own session's heartbeats (so never decreases).
    own = [
        ts
        for r, ts in ours
        if isinstance(r, MemberRecord) and (r.member, r.session) == (view.member, view.session)
    ]
    assert view.now_ms == max(own, default=0)
    # F. Only records of the view's group are kept.
    assert all(r.group == view.group for r, _ in view.members.values())
    assert all(r.group == view.group for r in view.owners.values())


def feed(view: AssignmentView, steps: Iterable[Step], applied: list[Step] | None = None) -> None:
    """Apply ``steps`` one at a time, checking the invariants after every one."""
    applied = [] if applied is None else applied
    for record, timestamp_ms in steps:
        view.apply(record, timestamp_ms)
        applied.append((record, timestamp_ms))
        assert_invariants(view, applied)


def beat(member: str, at: int, *, session: str = "s1", state: str = "alive", standby=False):
    return MemberRecord(GROUP, member, session, state, standby, f"{member}.host", at), at


def claim(tp, member: str, n: int, at: int, *, txid: str = "", group: str = GROUP):
    session = f"{member}-s"
    rec = OwnerRecord(group, tp[0], tp[1], member, session, txid, f"{session}/{n}", at)
    return rec, at


def release(tp, claim_step, at: int):
    return ReleaseRecord(GROUP, tp[0], tp[1], claim_step[0].claim, at), at


def view_of(member: str = "a", session: str = "s1") -> AssignmentView:
    return AssignmentView(GROUP, member, session, GRACE_MS)


# --- liveness and the split ----------------------------------------------------------------------


def test_a_member_is_alive_until_its_heartbeat_is_older_than_grace():
    view = view_of("a")
    applied: list[Step] = []
    feed(view, [beat("b", 1_000), beat("c", 9_000), beat("a", 11_000)], applied)
    assert sorted(view.alive()) == ["a", "b", "c"]  # 1,000 >= 11,000 - 10,000
    feed(view, [beat("a", 11_001)], applied)
    assert sorted(view.alive()) == ["a", "c"]
    feed(view, [beat("b", 11_002)], applied)  # b is back
    assert view.active_members() == ("a", "b", "c")


def test_our_clock_is_our_own_sessions_heartbeats_and_never_goes_back():
    view = view_of("a", "s1")
    applied: list[Step] = []
    feed(view, [beat("a", 5_000), beat("b", 50_000), beat("a", 4_000)], applied)
    assert view.now_ms == 5_000  # neither b's clock nor an older record moves it
    feed(view, [beat("a", 6_000, session="s0")], applied)  # an older session of our name
    assert view.now_ms == 5_000
    assert view.newer_session() is None  # s0 sorts before s1


def test_a_member_that_left_is_not_alive_and_loses_its_share():
    a, b = view_of("a"), view_of("b")
    steps = [beat("a", 1_000), beat("b", 1_000)]
    for view in (a, b):
        feed(view, steps)
        assert view.active_members() == ("a", "b")
    partitions = [("orders", p) for p in range(5)]
    assert a.share(partitions, a.active_members()) == [("orders", 0), ("orders", 2), ("orders", 4)]
    assert b.share(partitions, b.active_members()) == [("orders", 1), ("orders", 3)]
    applied = [*steps]
    feed(b, [beat("a", 2_000, state="left"), beat("b", 2_000)], applied)
    assert b.active_members() == ("b",)
    assert b.share(partitions, b.active_members()) == partitions


def test_the_split_is_a_partition_of_the_partitions():
    members = ("a", "b", "c")
    partitions = [(t, p) for t in ("x", "orders") for p in range(4)]
    shares = [view_of(m).share(partitions, members) for m in members]
    assert sorted(tp for share in shares for tp in share) == sorted(partitions)
    assert [len(s) for s in shares] == [3, 3, 2]
    assert view_of("z").share(partitions, members) == []  # not a working member


def test_standbys_work_only_while_no_other_member_is_alive():
    view = view_of("s")
    applied: list[Step] = []
    feed(view, [beat("s", 1_000, standby=True), beat("a", 1_000)], applied)
    assert view.active_members() == ("a",)
    feed(view, [beat("a", 1_500, state="left"), beat("s", 2_000, standby=True)], applied)
    assert view.active_members() == ("s",)


def test_the_offsets_tool_never_takes_a_share():
    """k2k offsets joins as a standby to claim partitions it writes: a pipeline of standbys
    only must not deal it work."""
    view = view_of("s")
    feed(view, [beat("s", 1_000, standby=True), beat(TOOL_MEMBER, 1_000, standby=True)])
    assert view.active_members() == ("s",)
    assert TOOL_MEMBER in view.alive()


def test_a_newer_session_of_our_name_takes_over():
    view = view_of("a", "1700000000000-aaaaaaaa")
    mine = beat("a", 1_000, session="1700000000000-aaaaaaaa")
    newer = beat("a", 1_200, session="1700000099999-bbbbbbbb")
    applied: list[Step] = []
    feed(view, [mine], applied)
    assert view.newer_session() is None
    feed(view, [newer], applied)
    assert view.newer_session() == newer[0]
    assert view.now_ms == 1_000  # the other session's heartbeat is not our clock
    feed(view, [beat("a", 1_300, session="1700000000000-aaaaaaaa")], applied)
    assert view.newer_session() is None  # our own record is the newest again (log order)


# --- claims and releases -------------------------------------------------------------------------


def test_a_release_settles_its_claim_and_every_earlier_one():
    view = view_of("c")
    c1, c2, c3 = claim(TP0, "a", 1, 10), claim(TP0, "b", 1, 20), claim(TP0, "c", 1, 30)
    applied: list[Step] = []
    feed(view, [c1, c2, c3], applied)
    assert view.unsettled[TP0] == [c1[0], c2[0], c3[0]]
    assert view.owners[TP0] == c3[0]
    feed(view, [release(TP0, c2, 40)], applied)
    assert view.unsettled[TP0] == [c3[0]]
    feed(view, [release(TP0, c3, 50)], applied)
    assert view.unsettled[TP0] == []
    assert view.owners[TP0] == c3[0]  # a release never removes the owner record


def test_stale_and_foreign_releases_change_nothing():
    view = view_of("b")
    c1, c2 = claim(TP0, "a", 1, 10), claim(TP0, "b", 1, 20)
    applied: list[Step] = []
    feed(view, [c1, release(TP0, c1, 15), c2], applied)
    assert view.unsettled[TP0] == [c2[0]]
    feed(view, [release(TP0, c1, 25)], applied)  # late duplicate of a settled release
    assert view.unsettled[TP0] == [c2[0]]
    feed(view, [release(TP1, c2, 26)], applied)  # names c2's claim id, but another partition
    assert view.unsettled[TP0] == [c2[0]]
    assert TP1 not in view.unsettled
    feed(view, [claim(TP0, "x", 1, 27, group="other-group")], applied)
    assert view.owners[TP0] == c2[0]


def test_previous_claims_get_a_verdict_each():
    view = view_of("me")
    mine_before = claim(TP0, "me", 1, 5, txid="k2k-g-me-0")
    dead = claim(TP0, "gone", 1, 6, txid="k2k-g-gone-0")
    live = claim(TP1, "b", 1, 7, txid="k2k-g-b-0")
    applied: list[Step] = []
    feed(view, [beat("gone", 1_000), beat("b", 30_000), beat("me", 30_000)], applied)
    feed(view, [mine_before, dead, live], applied)
    pending = view.previous_claims([TP0, TP1])
    assert sorted(pending) == sorted(
        (tp, rec.claim) for tp, rec in [(TP0, mine_before[0]), (TP0, dead[0]), (TP1, live[0])]
    )
    verdicts = view.verdicts(pending)
    assert verdicts == {
        (TP0, mine_before[0].claim): "fence",  # an earlier runner of this member
        (TP0, dead[0].claim): "fence",  # gone: its heartbeat is older than grace
        (TP1, live[0].claim): "wait",  # alive: it releases at the end of its lease
    }
    feed(view, [release(TP1, live, 31_000)], applied)
    assert view.verdicts(pending)[(TP1, live[0].claim)] == "settled"


def test_a_claim_by_another_member_is_claimed_elsewhere():
    view = view_of("a")
    mine = claim(TP0, "a", 1, 10)
    other = claim(TP1, "a", 2, 11)
    applied: list[Step] = []
    feed(view, [mine, other], applied)
    ours = {TP0: mine[0].claim, TP1: other[0].claim}
    assert view.claimed_elsewhere(ours) == []
    taker = claim(TP1, "b", 1, 12)
    feed(view, [taker], applied)
    assert view.claimed_elsewhere(ours) == [TP1]
    assert view.claimed_elsewhere({("orders", 9): "a-s/3"}) == [("orders", 9)]  # never read
    assert lost_of(ours, view.owners) == {TP1: "b"}
    assert lost_of({("orders", 9): "x"}, view.owners) == {("orders", 9): "nobody"}


def test_two_sessions_of_one_member_name_claim_in_turn():
    """A restarted process keeps its name: its new session claims again; the old session's
    claims stay unsettled until a release names the newest of them."""
    view = view_of("a", "s2")
    old = OwnerRecord(GROUP, "orders", 0, "a", "s1", "k2k-g-a-0", "s1/1", 10), 10
    new = OwnerRecord(GROUP, "orders", 0, "a", "s2", "k2k-g-a-0", "s2/1", 20), 20
    applied: list[Step] = []
    feed(view, [beat("a", 5, session="s1"), old, beat("a", 15, session="s2"), new], applied)
    assert view.newer_session() is None
    assert view.unsettled[TP0] == [old[0], new[0]]
    assert view.verdicts(view.previous_claims([TP0]))[(TP0, "s1/1")] == "fence"
    feed(view, [release(TP0, new, 30)], applied)
    assert view.unsettled[TP0] == []
    assert view.claimed_elsewhere({TP0: "s2/1"}) == []
