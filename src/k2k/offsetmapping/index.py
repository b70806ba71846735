"""The runs of one source partition of one pipeline, and how a position translates.

A :class:`Span` covers the source offsets ``[start, end)``: the known-empty stretch
``[start, first)`` before its records, then ``count`` records at ``first ..`` that landed on
``target`` from ``t_first``. Spans of one :class:`PartitionIndex` never overlap: a newer run
replaces, over its own range, whatever older runs said (at-least-once re-copies after a
crash; the newest copy is where a failed-over consumer should continue).

Translating a committed source position ``c`` (the next record the group would read):

* inside a span, at or before its first record: the span's first target offset (exact);
* inside a span's records: ``t_first + (c - first)`` (exact when the span is; otherwise a
  lower bound: another writer's records sit in between, which are re-read, ours never
  skipped);
* past every span: just after the last replicated record (never ahead of the data);
* in a hole between spans (mappings lost or trimmed): just after the span before it, a
  lower bound;
* before the first span: not translatable (nothing says where those records went).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass, replace

from k2k.formats.offset_mapping import OffsetMappingRecord
from k2k.kafka import TP

__all__ = ["PartitionIndex", "Span", "Translation"]


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    first: int
    count: int
    target: TP
    t_first: int
    t_last: int
    exact: bool
    written_at_ms: int
    #: Where the mapping record was read: (mapping-topic partition, offset).
    at: tuple[int, int]

    @property
    def end(self) -> int:
        return self.first + self.count

    @classmethod
    def of(cls, rec: OffsetMappingRecord, at: tuple[int, int]) -> Span:
        return cls(
            rec.source_from,
            rec.source_first,
            rec.count,
            (rec.target_topic, rec.target_partition),
            rec.target_first,
            rec.target_last,
            rec.exact,
            rec.written_at_ms,
            at,
        )

    def head(self, before: int) -> Span:
        """The part of this span below source offset ``before`` (``first < before < end``)."""
        count = before - self.first
        return replace(self, count=count, t_last=self.t_first + count - 1)

    def tail(self, after: int) -> Span:
        """The part of this span from source offset ``after`` (``start < after < end``)."""
        first = max(self.first, after)
        t_first = self.t_first + (first - self.first)
        count = self.end - first
        exact = self.exact or self.t_last - t_first + 1 == count
        return replace(self, start=after, first=first, count=count, t_first=t_first, exact=exact)


@dataclass(frozen=True, slots=True)
class Translation:
    """Where a source position continues on the target. ``exact`` is False for a lower
    bound (records may be read again on the target, none skipped)."""

    target: TP
    offset: int
    exact: bool
    #: The span the translation came from (retention keeps it).
    span: Span


class PartitionIndex:
    """The spans of one (pipeline, source topic, source partition), non-overlapping, sorted.

    >>> idx = PartitionIndex()
    >>> def run(frm, first, count, t_first, at):
    ...     idx.add(OffsetMappingRecord("p", "s", 0, frm, first, count, "t", 0, t_first,
    ...                                 t_first + count - 1, 0), (0, at))
    >>> run(0, 0, 10, 100, 0); run(10, 12, 5, 110, 1)   # a gap: 10 and 11 hold nothing
    >>> [idx.translate(c).offset for c in (0, 5, 10, 11, 12, 16, 17, 99)]
    [100, 105, 110, 110, 110, 114, 115, 115]
    >>> run(5, 5, 4, 200, 2)                  # re-copied after a crash: the newest wins
    >>> [idx.translate(c).offset for c in (4, 5, 8, 9, 12)]
    [104, 200, 203, 109, 110]
    """

    __slots__ = ("_ends", "_starts", "spans", "targets")

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._starts: list[int] = []
        self._ends: list[int] = []
        #: How many spans name each target partition.
        self.targets: Counter[TP] = Counter()

    def add(self, rec: OffsetMappingRecord, at: tuple[int, int]) -> None:
        """A run read from the mapping topic, newer than every run added before."""
        new = Span.of(rec, at)
        if not self.spans or new.start >= self._ends[-1]:
            self._put(len(self.spans), len(self.spans), [new])
            return
        lo = bisect_right(self._ends, new.start)  # first span ending after new.start
        hi = bisect_left(self._starts, new.end)  # spans before hi start before new.end
        pieces: list[Span] = []
        if lo < hi:
            left, right = self.spans[lo], self.spans[hi - 1]
            if left.start < new.start:
                if left.first < new.start:
                    pieces.append(left.head(new.start))
                else:  # only left's empty stretch precedes: it is empty for the new run too
                    new = replace(new, start=left.start)
            pieces.append(new)
            if right.end > new.end:
                pieces.append(right.tail(new.end))
        else:
            pieces.append(new)
        self._put(lo, hi, pieces)

    def translate(self, position: int) -> Translation | None:
        """Where ``position`` continues on the target (see the module doc)."""
        i = bisect_right(self._starts, position) - 1
        if i < 0:
            return None
        s = self.spans[i]
        if position < s.end:
            if position <= s.first:
                return Translation(s.target, s.t_first, True, s)
            return Translation(s.target, s.t_first + (position - s.first), s.exact, s)
        # Past the span: the end of what is replicated, or a hole before the next span.
        return Translation(s.target, s.t_last + 1, i == len(self.spans) - 1, s)

    def prune(self, keep_from: int) -> None:
        """Forget spans whose mapping record is below offset ``keep_from`` of its partition
        (the records were deleted)."""
        kept = [s for s in self.spans if s.at[1] >= keep_from]
        if len(kept) != len(self.spans):
            self.spans, self.targets = [], Counter()
            self._starts, self._ends = [], []
            self._put(0, 0, kept)

    def _put(self, lo: int, hi: int, pieces: list[Span]) -> None:
        for gone in self.spans[lo:hi]:
            self.targets[gone.target] -= 1
            if not self.targets[gone.target]:
                del self.targets[gone.target]
        for piece in pieces:
            self.targets[piece.target] += 1
        self.spans[lo:hi] = pieces
        self._starts[lo:hi] = [p.start for p in pieces]
        self._ends[lo:hi] = [p.end for p in pieces]
