"""Exclusive assignment: which k2k instance writes which source partitions.

Runs on: driver. Every ``k2k start`` of a pipeline is a *member* of its commit group in the
assignment topic on the target. The protocol, in the order a planner meets it:

1. **Heartbeat.** A member writes a member record every ``heartbeat_s``. A member is alive
   while its newest heartbeat is at most ``graceWindow`` older than our own newest one (both
   timestamps come from the same place, the record timestamps of the topic, which k2k
   creates with ``LogAppendTime``: one clock, the broker's).
2. **Share.** The alive members, sorted by name, split the sorted source partitions round
   robin. Standby members (``--standby``) get work only while no other member is alive.
   Every member computes the same split from the same records.
3. **Claim.** For each partition of its share the planner writes an owner record (member,
   transactional id of the runner that will write it, claim id) *before* anything else.
4. **Wait or fence.** If the previous claim on a partition has not been released, the
   planner waits up to ``graceWindow`` for the release (a live owner releases at the end of
   its lease, which it ends as soon as it sees the new member), then fences the previous
   owner: ``init_transactions`` on its transactional id aborts its open transaction and
   rejects all its future writes. Owners that are dead, or earlier runners of this very
   member, are fenced at once. At most ``fencingMaxParallelism`` fencings run together.
5. **Verify.** Each runner, after initialising its own transactional id (which fences any
   earlier attempt of the same task), reads the owner records of its partitions and stands
   down from any whose newest claim is not its own; only then does it read progress.

Why this is exclusive: a claim is visible before its fence, and a runner verifies its claim
after its own fence-proof initialisation. Of two runners racing for a partition, either the
later claimant's fence kills the earlier writer, or the earlier one's verification sees the
later claim and never writes.

At-least-once pipelines use the same records without transactional ids: the split and the
releases work the same, and after ``graceWindow`` a new owner simply starts.

:class:`AssignmentView` holds what was read (pure state, its invariants listed there);
:class:`Assignment` does the reading, writing and fencing around it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal

from confluent_kafka import KafkaError, KafkaException, Message

from k2k.errors import ClusterError, K2KError, Unavailable
from k2k.formats import (
    AssignmentRecord,
    CutoverRecord,
    MemberRecord,
    OwnerRecord,
    ReleaseRecord,
    read_assignment,
)
from k2k.kafka import TP
from k2k.kafka.factory import build_producer, ready
from k2k.kafka.faults import describe, failure_kind, kafka_error_of
from k2k.kafka.murmur2 import murmur2_partition
from k2k.kafka.tail import SyncTimeout, TopicTail

if TYPE_CHECKING:
    from k2k.config.base import Policy

__all__ = [
    "CUTOVER_MEMBER",
    "TOOL_MEMBER",
    "Assignment",
    "AssignmentView",
    "StandDown",
    "default_member_name",
    "member_name_problem",
    "producer_ids",
    "transactional_id",
]

log = logging.getLogger("k2k.assignment")

#: A previous claim a claimant must deal with: (partition, claim id).
PreviousClaim = tuple[TP, str]
#: What a claimant does about a previous claim: nothing more (a release settled it), fence its
#: transactional id now (an earlier runner of this member, or a dead member), or wait.
Verdict = Literal["settled", "fence", "wait"]

#: The member names ``k2k offsets`` (to write positions) and ``k2k cutover`` (to hold every
#: claim once members stopped) join under: tools claim partitions like members, but never
#: take a share of the work (a pipeline of standbys only would otherwise deal them one).
TOOL_MEMBER = "k2k-offsets"
CUTOVER_MEMBER = "k2k-cutover"
TOOL_MEMBERS = frozenset({TOOL_MEMBER, CUTOVER_MEMBER})

#: How long a leaving member waits for the target to take its "left" heartbeat. A run
#: often ends because the target is away; peers take over after ``graceWindow`` without
#: it, so the exit is not held up for the sync timeout.
LEAVE_WAIT_S = 5.0


class StandDown(K2KError):
    """This process must stop: a newer session of its member name took over (printed, exit 1)."""


def default_member_name() -> str:
    """Unique per process, so two instances started side by side never share a name."""
    return f"{socket.gethostname()}-{os.getpid()}"


_MEMBER_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


def member_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a member name given by the user, or None when it is
    usable: it becomes part of transactional ids, and :data:`TOOL_MEMBER` is taken.

    >>> member_name_problem("host-a.1") is None
    True
    >>> print(member_name_problem("k2k-offsets"))
    'k2k-offsets' is reserved for k2k offsets; expected another name
    """
    if not _MEMBER_NAME.fullmatch(name):
        return (
            f"{name!r} is not usable in transactional ids; expected letters, digits, "
            "'.', '_' and '-' (at most 100)"
        )
    if name in TOOL_MEMBERS:
        tool = "k2k offsets" if name == TOOL_MEMBER else "k2k cutover"
        return f"{name!r} is reserved for {tool}; expected another name"
    return None


def transactional_id(group: str, member: str, slot: int) -> str:
    """The transactional id of runner slot ``slot`` of ``member`` in commit group ``group``.

    >>> transactional_id("orders-dr", "host-a", 3)
    'k2k-orders-dr-host-a-3'

    Every id of a pipeline starts with ``k2k-<commit group>-``: grant Write on that
    TransactionalId prefix (and IdempotentWrite on the cluster).
    """
    return f"k2k-{group}-{member}-{slot}"


def producer_ids(txid: str) -> tuple[str, str]:
    """The two producers' ids behind a runner's transactional id (a claim names ``txid``;
    the runner writes through both in turn, see :mod:`k2k.pipeline.task.commit.transactions`).

    >>> producer_ids("k2k-orders-dr-host-a-3")
    ('k2k-orders-dr-host-a-3.a', 'k2k-orders-dr-host-a-3.b')
    """
    return f"{txid}.a", f"{txid}.b"


class AssignmentView:
    """Runs on: driver. What one member session has read of its commit group's assignment
    records: pure state, fed one record at a time by :meth:`apply`; no clients, no clock.

    Invariants (``tp`` is a source partition):

    A. ``members[name]`` is the newest member record of this group read under ``name``,
       with its record timestamp.
    B. ``owners[tp]`` is the newest owner record (claim) of this group read for ``tp``.
    C. ``unsettled[tp]`` holds the claims on ``tp`` read since the release that settled the
       last of the earlier ones, in log order: a contiguous suffix of the claims read for
       ``tp``. So a non-empty chain ends with ``owners[tp]``, and every key of
       ``unsettled`` is a key of ``owners``.
    D. A release removes its claim and every earlier one from the chain (their claimant
       waited for or fenced them before it wrote); a release naming a claim that is not in
       the chain (stale, or settled already) changes nothing.
    E. ``now_ms`` is the newest timestamp of this session's own member records (0 before
       the first), so it never decreases.
    F. Every record stored is of this view's ``group``; records of other groups change
       nothing.
    G. ``cutover`` is the newest cut-over record of this group (None before ``k2k cutover``).

    Liveness compares record timestamps with ``now_ms`` only, so the view never needs a
    clock of its own and every member computes the same split from the same records.
    """

    def __init__(self, group: str, member: str, session: str, grace_ms: int) -> None:
        self.group = group
        self.member = member
        self.session = session
        self.grace_ms = grace_ms
        self.members: dict[str, tuple[MemberRecord, int]] = {}  # newest record, its timestamp
        self.owners: dict[TP, OwnerRecord] = {}  # newest claim per partition
        self.claimed: set[TP] = set()  # claimed since a watcher last took them (Membership)
        self.unsettled: dict[TP, list[OwnerRecord]] = {}  # claims since the last release
        self.now_ms = 0  # our own newest heartbeat's timestamp: "now" on the topic's clock
        self.cutover: CutoverRecord | None = None  # k2k cutover's newest record

    def apply(self, record: AssignmentRecord, timestamp_ms: int) -> None:
        """Take one record read from the topic, in log order, with its record timestamp."""
        if record.group != self.group:
            return
        if isinstance(record, MemberRecord):
            self.members[record.member] = (record, timestamp_ms)
            if record.member == self.member and record.session == self.session:
                self.now_ms = max(self.now_ms, timestamp_ms)
        elif isinstance(record, OwnerRecord):
            tp = (record.topic, record.partition)
            self.owners[tp] = record
            self.claimed.add(tp)
            self.unsettled.setdefault(tp, []).append(record)
        elif isinstance(record, CutoverRecord):
            self.cutover = record
        else:
            self._release(record)

    def _release(self, record: ReleaseRecord) -> None:
        chain = self.unsettled.get((record.topic, record.partition), [])
        for i, owner in enumerate(chain):
            if owner.claim == record.claim:
                del chain[: i + 1]
                return

    def alive(self) -> dict[str, MemberRecord]:
        """Members whose newest record says ``alive`` and is within ``graceWindow`` of our
        own newest heartbeat (this member counts alive while its own record says so)."""
        return self.alive_at(self.now_ms)

    def alive_at(self, now_ms: int) -> dict[str, MemberRecord]:
        """:meth:`alive` against ``now_ms`` instead of our own newest heartbeat: the same
        rule for an observer that writes no heartbeat (``k2k status``) and brings its own
        "now" on the topic's clock."""
        since = now_ms - self.grace_ms
        return {
            name: rec
            for name, (rec, ts) in self.members.items()
            if rec.state == "alive" and (name == self.member or ts >= since)
        }

    def active_members(self) -> tuple[str, ...]:
        """The members that share the work now: the alive non-standby ones, else standbys
        (never a tool's, :data:`TOOL_MEMBERS`)."""
        alive = {m: r for m, r in self.alive().items() if m not in TOOL_MEMBERS}
        working = sorted(m for m, r in alive.items() if not r.standby)
        return tuple(working or sorted(alive))

    def share(self, partitions: Iterable[TP], members: tuple[str, ...]) -> list[TP]:
        """This member's partitions: the sorted partitions dealt round robin to ``members``.

        >>> AssignmentView("g", "b", "s", 1000).share([("t", 2), ("t", 0), ("t", 1)], ("a", "b"))
        [('t', 1)]
        """
        if self.member not in members:
            return []
        i, n = members.index(self.member), len(members)
        return [tp for k, tp in enumerate(sorted(partitions)) if k % n == i]

    def claimed_elsewhere(self, claims: Mapping[TP, str]) -> list[TP]:
        """Partitions among ``claims`` (partition -> claim id) whose newest claim is no
        longer ours."""
        return [
            tp
            for tp, claim in claims.items()
            if tp not in self.owners or self.owners[tp].claim != claim
        ]

    def newer_session(self) -> MemberRecord | None:
        """The newest record under our member name when it is of a newer session than ours
        (another process took the name), else None."""
        mine = self.members.get(self.member)
        if mine is not None and mine[0].session > self.session:
            return mine[0]
        return None

    def previous_claims(self, tps: Iterable[TP]) -> dict[PreviousClaim, OwnerRecord]:
        """The unsettled claims on ``tps``: what a new claimant must wait for or fence."""
        return {(tp, rec.claim): rec for tp in tps for rec in self.unsettled.get(tp, [])}

    def verdicts(
        self, pending: Mapping[PreviousClaim, OwnerRecord]
    ) -> dict[PreviousClaim, Verdict]:
        """What a claimant does now about each previous claim in ``pending``."""
        alive = self.alive()
        out: dict[PreviousClaim, Verdict] = {}
        for (tp, claim), rec in pending.items():
            if all(r.claim != claim for r in self.unsettled.get(tp, [])):
                out[(tp, claim)] = "settled"
            elif rec.member == self.member or rec.member not in alive:
                # An earlier runner of this member (a runner re-initialising the same id
                # fences it itself), or a dead member: no reason to wait.
                out[(tp, claim)] = "fence"
            else:
                out[(tp, claim)] = "wait"
        return out


class Assignment:
    """Runs on: driver. This member's view of the assignment topic, and its writes to it.

    The state read so far is :attr:`view` (an :class:`AssignmentView`); ``members``,
    ``owners``, ``unsettled`` and ``now_ms`` read through to it.
    """

    def __init__(
        self,
        *,
        producer_conf: Mapping[str, str],
        consumer_conf: Mapping[str, str],
        topic: str,
        partitions: int,
        group: str,
        member: str,
        standby: bool,
        grace_s: float,
        fencing_parallelism: int,
        sync_timeout_s: float,
        on_bad_record: Policy,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.group = group
        self.member = member
        self.standby = standby
        self.grace_s = grace_s
        self.heartbeat_s = max(0.2, min(2.0, grace_s / 5))
        self.fencing_parallelism = fencing_parallelism
        self.on_bad_record = on_bad_record
        # Sessions sort by start time: the newest session of a member name wins.
        self.session = f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"
        #: Transactional ids of previous owners this member fenced (metrics).
        self.fencings = 0
        self.host = socket.gethostname()
        self.view = AssignmentView(group, member, self.session, int(grace_s * 1000))
        self._producer_conf = dict(producer_conf)
        # Claims must be readable as soon as they are acknowledged: durable, unbatched.
        durable = {**producer_conf, "acks": "all", "enable.idempotence": "true", "linger.ms": "0"}
        self._producer = ready(build_producer(durable), topic)
        self._tail = TopicTail(
            consumer_conf,
            topic,
            range(partitions),
            group_id=f"k2k.{group}.assignment-reader",
            timeout_s=sync_timeout_s,
            untransacted=True,
        )
        #: The first failed write (heartbeat or claim) since the last claims were written.
        self.write_error: ClusterError | None = None
        self._claims = 0
        self._beats_stopped = threading.Event()
        self._beats: threading.Thread | None = None

    @property
    def grace_ms(self) -> int:
        return self.view.grace_ms

    @property
    def members(self) -> dict[str, tuple[MemberRecord, int]]:
        return self.view.members

    @property
    def owners(self) -> dict[TP, OwnerRecord]:
        return self.view.owners

    @property
    def unsettled(self) -> dict[TP, list[OwnerRecord]]:
        return self.view.unsettled

    @property
    def now_ms(self) -> int:
        return self.view.now_ms

    # -- reading -------------------------------------------------------------------------

    def catch_up(self) -> None:
        """Heartbeat, then read everything up to now (our heartbeat included)."""
        self.heartbeat()
        self._producer.flush(self._tail.timeout_s)
        if self._beats is None:
            self._beats = threading.Thread(target=self._beat, name="k2k-heartbeat", daemon=True)
            self._beats.start()
        self.peek()

    def peek(self) -> None:
        """Read everything up to now without joining (no heartbeat: no member sees us)."""
        try:
            self._tail.catch_up(self._apply)
        except SyncTimeout as exc:
            raise Unavailable(f"{exc} (coordination.assignment.topic)") from None
        self._check_session()

    def tick(self) -> None:
        """Read what arrived (non-blocking)."""
        self._producer.poll(0)
        self._tail.poll(self._apply)
        self._check_session()

    def alive(self) -> dict[str, MemberRecord]:
        """Members whose newest heartbeat is within ``graceWindow`` of ours."""
        return self.view.alive()

    def active_members(self) -> tuple[str, ...]:
        """The members that share the work now: the alive non-standby ones, else standbys."""
        return self.view.active_members()

    def share(self, partitions: list[TP], members: tuple[str, ...]) -> list[TP]:
        """This member's partitions: the sorted partitions dealt round robin to ``members``."""
        return self.view.share(partitions, members)

    # -- writing -------------------------------------------------------------------------

    def heartbeat(self, *, state: str = "alive") -> None:
        rec = MemberRecord(
            self.group,
            self.member,
            self.session,
            state,
            self.standby,
            self.host,
            int(time.time() * 1000),
        )
        self._send(*rec.encode())

    def acquire(self, claims: Mapping[TP, str], stopping: Callable[[], bool]) -> dict[TP, str]:
        """Claim ``claims`` (partition -> transactional id, "" at-least-once) for this
        member, wait for or fence their previous owners; returns partition -> claim id.

        The previous owners of a partition are every claim since its last release: a
        claimant that died or stopped before fencing its own predecessors leaves them
        unsettled, so they are waited for (or fenced) again. Returns early (claims written,
        nothing fenced) when ``stopping()`` becomes true.
        """
        pending = self.view.previous_claims(claims)
        ids = self._write_claims(claims)
        # Read them back: a view still without them (its tail lagging, as after the topic's
        # leader was killed) shows our previous claims, which the lease takes for another's.
        self.catch_up()
        to_fence = self._await_previous(pending, claims, stopping)
        if not stopping():
            self._fence(to_fence)
        return ids

    def release(self, claims: Mapping[TP, str]) -> None:
        """Give up ``claims`` (partition -> claim id) after their last commit."""
        now_ms = int(time.time() * 1000)
        for tp, claim in claims.items():
            self._send(*ReleaseRecord(self.group, tp[0], tp[1], claim, now_ms).encode())
        self._producer.flush(self._tail.timeout_s)

    def leave(self, claims: Mapping[TP, str]) -> None:
        """Clean stop: release and say so, so other members take over without waiting.
        The ``left`` record is best effort within :data:`LEAVE_WAIT_S`."""
        self._stop_beating()
        if claims:
            self.release(claims)
        self.heartbeat(state="left")
        self._producer.flush(min(self._tail.timeout_s, LEAVE_WAIT_S))

    def close(self) -> None:
        self._stop_beating()
        self._tail.close()
        self._producer.flush(1)

    def _beat(self) -> None:
        """Heartbeats from their own thread: a planner busy planning, fencing or waiting on
        Spark must not look dead. Only a frozen or dead process stops them."""
        while not self._beats_stopped.wait(self.heartbeat_s):
            self.heartbeat()

    def _stop_beating(self) -> None:
        """At once: a stopping process must not wait out a heartbeat interval."""
        self._beats_stopped.set()
        if self._beats is not None:
            self._beats.join(self.heartbeat_s + 1)

    # -- internals -----------------------------------------------------------------------

    def _write_claims(self, claims: Mapping[TP, str]) -> dict[TP, str]:
        """Write one owner record per partition, acknowledged before anything else happens:
        a claim must be visible before its predecessors are fenced."""
        ids: dict[TP, str] = {}
        now_ms = int(time.time() * 1000)
        # Heartbeats lost in an outage since do not matter; these claims' own failures do.
        self.write_error = None
        for tp, txid in claims.items():
            self._claims += 1
            claim = f"{self.session}/{self._claims}"
            ids[tp] = claim
            rec = OwnerRecord(
                self.group, tp[0], tp[1], self.member, self.session, txid, claim, now_ms
            )
            self._send(*rec.encode())
        left = self._producer.flush(self._tail.timeout_s)
        self._raise_write_error()
        if left:
            raise Unavailable(
                f"claims not acknowledged by the target within {self._tail.timeout_s:g} s "
                "(coordination.commit.syncTimeout)"
            )
        return ids

    def _await_previous(
        self,
        pending: dict[PreviousClaim, OwnerRecord],
        claims: Mapping[TP, str],
        stopping: Callable[[], bool],
    ) -> dict[str, list[TP]]:
        """Wait up to ``graceWindow`` for the releases of ``pending``; returns the
        transactional ids to fence (with their partitions): those of previous claims that
        need no wait, and of those still unreleased at the deadline."""
        to_fence: dict[str, list[TP]] = {}

        def fence_later(tp: TP, rec: OwnerRecord) -> None:
            if rec.transactional_id and rec.transactional_id != claims[tp]:
                to_fence.setdefault(rec.transactional_id, []).append(tp)

        deadline = time.monotonic() + self.grace_s
        while pending and not stopping():
            for key, verdict in sorted(self.view.verdicts(pending).items()):
                if verdict != "wait":
                    rec = pending.pop(key)
                    if verdict == "fence":
                        fence_later(key[0], rec)
            if not pending:
                break
            if time.monotonic() >= deadline:
                for (tp, _), rec in sorted(pending.items()):
                    log.warning(
                        "%s[%d]: member %s did not release it within graceWindow (%g s); "
                        "fencing it",
                        tp[0],
                        tp[1],
                        rec.member,
                        self.grace_s,
                    )
                    fence_later(tp, rec)
                break
            time.sleep(0.05)
            self.tick()
        return to_fence

    def _fence(self, to_fence: dict[str, list[TP]]) -> None:
        """Initialise both producer ids of each previous owner's transactional id: their
        open transactions are aborted and every later write of them is rejected."""
        if not to_fence:
            return
        with ThreadPoolExecutor(self.fencing_parallelism, "k2k-fence") as pool:
            futures = [
                pool.submit(self._fence_one, pid, to_fence[t])
                for t in sorted(to_fence)
                for pid in producer_ids(t)
            ]
            for future in futures:
                future.result()
        self.fencings += len(to_fence)

    def _fence_one(self, txid: str, tps: list[TP]) -> None:
        started = time.monotonic()
        p = ready(build_producer({**self._producer_conf, "transactional.id": txid}), self.topic)
        try:
            p.init_transactions(max(30.0, self._tail.timeout_s))
        except KafkaException as exc:
            err = kafka_error_of(exc)
            raise failure_kind(err, ClusterError)(
                f"could not fence transactional id {txid!r}: {describe(err) if err else exc}"
            ) from None
        finally:
            p.flush(0)
        log.info(
            "fenced %s (previous owner of %s) in %.2f s",
            txid,
            ", ".join(f"{t}[{part}]" for t, part in tps),
            time.monotonic() - started,
        )

    def _send(self, key: bytes, value: bytes) -> None:
        part = murmur2_partition(key, self.partitions)
        self._producer.produce(self.topic, value, key, part, on_delivery=self._on_delivery)
        self._producer.poll(0)

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None and self.write_error is None:
            kind = failure_kind(err, ClusterError)
            self.write_error = kind(f"could not write to {self.topic}: {describe(err)}")

    def _raise_write_error(self) -> None:
        if self.write_error is not None:
            raise self.write_error

    def _apply(self, m: Message) -> None:
        read = read_assignment(m, self.on_bad_record, log)
        if read is not None and read[1] is not None:
            self.view.apply(read[1], m.timestamp()[1])

    def _check_session(self) -> None:
        newer = self.view.newer_session()
        if newer is not None:
            self._stop_beating()
            raise StandDown(
                f"another k2k process started as member {self.member!r} (session "
                f"{newer.session} on {newer.host}); this one stands down"
            )
