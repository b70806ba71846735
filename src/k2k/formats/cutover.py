"""The cut-over record: where ``k2k cutover`` cut a pipeline, and what it did since.

One record per commit group in the assignment topic (key kind ``cutover``; compaction keeps
the newest). ``k2k cutover`` rewrites it after every step it finished, so a second run
resumes from the last step done; running members read it like their other assignment
records and stop once it says the pipeline is drained (:attr:`CutoverRecord.drained`).
``k2k failover`` writes the same record with ``mode`` ``failover``: its cut is the committed
progress (the source is gone), ``recovery`` says what was not replicated, and it is
"drained" at once, so members stop.

Steps, in order (:data:`STEPS`): ``cut`` (the source end offsets stood still, ``cut`` holds
them), ``drain`` (committed progress reached the cut everywhere), ``stop`` (every member
stopped and the command holds every claim; ``targetEnds`` holds the end offsets then of every
partition of the target topics the cut's topics go to: the fork point of a reverse run),
``groups`` (the groups were translated and committed; ``positions`` and ``counts`` are the
report). ``docs/formats.md`` describes the fields for other tools.

>>> rec = CutoverRecord("orders-dr", "orders-dr", ("cut",), {("orders", 0): 42}, {}, (), (),
...                     1700000000000, 1700000001000, "host-a")
>>> rec
CutoverRecord(orders-dr: cutover cut at 1700000000000, 1 partitions)
>>> key, value = rec.encode()
>>> key
b'{"group":"orders-dr","k":1,"kind":"cutover"}'
>>> CutoverRecord.decode(key, value, "__k2k_assignment[0]@9") == rec
True
>>> rec.drained, rec.with_step("drain", 1700000002000).drained
(False, True)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from k2k.formats.assignment_base import AssignmentFormat

__all__ = [
    "CONFIDENCE",
    "STEPS",
    "CutoverRecord",
    "GroupPosition",
    "PartitionCount",
    "RecoveryPoint",
]

#: The steps of a cut-over, in the order they are done.
STEPS = ("cut", "drain", "stop", "groups")

#: How sure a translated position is: the classes of the offset-confidence report.
CONFIDENCE = ("exact", "lower-bound", "before-oldest-mapping", "no-position")

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class GroupPosition:
    """Where one consumer group stands on one replicated source partition, and where it
    continues on the target."""

    group: str
    topic: str
    partition: int
    #: The group's committed offset on the source (None: it has none there).
    source: int | None
    #: The target partition and offset it continues at (None when not translated).
    target_topic: str | None
    target_partition: int | None
    target: int | None
    #: One of :data:`CONFIDENCE`.
    confidence: str
    #: For a lower bound: at most this many records are read again (None: not known).
    reread: int | None = None

    def row(self) -> list[Any]:
        return [
            self.group,
            self.topic,
            self.partition,
            self.source,
            self.target_topic,
            self.target_partition,
            self.target,
            self.confidence,
            self.reread,
        ]

    @classmethod
    def of_row(cls, row: list[Any]) -> GroupPosition:
        g, t, p, src, tt, tp, tgt, conf, reread = row
        return cls(
            str(g),
            str(t),
            int(p),
            _opt(src),
            None if tt is None else str(tt),
            _opt(tp),
            _opt(tgt),
            str(conf),
            _opt(reread),
        )


@dataclass(frozen=True, slots=True)
class PartitionCount:
    """Records inside the replicated range of one source partition, on each side."""

    topic: str
    partition: int
    #: Source offsets ``[start, cut)`` and target offsets ``[target_start, target_end)``.
    start: int
    cut: int
    target_topic: str
    target_partition: int
    target_start: int
    target_end: int
    source_records: int
    target_records: int

    def row(self) -> list[Any]:
        return [
            self.topic,
            self.partition,
            self.start,
            self.cut,
            self.target_topic,
            self.target_partition,
            self.target_start,
            self.target_end,
            self.source_records,
            self.target_records,
        ]

    @classmethod
    def of_row(cls, row: list[Any]) -> PartitionCount:
        t, p, start, cut, tt, tp, ts, te, sr, tr = row
        return cls(
            str(t),
            int(p),
            int(start),
            int(cut),
            str(tt),
            int(tp),
            int(ts),
            int(te),
            int(sr),
            int(tr),
        )


@dataclass(frozen=True, slots=True)
class RecoveryPoint:
    """Failover: what k2k knew of one source partition when the source was lost."""

    topic: str
    partition: int
    #: The committed progress (the next source offset to copy).
    committed: int
    #: The newest source end offset k2k observed (None: not known).
    source_end: int | None
    #: When the progress was committed (ms since the epoch).
    committed_at_ms: int

    @property
    def not_replicated(self) -> int | None:
        """Source offsets known to hold records not copied (markers included)."""
        return None if self.source_end is None else max(0, self.source_end - self.committed)

    def row(self) -> list[Any]:
        return [self.topic, self.partition, self.committed, self.source_end, self.committed_at_ms]

    @classmethod
    def of_row(cls, row: list[Any]) -> RecoveryPoint:
        t, p, committed, end, at = row
        return cls(str(t), int(p), int(committed), _opt(end), int(at))


@dataclass(frozen=True, slots=True)
class CutoverRecord(AssignmentFormat):
    """See the module doc."""

    KIND: ClassVar[str] = "cutover"
    VERSION: ClassVar[int] = 1

    group: str
    pipeline: str
    #: The steps done, in :data:`STEPS` order.
    steps: tuple[str, ...]
    #: Source partition -> its end offset at the cut (the next offset k2k would copy).
    cut: dict[TP, int]
    #: Target partition -> its end offset once every member stopped (the fork point).
    target_ends: dict[TP, int]
    positions: tuple[GroupPosition, ...]
    counts: tuple[PartitionCount, ...]
    started_at_ms: int
    updated_at_ms: int
    host: str
    #: ``cutover`` or ``failover`` (records without the field are cut-overs).
    mode: str = "cutover"
    recovery: tuple[RecoveryPoint, ...] = ()

    @property
    def drained(self) -> bool:
        """Every partition is committed up to the cut: members stop."""
        return "drain" in self.steps

    @property
    def done(self) -> bool:
        return self.steps == STEPS

    def with_step(self, step: str, at_ms: int, **changes: Any) -> CutoverRecord:
        """This record with ``step`` done (and the fields in ``changes``)."""
        steps = tuple(s for s in STEPS if s in self.steps or s == step)
        return dataclasses.replace(self, steps=steps, updated_at_ms=at_ms, **changes)

    def encode(self) -> tuple[bytes, bytes]:
        return self._key(self.group), self._value(
            pipeline=self.pipeline,
            steps=list(self.steps),
            cut=_rows(self.cut),
            targetEnds=_rows(self.target_ends),
            positions=[p.row() for p in self.positions],
            counts=[c.row() for c in self.counts],
            startedAt=self.started_at_ms,
            updatedAt=self.updated_at_ms,
            host=self.host,
            mode=self.mode,
            recovery=[r.row() for r in self.recovery],
        )

    @classmethod
    def _from_fields(cls, key: dict[str, Any], value: dict[str, Any]) -> Self:
        steps = tuple(str(s) for s in value["steps"])
        if any(s not in STEPS for s in steps):
            raise ValueError(f"unknown step in {steps}")
        return cls(
            str(key["group"]),
            str(value["pipeline"]),
            steps,
            _of_rows(value["cut"]),
            _of_rows(value["targetEnds"]),
            tuple(GroupPosition.of_row(r) for r in value["positions"]),
            tuple(PartitionCount.of_row(r) for r in value["counts"]),
            int(value["startedAt"]),
            int(value["updatedAt"]),
            str(value.get("host", "")),
            str(value.get("mode", "cutover")),
            tuple(RecoveryPoint.of_row(r) for r in value.get("recovery", [])),
        )

    def __repr__(self) -> str:
        return (
            f"CutoverRecord({self.group}: {self.mode} {'/'.join(self.steps) or 'nothing'} at "
            f"{self.started_at_ms}, {len(self.cut)} partitions)"
        )


def _rows(offsets: dict[TP, int]) -> list[list[Any]]:
    return [[t, p, o] for (t, p), o in sorted(offsets.items())]


def _of_rows(rows: list[list[Any]]) -> dict[TP, int]:
    return {(str(t), int(p)): int(o) for t, p, o in rows}


def _opt(v: Any) -> int | None:
    return None if v is None else int(v)
