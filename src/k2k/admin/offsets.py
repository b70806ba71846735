"""``k2k offsets``: a pipeline's committed positions, described and moved.

Runs on: the operator's machine. :func:`describe` only reads. Moving positions is planned
first (:func:`plan_move`: which partitions, from where to where, validated against the
source's offsets) and written only by :func:`apply_plan`, the way a member would write them:

1. refuse while members of the pipeline are alive (unless forced: members that are gone
   but still look alive, e.g. killed less than ``graceWindow`` ago);
2. join the commit group as member :data:`ADMIN_MEMBER` (standby, so it takes no share of
   a running pipeline's work) and *claim* the partitions in the assignment topic, waiting
   for or fencing their previous owners exactly as a member does
   (:meth:`~k2k.coordination.assignment.Assignment.acquire`): a runner still writing them
   stands down, and exactly-once its open transaction is aborted and its later writes are
   rejected;
3. exactly-once: initialise the transactional id the claims name (fencing an earlier run of
   this tool), check the claims are still ours, and write the progress records in one
   transaction; at-least-once: check the claims and write them plainly (acks=all, flushed,
   every delivery checked);
4. read the assignment topic again: a member that came alive during the write may have read
   the old positions (a planner reads progress once, when it joins), so it is named and the
   command fails, asking for that member to be restarted;
5. leave the group, releasing the claims only if the write succeeded. After a failed or
   interrupted write the claims stay, and the member that takes the partitions next fences
   this tool's transactional id first: a transaction whose outcome this tool could not learn
   is settled (committed or aborted) before anyone reads progress.

A live planner keeps its positions in memory and progress never moves backwards while it
runs, so positions of a really running pipeline move only once it is stopped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from k2k.admin.reader import PipelineReader, now_ms
from k2k.admin.table import iso, table
from k2k.config import PipelineConfig
from k2k.coordination.assignment import (
    TOOL_MEMBER,
    Assignment,
    StandDown,
    producer_ids,
    transactional_id,
)
from k2k.coordination.claims import lost_claims
from k2k.coordination.controltopics import assignment_member, ensure_control_topics
from k2k.errors import ClusterError, ConfigError, K2KError
from k2k.formats import MemberRecord, ProgressRecord
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView
from k2k.kafka.factory import build_producer, producer_settings, ready
from k2k.kafka.faults import abort_transaction, kafka_error_of
from k2k.kafka.faults import describe as describe_error
from k2k.kafka.murmur2 import murmur2_partition
from k2k.kafka.produce import produce_when_room

__all__ = [
    "ADMIN_MEMBER",
    "Change",
    "Destination",
    "JoinedDuringWrite",
    "MembersAlive",
    "NotConfirmed",
    "OffsetInputError",
    "OffsetPlan",
    "apply_plan",
    "check_selection",
    "describe",
    "describe_json",
    "destination",
    "plan_move",
    "render_describe",
]

#: The member name this tool claims partitions under, and writes progress records as.
ADMIN_MEMBER = TOOL_MEMBER

Kind = Literal["offset", "timestamp", "earliest", "latest"]


class OffsetInputError(ConfigError):
    """A flag of ``k2k offsets`` is wrong: an unknown topic or partition, an offset out of
    range, a timestamp that cannot be read (exit 2, like other bad input)."""


class MembersAlive(K2KError):
    """Refused: members of the pipeline are alive, and moving positions under them does
    not work (see the module docstring)."""


class JoinedDuringWrite(K2KError):
    """Written, but a member came alive while the positions were written: it may replicate
    from the old ones until it is restarted (see the module docstring, step 4)."""


class NotConfirmed(K2KError):
    """The plan was not confirmed (no ``--yes``, or the operator said no): nothing written."""


@dataclass(frozen=True, slots=True)
class Destination:
    """Where the chosen partitions move: an offset, the first offset at a timestamp, the
    earliest or the latest offset. ``flag`` names the option in errors."""

    kind: Kind
    value: int = 0
    flag: str = ""


@dataclass(frozen=True, slots=True)
class Change:
    """One partition's committed position, before (None: no progress yet) and after;
    ``topic_id`` is the source topic's id when the plan was made, written with the position
    so that a start after the topic is deleted and created again does not apply it."""

    topic: str
    partition: int
    before: int | None
    after: int
    topic_id: str = ""

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)

    def line(self) -> str:
        before = "none" if self.before is None else str(self.before)
        if self.before == self.after:
            return f"{self.topic}[{self.partition}]: {before} (unchanged)"
        return f"{self.topic}[{self.partition}]: {before} -> {self.after}"


@dataclass(frozen=True)
class OffsetPlan:
    """The positions a ``set`` or ``reset`` would write, one change per chosen partition."""

    pipeline: str
    commit_group: str
    changes: list[Change]

    def moving(self) -> list[Change]:
        """The changes that write something."""
        return [c for c in self.changes if c.before != c.after]

    def render(self) -> str:
        head = f"pipeline {self.pipeline} (commit group {self.commit_group}): committed "
        head += "positions, before -> after"
        return "\n".join([head, *(f"  {c.line()}" for c in self.changes)])


# -- describe ----------------------------------------------------------------------------


def describe(cfg: PipelineConfig) -> list[ProgressRecord]:
    """The committed position of every partition of the commit group, by partition."""
    progress = PipelineReader(cfg).progress()
    return [progress[tp] for tp in sorted(progress)]


def describe_json(cfg: PipelineConfig, records: Iterable[ProgressRecord]) -> dict[str, Any]:
    """The ``--json`` document of ``k2k offsets describe`` (docs/operations.md)."""
    return {
        "pipeline": cfg.name,
        "commitGroup": cfg.commit_group,
        "positions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "offset": r.offset,
                "committedAt": r.committed_at_ms,
                "committedBy": r.owner or None,
                "pipeline": r.pipeline,
            }
            for r in records
        ],
    }


def render_describe(records: Iterable[ProgressRecord]) -> str:
    rows = [
        [r.topic, str(r.partition), str(r.offset), iso(r.committed_at_ms), r.owner or "-"]
        for r in records
    ]
    return "\n".join(table(["TOPIC", "PARTITION", "OFFSET", "WRITTEN AT", "BY"], rows))


# -- planning ------------------------------------------------------------------------------


def destination(
    offset: int | None, timestamp: str | None, earliest: bool, latest: bool
) -> Destination:
    """The one destination the flags name (:class:`OffsetInputError` for none or several)."""
    given = [offset is not None, timestamp is not None, earliest, latest]
    if sum(given) != 1:
        raise OffsetInputError(
            "give exactly one of --offset O, --to-timestamp MS|ISO8601, --to-earliest, --to-latest"
        )
    if offset is not None:
        return Destination("offset", offset, "--offset")
    if timestamp is not None:
        return Destination("timestamp", parse_timestamp(timestamp), "--to-timestamp")
    return Destination("earliest" if earliest else "latest")


def parse_timestamp(text: str, flag: str = "--to-timestamp") -> int:
    """Milliseconds since the epoch, or an ISO 8601 time (UTC unless it names an offset);
    errors name ``flag``.

    >>> parse_timestamp("1700000000000"), parse_timestamp("2023-11-14T22:13:20Z")
    (1700000000000, 1700000000000)
    """
    if text.isdigit():
        ms = int(text)
    else:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise OffsetInputError(
                f"{flag} {text!r}: expected milliseconds since the epoch or an ISO "
                "8601 time such as 2024-05-01T12:00:00Z"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        ms = int(when.timestamp() * 1000)
    # Negative values are Kafka's LATEST/EARLIEST markers, not times.
    if not 0 <= ms < 2**63:
        raise OffsetInputError(
            f"{flag} {text!r}: {'before 1970' if ms < 0 else 'too large'}; expected "
            "a time from 1970-01-01T00:00:00Z on"
        )
    return ms


def plan_move(
    cfg: PipelineConfig,
    *,
    topic: str | None,
    partition: int | None,
    all_topics: bool,
    to: Destination,
    force: bool,
) -> OffsetPlan:
    """The changes that move the chosen partitions to ``to``; reads only.

    Raises :class:`MembersAlive` while members are alive (unless ``force``) and
    :class:`OffsetInputError` for unknown topics or partitions and offsets out of range."""
    check_selection(topic, partition, all_topics)
    reader = PipelineReader(cfg)
    state = reader.assignment()
    refuse_alive(cfg, state.alive(state.observer_now(now_ms()), exclude=ADMIN_MEMBER), force)
    progress = reader.progress()
    tps = _chosen(reader, {t for t, _ in progress}, topic, partition, all_topics)
    after = _resolve(reader, tps, to)
    ids = reader.source.topic_ids({t for t, _ in tps})
    changes = [
        Change(
            t,
            p,
            progress[(t, p)].offset if (t, p) in progress else None,
            after[(t, p)],
            ids.get(t, ""),
        )
        for t, p in tps
    ]
    return OffsetPlan(cfg.name, cfg.commit_group, changes)


def check_selection(topic: str | None, partition: int | None, all_topics: bool) -> None:
    """The selection flags make sense together (checked before anything connects).

    >>> check_selection(None, 0, True)
    Traceback (most recent call last):
    k2k.admin.offsets.OffsetInputError: --partition 0: needs --topic
    """
    if all_topics == (topic is not None):
        raise OffsetInputError("give exactly one of --topic T or --all-topics")
    if partition is not None and topic is None:
        raise OffsetInputError(f"--partition {partition}: needs --topic")


def refuse_alive(cfg: PipelineConfig, alive: Mapping[str, MemberRecord], force: bool) -> None:
    """Raise :class:`MembersAlive` naming the alive members and their hosts, unless
    ``force``."""
    if alive and not force:
        who = ", ".join(f"{name} on {rec.host or '?'}" for name, rec in sorted(alive.items()))
        raise MembersAlive(
            f"members of pipeline {cfg.name} are alive: {who}; stop them first (--force "
            f"only for members that are gone but still look alive, e.g. killed less than "
            f"coordination.assignment.graceWindow ago)"
        )


def _chosen(
    reader: PipelineReader,
    with_progress: set[str],
    topic: str | None,
    partition: int | None,
    all_topics: bool,
) -> list[TP]:
    """The partitions the selection flags name (validated against the source)."""
    name = reader.cfg.name
    if topic is None:
        tps = [(t, p) for t, info in reader.selected().items() for p in range(info.partitions)]
        if not tps:
            raise OffsetInputError(f"--all-topics: pipeline {name} selects no source topic now")
        return tps
    info = reader.source_topics().get(topic)
    if info is None:
        raise OffsetInputError(
            f"--topic {topic!r}: no such topic on the source cluster at {reader.source.bootstrap}"
        )
    if topic not in reader.selected() and topic not in with_progress:
        raise OffsetInputError(
            f"--topic {topic!r}: not a topic of pipeline {name} (not selected by "
            f"replication.source.topic, no progress)"
        )
    if partition is None:
        return [(topic, p) for p in range(info.partitions)]
    if not 0 <= partition < info.partitions:
        raise OffsetInputError(
            f"--partition {partition}: topic {topic!r} has partitions 0..{info.partitions - 1}"
        )
    return [(topic, partition)]


def _resolve(reader: PipelineReader, tps: list[TP], to: Destination) -> dict[TP, int]:
    """The new position of each partition of ``tps``."""
    if to.kind == "timestamp":
        return reader.offsets_for_time(tps, to.value)
    earliest = reader.offsets(tps, "earliest")
    latest = reader.offsets(tps, "latest")
    if to.kind != "offset":
        return earliest if to.kind == "earliest" else latest
    for t, p in tps:
        low, high = earliest[(t, p)], latest[(t, p)]
        if not low <= to.value <= high:
            raise OffsetInputError(
                f"{to.flag} {to.value}: outside the valid range of {t}[{p}], {low}..{high} "
                f"(earliest..latest)"
            )
    return dict.fromkeys(tps, to.value)


# -- writing -------------------------------------------------------------------------------


def apply_plan(cfg: PipelineConfig, plan: OffsetPlan, *, force: bool) -> list[Change]:
    """Write the plan's moving changes as a member would (module docstring); returns them.

    Raises :class:`MembersAlive` if members came alive since the plan (unless ``force``),
    :class:`~k2k.errors.ClusterError` if the claims were lost or the write failed, and
    :class:`JoinedDuringWrite` if a member came alive while it wrote."""
    moving = plan.moving()
    if not moving:
        return []
    commit_partitions, assignment_partitions = _control_topics(cfg)
    assignment = assignment_member(
        cfg, ADMIN_MEMBER, standby=True, partitions=assignment_partitions
    )
    claims: dict[TP, str] = {}
    written = False
    leave = True
    try:
        assignment.catch_up()
        before = _others_alive(assignment)
        refuse_alive(cfg, before, force)
        eos = cfg.features.exactly_once
        txid = transactional_id(cfg.commit_group, ADMIN_MEMBER, 0) if eos else ""
        claims = assignment.acquire({c.tp: txid for c in moving}, lambda: False)
        writer = _ProgressWriter(cfg, commit_partitions, assignment_partitions, claims)
        records = [writer.record(c) for c in moving]
        if eos:
            writer.in_transaction(producer_ids(txid)[0], records)
        else:
            writer.plainly(records)
        written = True
        assignment.catch_up()
        _refuse_joined(cfg.name, before, _others_alive(assignment))
    except StandDown:
        leave = False  # another run of this tool took the name: its records are its own
        raise
    finally:
        if leave:
            # Best effort: a failure here must not hide the one that ended the write, and
            # claims of a member that left are taken over (and fenced) at once anyway.
            with contextlib.suppress(K2KError, KafkaException):
                assignment.leave(claims if written else {})
        assignment.close()
    return moving


def _others_alive(assignment: Assignment) -> dict[str, MemberRecord]:
    return {n: r for n, r in assignment.alive().items() if n != ADMIN_MEMBER}


def _refuse_joined(
    pipeline: str, before: Mapping[str, MemberRecord], now: Mapping[str, MemberRecord]
) -> None:
    """Step 4 of the module docstring: fail naming the members that came alive meanwhile."""
    joined = {n: r for n, r in now.items() if n not in before or r.session != before[n].session}
    if joined:
        who = ", ".join(f"{n} on {r.host or '?'}" for n, r in sorted(joined.items()))
        raise JoinedDuringWrite(
            f"positions written, but members of pipeline {pipeline} started meanwhile and "
            f"may replicate from the old ones: {who}; restart them"
        )


def _control_topics(cfg: PipelineConfig) -> tuple[int, int]:
    """Create or check the commit and assignment topics as the planner does (so positions
    can be set before a pipeline's first start); their partition counts."""
    topics = ensure_control_topics(cfg, ClusterView.of(cfg.target), mappings=False)
    return topics.commit, topics.assignment


class _ProgressWriter:
    """Writes progress records of the commit group as :data:`ADMIN_MEMBER`, after checking
    that the claims it holds are still its own."""

    def __init__(
        self,
        cfg: PipelineConfig,
        commit_partitions: int,
        assignment_partitions: int,
        claims: Mapping[TP, str],
    ) -> None:
        self.cfg = cfg
        self.topic = cfg.coordination.commit.topic
        self.commit_partitions = commit_partitions
        self.assignment_partitions = assignment_partitions
        self.claims = dict(claims)
        self.timeout_s = max(cfg.coordination.commit.sync_timeout.total_seconds(), 10.0)
        self.errors: list[str] = []

    def record(self, change: Change) -> ProgressRecord:
        cfg = self.cfg
        return ProgressRecord(
            cfg.commit_group,
            change.topic,
            change.partition,
            change.after,
            cfg.name,
            now_ms(),
            ADMIN_MEMBER,
            change.topic_id,
        )

    def in_transaction(self, producer_id: str, records: list[ProgressRecord]) -> None:
        """Exactly-once: initialise ``producer_id`` (fencing an earlier run of this tool),
        verify the claims, then write ``records`` in one transaction, aborted on any
        failure or interruption (an outcome that stays unknown is settled by the fence of
        the next owner, see the module docstring)."""
        settings = producer_settings(self.cfg.target_client("producer"), False, exactly_once=True)
        producer = build_producer({**settings, "transactional.id": producer_id})
        begun = False
        try:
            producer.list_topics(self.topic, timeout=self.timeout_s)
            producer.init_transactions(self.timeout_s)
            self.verify_claims()
            producer.begin_transaction()
            begun = True
            self._produce(producer, records)
            self._commit(producer)
        except BaseException as exc:
            if begun:  # a failed abort is logged; the claims stay (module docstring, 5)
                abort_transaction(producer, self.timeout_s, producer_id)
            if isinstance(exc, KafkaException):
                raise self._failed(exc) from None
            raise

    def _commit(self, producer: Producer) -> None:
        """Commit, trying again while the error is retriable (e.g. a timeout) within
        ``timeout_s``: a retried commit completes the same transaction."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                producer.commit_transaction(max(0.1, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                err = kafka_error_of(exc)
                if err is None or not err.retriable() or time.monotonic() >= deadline:
                    raise

    def plainly(self, records: list[ProgressRecord]) -> None:
        """At-least-once: verify the claims, then write ``records`` durably and check that
        every one was acknowledged."""
        self.verify_claims()
        settings = producer_settings(self.cfg.target_client("producer"), False)
        producer = ready(build_producer({**settings, "linger.ms": "0"}), self.topic)
        try:
            self._produce(producer, records)
            left = producer.flush(self.timeout_s)
        except KafkaException as exc:
            raise self._failed(exc) from None
        if left or self.errors:
            why = self.errors[0] if self.errors else f"not acknowledged in {self.timeout_s:g} s"
            raise ClusterError(
                f"could not write progress to {self.topic}: {why}; some positions may be "
                "written: check with k2k offsets describe"
            )

    def verify_claims(self) -> None:
        """Step 5 of the assignment protocol: stop if another member claimed a partition
        since (it owns it now)."""
        cfg = self.cfg
        lost = lost_claims(
            cfg.control_consumer(),
            cfg.coordination.assignment.topic,
            self.assignment_partitions,
            cfg.commit_group,
            self.claims,
            sync_timeout_s=cfg.coordination.commit.sync_timeout.total_seconds(),
            on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
        )
        if lost:
            taken = ", ".join(f"{t}[{p}] by {m}" for (t, p), m in sorted(lost.items()))
            raise ClusterError(
                f"partitions claimed by another member meanwhile ({taken}); nothing written"
            )

    def _produce(self, producer: Producer, records: list[ProgressRecord]) -> None:
        for rec in records:
            key, value = rec.encode()
            produce_when_room(
                producer, self.topic, value, key, self._partition(key), self._on_delivery
            )

    def _partition(self, key: bytes) -> int:
        return murmur2_partition(key, self.commit_partitions)

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.errors.append(describe_error(err))

    def _failed(self, exc: KafkaException) -> ClusterError:
        err = kafka_error_of(exc)
        return ClusterError(
            f"could not write progress to {self.topic}: {describe_error(err) if err else exc}; "
            "check with k2k offsets describe what was committed"
        )
