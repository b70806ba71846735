"""``k2k status``: who is in the pipeline's commit group, who owns which partition, how far
each partition is committed, how far behind it is, and how many foreign records its target
partition holds (from its progress record).

Runs on: the operator's machine, whether or not the pipeline runs; reads through
:class:`~k2k.admin.reader.PipelineReader`, so it writes nothing to either cluster. The
field meanings of :meth:`PipelineStatus.to_json` are documented in docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from k2k.admin.reader import (
    AssignmentState,
    MemberState,
    PipelineReader,
    now_ms,
)
from k2k.admin.table import ago, iso, table
from k2k.config import PipelineConfig
from k2k.formats import CutoverRecord, ProgressRecord
from k2k.kafka import TP

__all__ = ["PartitionStatus", "PipelineStatus", "read_status"]


#: Members not alive whose last heartbeat is older than this are counted, not listed: the
#: assignment topic keeps every member name a pipeline ever had.
GONE_AFTER_MS = 24 * 3600 * 1000

#: ``problem`` of a partition whose position the source cannot serve, and what it means.
PROBLEMS = {
    "below-earliest": "committed position below the source's earliest offset: retention "
    "deleted records never replicated",
    "past-end": "committed position past the source's end: the topic was recreated or "
    "truncated since",
    "recreated": "committed position belongs to a topic of this name that was deleted: the "
    "next start replicates the new topic from its earliest offset",
}


@dataclass(frozen=True, slots=True)
class Lag:
    """How far one partition is behind: where replication continues, the source's end and
    earliest offsets, and the distance (None where the partition is not on the source)."""

    position: int | None
    earliest: int | None
    end: int | None
    records: int | None
    seconds: float | None
    #: The committed progress carries another topic id than the source topic's now.
    recreated: bool = False

    @property
    def problem(self) -> str | None:
        """A key of :data:`PROBLEMS` when the source cannot serve the position, else None."""
        if self.recreated:
            return "recreated"
        if self.position is None or self.earliest is None or self.end is None:
            return None
        if self.position < self.earliest:
            return "below-earliest"
        return "past-end" if self.position > self.end else None


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """One source partition: its newest claim, its committed progress and its lag."""

    topic: str
    partition: int
    selected: bool
    owner: Mapping[str, Any] | None
    progress: ProgressRecord | None
    lag: Lag
    #: ``offsets: identical``: the pipeline keeps source offsets on the target.
    identical: bool = False

    @property
    def offsets(self) -> str:
        """``assigned``, ``identical``, or ``mapped`` (identical offsets that ended: the
        partition goes on through offset mappings from ``mappedFrom``)."""
        if not self.identical:
            return "assigned"
        mapped = self.progress is not None and self.progress.mapped_from is not None
        return "mapped" if mapped else "identical"

    def to_json(self) -> dict[str, Any]:
        rec, lag = self.progress, self.lag
        return {
            "topic": self.topic,
            "partition": self.partition,
            "selected": self.selected,
            "owner": dict(self.owner) if self.owner else None,
            "committed": rec.offset if rec else None,
            "committedAt": rec.committed_at_ms if rec else None,
            "committedBy": (rec.owner or None) if rec else None,
            "position": lag.position,
            "earliest": lag.earliest,
            "end": lag.end,
            "recordsBehind": lag.records,
            "lagSeconds": lag.seconds,
            "problem": lag.problem,
            "foreignRecords": rec.foreign if rec else 0,
            "offsets": self.offsets,
            "mappedFrom": rec.mapped_from if rec else None,
        }


@dataclass(frozen=True)
class PipelineStatus:
    """Everything ``k2k status`` shows, at ``observed_at_ms`` on the observer's clock."""

    pipeline: str
    commit_group: str
    exactly_once: bool
    grace_ms: int
    observed_at_ms: int
    members: list[MemberState]
    partitions: list[PartitionStatus]
    #: The commit group's cut-over record (``k2k cutover``), None when it was never cut over.
    cutover: CutoverRecord | None = None

    def totals(self) -> dict[str, Any]:
        """Sums over the partitions; ``maxLagSeconds`` is None when a partition behind has
        no known lag in seconds (a maximum of the others would understate it)."""
        behind = [p.lag for p in self.partitions if p.lag.records]
        unknown = any(lag.seconds is None for lag in behind)
        return {
            "partitions": len(self.partitions),
            "recordsBehind": sum(p.lag.records or 0 for p in self.partitions),
            "maxLagSeconds": None
            if unknown
            else max((g.seconds or 0.0 for g in behind), default=0.0),
            "membersAlive": sum(1 for m in self.members if m.state == "alive"),
            "problems": sum(1 for p in self.partitions if p.lag.problem),
            "foreignRecords": sum(p.progress.foreign for p in self.partitions if p.progress),
        }

    def shown_members(self) -> list[MemberState]:
        """The members worth listing: alive ones, and the others heard of within
        :data:`GONE_AFTER_MS`."""
        since = self.observed_at_ms - GONE_AFTER_MS
        return [m for m in self.members if m.state == "alive" or m.timestamp_ms >= since]

    def to_json(self) -> dict[str, Any]:
        """One JSON document for scripts (fields: docs/operations.md#k2k-status)."""
        shown = self.shown_members()
        return {
            "pipeline": self.pipeline,
            "commitGroup": self.commit_group,
            "exactlyOnce": self.exactly_once,
            "graceWindowMs": self.grace_ms,
            "observedAt": self.observed_at_ms,
            "members": [self._member_json(m) for m in shown],
            "membersNotShown": len(self.members) - len(shown),
            "partitions": [p.to_json() for p in self.partitions],
            "totals": self.totals(),
            "cutover": _cutover_json(self.cutover),
        }

    def _member_json(self, m: MemberState) -> dict[str, Any]:
        return {
            "member": m.record.member,
            "state": m.state,
            "standby": m.record.standby,
            "host": m.record.host,
            "session": m.record.session,
            "lastHeartbeat": m.timestamp_ms,
            "ageSeconds": round(max(0, self.observed_at_ms - m.timestamp_ms) / 1000, 3),
        }

    def render(self) -> str:
        """The compact human view: a header line, the members, the partitions, the totals."""
        mode = "exactly-once" if self.exactly_once else "at-least-once"
        lines = [
            f"pipeline {self.pipeline} (commit group {self.commit_group}, {mode}, "
            f"graceWindow {self.grace_ms / 1000:g} s)",
            "",
        ]
        members = [
            [
                m.record.member,
                m.state,
                "yes" if m.record.standby else "no",
                m.record.host,
                ago(self.observed_at_ms - m.timestamp_ms),
            ]
            for m in self.shown_members()
        ]
        lines += _cutover_lines(self.cutover)
        lines += table(["MEMBER", "STATE", "STANDBY", "HOST", "LAST HEARTBEAT"], members)
        hidden = len(self.members) - len(members)
        if hidden:
            lines.append(f"({hidden} members gone for more than a day not shown)")
        lines += ["", *table(_PARTITION_HEADERS, [_partition_row(p) for p in self.partitions])]
        lines += _problem_lines(self.partitions)
        t = self.totals()
        lag = "unknown" if t["maxLagSeconds"] is None else f"{t['maxLagSeconds']:.1f} s"
        lines += [
            "",
            f"total: {t['partitions']} partitions, {t['recordsBehind']} records behind, "
            f"max lag {lag}, {t['membersAlive']} members alive",
        ]
        return "\n".join(lines)


def _cutover_json(rec: CutoverRecord | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    return {
        "steps": list(rec.steps),
        "startedAt": rec.started_at_ms,
        "updatedAt": rec.updated_at_ms,
        "host": rec.host,
    }


def _cutover_lines(rec: CutoverRecord | None) -> list[str]:
    """One line under the header once ``k2k cutover`` began: the steps done, when, where.

    >>> rec = CutoverRecord("g", "p", ("cut", "drain"), {}, {}, (), (), 1700000000000,
    ...                     1700000002000, "host-a")
    >>> _cutover_lines(rec)
    ['cut over: cut, drain (started 2023-11-14T22:13:20.000Z by host-a)', '']
    """
    if rec is None:
        return []
    steps = ", ".join(rec.steps) or "nothing yet"
    return [f"cut over: {steps} (started {iso(rec.started_at_ms)} by {rec.host or 'unknown'})", ""]


def _problem_lines(partitions: list[PartitionStatus]) -> list[str]:
    """One note per partition marked ``!`` in the table."""
    out = []
    for p in partitions:
        lag = p.lag
        if lag.problem:
            out.append(
                f"! {p.topic}[{p.partition}]: {PROBLEMS[lag.problem]} (position "
                f"{lag.position}, source {lag.earliest}..{lag.end}); move it with "
                "k2k offsets set"
            )
        if p.progress and p.progress.mapped_from is not None and p.identical:
            out.append(
                f"! {p.topic}[{p.partition}]: offsets not identical from source offset "
                f"{p.progress.mapped_from} on (errorHandling.onOffsetGap: map): offset "
                "mappings translate them (docs/offset-mapping.md#identical-offsets)"
            )
        if p.progress and p.progress.foreign:
            out.append(
                f"! {p.topic}[{p.partition}]: {p.progress.foreign} records on its target "
                "partition were not written by this pipeline (another producer writes to a "
                "replicated topic; docs/operations.md#foreign-writes-on-the-target)"
            )
    return ["", *out] if out else []


_PARTITION_HEADERS = [
    "TOPIC", "PARTITION", "OWNER", "COMMITTED", "END", "BEHIND", "LAG", "FOREIGN"
]  # fmt: skip


def _partition_row(p: PartitionStatus) -> list[str]:
    owner = "-"
    if p.owner:
        owner = str(p.owner["member"]) + (" (released)" if p.owner["released"] else "")
    lag = p.lag
    return [
        p.topic if p.selected else f"{p.topic} (not selected)",
        str(p.partition),
        owner,
        (str(p.progress.offset) if p.progress else "-") + (" !" if lag.problem else ""),
        "-" if lag.end is None else str(lag.end),
        "-" if lag.records is None else str(lag.records),
        "-" if lag.seconds is None else f"{lag.seconds:.1f} s",
        str(p.progress.foreign) + " !" if p.progress and p.progress.foreign else "0",
    ]


def read_status(cfg: PipelineConfig, clock: Callable[[], int] = now_ms) -> PipelineStatus:
    """Read the pipeline's status now (``clock``: the observer's wall clock in ms)."""
    reader = PipelineReader(cfg)
    progress = reader.progress()
    assignment = reader.assignment()
    at_ms = assignment.observer_now(clock())
    tps = reader.partitions(progress)
    lags = _lags(reader, tps, progress, at_ms)
    selected = reader.selected()
    identical = cfg.replication.sink.offsets.identical
    partitions = [
        PartitionStatus(
            t,
            p,
            t in selected,
            _owner(assignment, (t, p)),
            progress.get((t, p)),
            lags[(t, p)],
            identical,
        )
        for t, p in tps
    ]
    return PipelineStatus(
        cfg.name,
        cfg.commit_group,
        cfg.features.exactly_once,
        assignment.view.grace_ms,
        at_ms,
        assignment.members(at_ms),
        partitions,
        assignment.view.cutover,
    )


def _owner(assignment: AssignmentState, tp: TP) -> dict[str, Any] | None:
    found = assignment.owner(tp)
    if found is None:
        return None
    rec, released = found
    return {
        "member": rec.member,
        "transactionalId": rec.transactional_id or None,
        "claimedAt": rec.at_ms,
        "released": released,
    }


def _lags(
    reader: PipelineReader, tps: list[TP], progress: Mapping[TP, ProgressRecord], at_ms: int
) -> dict[TP, Lag]:
    """Each partition's lag: records between its position and the source's end, and the
    age of the first readable record at or after the position."""
    earliest = reader.offsets(tps, "earliest")
    ends = reader.offsets(tps, "latest")
    starts = earliest if reader.cfg.start_offset_kind() == "earliest" else ends
    recreated = _recreated(reader, progress, ends)
    positions = {tp: progress[tp].offset if tp in progress else starts[tp] for tp in ends}
    positions.update({tp: earliest[tp] for tp in recreated})  # as the runners restart them
    behind = {tp: pos for tp, pos in positions.items() if pos < ends[tp]}
    firsts = reader.first_timestamps({tp: max(pos, earliest[tp]) for tp, pos in behind.items()})
    out: dict[TP, Lag] = {}
    for tp in tps:
        if tp not in ends:
            pos = progress[tp].offset if tp in progress else None
            out[tp] = Lag(pos, None, None, None, None)
            continue
        pos, low, end = positions[tp], earliest[tp], ends[tp]
        records, seconds = _distance(max(pos, low), end, firsts, tp, at_ms)
        out[tp] = Lag(pos, low, end, records, seconds, tp in recreated)
    return out


def _recreated(
    reader: PipelineReader, progress: Mapping[TP, ProgressRecord], on_source: Iterable[TP]
) -> set[TP]:
    """The partitions whose progress names another topic id than the source topic has now
    (progress without an id, from older writers, is taken as the current topic's)."""
    with_id = [tp for tp in on_source if tp in progress and progress[tp].topic_id]
    ids = reader.source.topic_ids({t for t, _ in with_id})
    return {tp for tp in with_id if ids.get(tp[0], "") not in ("", progress[tp].topic_id)}


def _distance(
    position: int, end: int, firsts: Mapping[TP, int | None], tp: TP, at_ms: int
) -> tuple[int, float | None]:
    """Records behind (an upper bound on transactional topics: markers and aborted records
    occupy offsets too) and lag in seconds (None when the first record was not read)."""
    if position >= end:
        return 0, 0.0
    if tp not in firsts:
        return end - position, None
    first = firsts[tp]
    if first is None:
        return 0, 0.0  # only markers or aborted records left: nothing to replicate
    return end - position, round(max(0, at_ms - first) / 1000, 3)
