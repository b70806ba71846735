"""The cut-over report: per group and partition where it continues on the target and how
sure that is; per partition the cut and the records on each side (or, before a cut-over,
what is left to copy)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from k2k.admin.table import iso, table
from k2k.formats.cutover import CutoverRecord, GroupPosition, PartitionCount
from k2k.kafka import TP

__all__ = ["CutoverReport", "PartitionLeft"]


@dataclass(frozen=True, slots=True)
class PartitionLeft:
    """Before a cut-over: where one source partition stands now."""

    topic: str
    partition: int
    end: int
    committed: int | None
    #: Committed records between the committed progress and the end (None: not counted).
    to_copy: int | None


@dataclass(slots=True)
class CutoverReport:
    pipeline: str
    #: The cut-over record (None for a dry run).
    record: CutoverRecord | None
    positions: list[GroupPosition]
    counts: list[PartitionCount] = field(default_factory=list)
    left: list[PartitionLeft] = field(default_factory=list)
    dry_run: bool = False
    #: True when an earlier run had finished the cut-over: nothing was done now.
    already: bool = False
    #: The Offset Mapping app's pass line (the groups step).
    groups_pass: str = ""

    @classmethod
    def of_record(cls, record: CutoverRecord, already: bool) -> CutoverReport:
        return cls(
            record.pipeline, record, list(record.positions), list(record.counts), already=already
        )

    def inexact(self, allow_lower_bounds: bool) -> list[GroupPosition]:
        """The positions that keep the exit code from 0."""
        ok = {"exact", "lower-bound"} if allow_lower_bounds else {"exact"}
        return [p for p in self.positions if p.confidence not in ok]

    def mismatched(self) -> list[PartitionCount]:
        return [c for c in self.counts if c.source_records != c.target_records]

    def headline(self) -> str:
        if self.dry_run:
            return f"pipeline {self.pipeline}: offset-confidence report (dry run, nothing written)"
        rec = self.record
        assert rec is not None
        when = iso(rec.updated_at_ms)
        if self.already:
            return f"pipeline {self.pipeline}: already cut over at {when} (by {rec.host})"
        return f"pipeline {self.pipeline}: cut over at {when}"

    def render(self) -> str:
        lines = [self.headline()]
        if self.groups_pass:
            lines.append(f"groups: {self.groups_pass}")
        lines += ["", _positions_table(self.positions)]
        if self.counts:
            lines += ["", _counts_table(self.counts)]
        if self.left:
            lines += ["", _left_table(self.left)]
        by_class: dict[str, int] = {}
        for p in self.positions:
            by_class[p.confidence] = by_class.get(p.confidence, 0) + 1
        summary = ", ".join(f"{n} {c}" for c, n in sorted(by_class.items())) or "no group"
        lines += ["", f"positions: {summary}"]
        if self.mismatched():
            lines.append(f"record counts differ on {len(self.mismatched())} partitions")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        rec = self.record
        out: dict[str, Any] = {
            "pipeline": self.pipeline,
            "dryRun": self.dry_run,
            "alreadyCutOver": self.already,
            "positions": [_position_json(p) for p in self.positions],
        }
        if rec is not None:
            out["cutover"] = {
                "steps": list(rec.steps),
                "startedAt": rec.started_at_ms,
                "updatedAt": rec.updated_at_ms,
                "host": rec.host,
                "cut": _tp_rows(rec.cut),
                "targetEnds": _tp_rows(rec.target_ends),
            }
        if self.counts:
            out["counts"] = [_count_json(c) for c in self.counts]
        if self.left:
            out["partitions"] = [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "end": p.end,
                    "committed": p.committed,
                    "toCopy": p.to_copy,
                }
                for p in self.left
            ]
        if self.groups_pass:
            out["groupsPass"] = self.groups_pass
        return out


def _tp_rows(offsets: dict[TP, int]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())]


def _confidence_text(p: GroupPosition) -> str:
    if p.confidence == "lower-bound":
        n = "?" if p.reread is None else str(p.reread)
        return f"lower bound (at most {n} re-read)"
    return {"before-oldest-mapping": "before the oldest mapping", "no-position": "no position"}.get(
        p.confidence, p.confidence
    )


def _opt(v: object) -> str:
    return "-" if v is None else str(v)


def _positions_table(positions: list[GroupPosition]) -> str:
    rows = [
        [
            p.group,
            f"{p.topic}[{p.partition}]",
            _opt(p.source),
            "-" if p.target_topic is None else f"{p.target_topic}[{p.target_partition}]",
            _opt(p.target),
            _confidence_text(p),
        ]
        for p in positions
    ]
    header = ["GROUP", "SOURCE", "SOURCE OFFSET", "TARGET", "TARGET OFFSET", "CONFIDENCE"]
    return "\n".join(table(header, rows)) if rows else "no selected group has a position"


def _counts_table(counts: list[PartitionCount]) -> str:
    rows = [
        [
            f"{c.topic}[{c.partition}]",
            f"{c.start}..{c.cut}",
            str(c.source_records),
            f"{c.target_topic}[{c.target_partition}]",
            f"{c.target_start}..{c.target_end}",
            str(c.target_records),
            "ok" if c.source_records == c.target_records else "DIFFERS",
        ]
        for c in counts
    ]
    header = ["SOURCE", "RANGE", "RECORDS", "TARGET", "RANGE", "RECORDS", ""]
    return "\n".join(table(header, rows))


def _left_table(left: list[PartitionLeft]) -> str:
    rows = [
        [f"{p.topic}[{p.partition}]", str(p.end), _opt(p.committed), _opt(p.to_copy)] for p in left
    ]
    return "\n".join(table(["SOURCE", "END", "COMMITTED", "TO COPY"], rows))


def _position_json(p: GroupPosition) -> dict[str, Any]:
    return {
        "group": p.group,
        "topic": p.topic,
        "partition": p.partition,
        "sourceOffset": p.source,
        "targetTopic": p.target_topic,
        "targetPartition": p.target_partition,
        "targetOffset": p.target,
        "confidence": p.confidence,
        "reread": p.reread,
    }


def _count_json(c: PartitionCount) -> dict[str, Any]:
    return {
        "topic": c.topic,
        "partition": c.partition,
        "sourceRange": [c.start, c.cut],
        "sourceRecords": c.source_records,
        "targetTopic": c.target_topic,
        "targetPartition": c.target_partition,
        "targetRange": [c.target_start, c.target_end],
        "targetRecords": c.target_records,
    }
