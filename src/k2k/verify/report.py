"""The outcome of one ``k2k verify``, and how it reads: one line per partition and its first
differences (text), or one document (``--json``).

Runs on: driver, once the verify job's results are merged (:mod:`k2k.verify.job`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from k2k.verify.align import Difference
from k2k.verify.task import PartitionResult

__all__ = ["VerifyReport", "describe"]


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of one ``k2k verify``."""

    pipeline: str
    results: list[PartitionResult]
    #: (target topic, target partition, records): target records no verified source
    #: partition holds the key of (``partition: hash`` without tracing headers only).
    unexplained: list[tuple[str, int, int]] = field(default_factory=list)
    #: The source side was compared after the pipeline's transform steps.
    transformed: bool = False

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results) and not self.unexplained

    def failing(self) -> list[PartitionResult]:
        return [r for r in self.results if not r.ok]

    def summary(self) -> str:
        """One line: what was compared and whether it matched."""
        n = len(self.results)
        records = sum(r.source_records for r in self.results)
        dups = sum(r.duplicates for r in self.results)
        head = (
            f"{self.pipeline}: {records} source records in {n} partition{'s' * (n != 1)} of "
            f"{len({r.topic for r in self.results})} topic(s) compared"
            + (" after the pipeline's transforms" if self.transformed else "")
        )
        extra = f", {dups} at-least-once duplicate{'s' * (dups != 1)} on the target" if dups else ""
        beyond = sum(r.end - r.until for r in self.results)
        if beyond:
            extra += f"; {beyond} source offset(s) after the committed progress not compared"
        bad = self.failing()
        if self.unexplained:
            n_extra = sum(n for _, _, n in self.unexplained)
            extra += f"; {n_extra} target record(s) whose key no source partition holds"
        if not bad:
            return f"{head}: {'all match' if self.ok else 'differ'}{extra}"
        diffs = sum(r.difference_count for r in bad)
        where = ", ".join(f"{r.topic}[{r.partition}]" for r in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        return (
            f"{head}: {len(bad)} partition{'s differ' if len(bad) != 1 else ' differs'} "
            f"({diffs} difference{'s' * (diffs != 1)}: {where}{more}){extra}"
        )

    def render(self) -> str:
        """The human-readable report: one line per partition, then its first differences."""
        lines = []
        for r in self.results:
            state = "ok" if r.ok else f"DIFFERS ({r.difference_count})"
            notes = []
            if r.duplicates:
                notes.append(f"{r.duplicates} duplicates")
            if r.ahead:
                notes.append(f"{r.ahead} ahead of committed")
            if r.end > r.until:
                notes.append(f"{r.end - r.until} offsets after committed progress not compared")
            if r.before:
                notes.append(f"{r.before} before the range")
            if r.not_compared:
                notes.append(f"{r.not_compared} null-key not compared")
            note = f" ({', '.join(notes)})" if notes else ""
            lines.append(
                f"{r.topic}[{r.partition}] -> {r.target_topic}: source [{r.start}..{r.until}) "
                f"{r.source_records} records, target {r.target_records}{note}: {state}"
            )
            for d in r.differences:
                lines.append("    " + describe(r, d))
            if r.difference_count > len(r.differences):
                lines.append(f"    ... {r.difference_count - len(r.differences)} more")
        for topic, tp, n in self.unexplained:
            lines.append(f"{topic}[{tp}]: extra: {n} record(s) whose key no source partition holds")
        lines.append(("match: " if self.ok else "MISMATCH: ") + self.summary())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "ok": self.ok,
            "summary": self.summary(),
            "afterTransforms": self.transformed,
            "sourceRecords": sum(r.source_records for r in self.results),
            "duplicates": sum(r.duplicates for r in self.results),
            "partitions": [r.to_json() for r in self.results],
            "unexplained": [
                {"targetTopic": t, "targetPartition": p, "records": n}
                for t, p, n in self.unexplained
            ],
        }


def _offsets(offsets: tuple[int, ...]) -> str:
    if len(offsets) == 1:
        return f"@{offsets[0]}"
    return f"@{offsets[0]}..{offsets[-1]} ({len(offsets)} records)"


def describe(r: PartitionResult, d: Difference) -> str:
    """One difference as a line: the kind, both places, and previews."""
    src = f"source {r.topic}[{r.partition}]{_offsets(d.source_offsets)}" if d.source_offsets else ""
    dst = (
        f"target {r.target_topic}[{d.target_partition}]{_offsets(d.target_offsets)}"
        if d.target_offsets
        else ""
    )
    fields = f" {'/'.join(d.fields)}" if d.fields and d.kind == "changed" else ""
    what = {
        "missing": f"missing: {src} is not on the target",
        "extra": f"extra: {dst} matches no source record",
        "reordered": f"reordered: {src} appear in another order at {dst}",
        "changed": f"changed{fields}: {src} vs {dst}",
    }.get(d.kind, f"{d.kind}: {src} {dst}")
    if d.kind == "missing" and d.target_offsets:
        what += f" (target holds {dst} there)"
    if d.kind == "extra" and d.source_offsets:
        what += f" (in place of {src})"
    shown = []
    if d.source_preview:
        shown.append(f"source key={d.source_preview['key']} value={d.source_preview['value']}")
    if d.target_preview:
        shown.append(f"target key={d.target_preview['key']} value={d.target_preview['value']}")
    return what + (f" [{'; '.join(shown)}]" if shown else "")
