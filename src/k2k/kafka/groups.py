"""Consumer groups through the admin API: list them, read and write committed offsets.

The admin protocol takes one group per offsets request, so requests for many groups are
sent together and their futures collected afterwards (a pass over many groups costs about
one round trip, not one per group); descriptions take many groups per request, in chunks.
A group whose coordinator is loading or moving is asked again within the timeout
(:func:`k2k.kafka.bulk.ask`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription

from k2k.errors import ClusterError
from k2k.kafka import TP
from k2k.kafka.bulk import ask
from k2k.kafka.faults import describe, kafka_error_of

__all__ = [
    "Committed",
    "GroupError",
    "alter_offsets",
    "committed_offsets",
    "group_states",
    "list_groups",
]

#: A committed offset and its metadata string.
Committed = tuple[int, str]
_IDLE = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN}
#: Groups per describe request.
GROUPS_PER_REQUEST = 200


class GroupError(ClusterError):
    """An offsets request for one group failed (the others may have succeeded)."""

    def __init__(self, group: str, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.group = group
        self.code = code


def _why(exc: BaseException) -> tuple[str, int | None]:
    err = kafka_error_of(exc) if isinstance(exc, KafkaException) else None
    if err is None:
        return str(exc), None
    return describe(err), err.code()


def list_groups(admin: AdminClient, timeout_s: float) -> list[str]:
    """Every consumer group the cluster knows (raises ClusterError)."""
    try:
        result = admin.list_consumer_groups(request_timeout=timeout_s).result()
    except KafkaException as exc:
        raise ClusterError(f"listing consumer groups: {_why(exc)[0]}") from None
    return sorted(g.group_id for g in result.valid)


def committed_offsets(
    admin: AdminClient, groups: Iterable[str], timeout_s: float
) -> tuple[dict[str, dict[TP, Committed]], list[GroupError]]:
    """Each group's committed offsets (only partitions with an offset), and one error per
    group whose request failed."""

    def send(chunk: list[str], request_s: float) -> dict[str, Future[Any]]:
        return {
            g: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g)], request_timeout=request_s
            )[g]
            for g in chunk
        }

    got = ask(
        groups, send, chunk=GROUPS_PER_REQUEST, timeout_s=timeout_s, doing="reading group offsets"
    )
    errors = [
        GroupError(g, f"reading offsets of group {g!r}: {describe(err)}", err.code())
        for g, err in sorted(got.errors.items())
    ]
    out = {
        group: {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in result.topic_partitions or []
            if tp.error is None and tp.offset >= 0
        }
        for group, result in got.values.items()
    }
    return out, errors


@dataclass(frozen=True, slots=True)
class GroupState:
    state: str
    members: int
    #: The topics assigned to its members now.
    topics: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        """True while the group has members (committing would fight them, and the broker
        refuses an admin commit to a group that is not empty)."""
        return self.members > 0


def group_states(
    admin: AdminClient, groups: Iterable[str], timeout_s: float
) -> dict[str, GroupState]:
    """State and member count per group; a group the cluster does not know is DEAD."""

    def send(chunk: list[str], request_s: float) -> dict[str, Future[Any]]:
        return admin.describe_consumer_groups(chunk, request_timeout=request_s)

    got = ask(
        groups, send, chunk=GROUPS_PER_REQUEST, timeout_s=timeout_s, doing="describing groups"
    )
    if got.errors:
        group = min(got.errors)
        err = got.errors[group]
        raise GroupError(group, f"describing group {group!r}: {describe(err)}", err.code())
    return {group: _state(desc) for group, desc in got.values.items()}


def _state(desc: ConsumerGroupDescription) -> GroupState:
    members = len(desc.members or [])
    if desc.state not in _IDLE:
        members = max(members, 1)
    topics = frozenset(
        tp.topic
        for m in desc.members or []
        if m.assignment is not None
        for tp in m.assignment.topic_partitions or []
    )
    return GroupState(desc.state.name, members, topics)


def alter_offsets(
    admin: AdminClient, commits: Mapping[str, Mapping[TP, Committed]], timeout_s: float
) -> list[GroupError]:
    """Commit offsets (with metadata) to each group; one error per group that failed."""

    def send(chunk: list[str], request_s: float) -> dict[str, Future[Any]]:
        return {group: _alter(admin, group, commits[group], request_s) for group in chunk}

    wanted = [group for group, offsets in commits.items() if offsets]
    got = ask(
        wanted,
        send,
        chunk=GROUPS_PER_REQUEST,
        timeout_s=timeout_s,
        doing="committing group offsets",
    )
    errors = [
        GroupError(g, f"committing offsets of group {g!r}: {describe(err)}", err.code())
        for g, err in sorted(got.errors.items())
    ]
    for group, result in sorted(got.values.items()):
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            tp = failed[0]
            err = tp.error
            errors.append(
                GroupError(
                    group,
                    f"committing offsets of group {group!r} ({tp.topic}[{tp.partition}]): "
                    f"{describe(err) if err is not None else '?'}",
                    err.code() if err is not None else None,
                )
            )
    return errors


def _alter(
    admin: AdminClient, group: str, offsets: Mapping[TP, Committed], request_s: float
) -> Future[Any]:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p, o, metadata) for (t, p), (o, metadata) in offsets.items()]
    )
    return admin.alter_consumer_group_offsets([request], request_timeout=request_s)[group]
