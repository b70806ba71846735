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
    #: Lines worth the operator's eye (failover: groups not moved and why).
    notes: list[str] = field(default_factory=list)

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
        done = "failed over" if rec.mode == "failover" else "cut over"
        if self.already:
            return f"pipeline {self.pipeline}: already {done} at {when} (by {rec.host})"
        return f"pipeline {self.pipeline}: {done} at {when}"

    def render(self) -> str:
        lines = [self.headline()]
        if self.groups_pass:
            lines.append(f"groups: {self.groups_pass}")
        lines += self.notes
        if self.record is not None and self.record.recovery:
            lines += ["", *_recovery_lines(self.record)]
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
        if self.notes:
            out["notes"] = self.notes
        if rec is not None and rec.recovery:
            out["recovery"] = _recovery_json(rec)
        return out


def _recovery_lines(rec: CutoverRecord) -> list[str]:
    rows = [
        [
            f"{r.topic}[{r.partition}]",
            str(r.committed),
            _opt(r.source_end),
            _opt(r.not_replicated),
            f"{max(0, rec.started_at_ms - r.committed_at_ms) / 1000:.1f} s",
        ]
        for r in rec.recovery
    ]
    header = ["SOURCE", "COMMITTED", "LAST SEEN END", "NOT REPLICATED", "LAST COMMIT BEFORE"]
    total = _recovery_json(rec)["total"]
    known = "unknown" if total["notReplicated"] is None else str(total["notReplicated"])
    return [
        "\n".join(table(header, rows)),
        f"recovery point: {known} source offsets known not replicated; partitions behind "
        f"committed last up to {total['seconds']:.1f} s before the failover (records the "
        "source took after that are not known to k2k)",
    ]


def _recovery_json(rec: CutoverRecord) -> dict[str, Any]:
    points = list(rec.recovery)
    missing = [r.not_replicated for r in points]
    # A partition caught up at its last commit lost nothing k2k knew of, however old it is.
    ages = [
        max(0, rec.started_at_ms - r.committed_at_ms) / 1000
        for r in points
        if r.not_replicated != 0
    ]
    return {
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "committed": r.committed,
                "lastSeenEnd": r.source_end,
                "notReplicated": r.not_replicated,
                "committedAt": r.committed_at_ms,
            }
            for r in points
        ],
        "total": {
            "notReplicated": None if None in missing else sum(m or 0 for m in missing),
            "seconds": max(ages, default=0.0),
        },
    }


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
