"""Aligning what the target holds with what the source holds, one *lane* at a time.

Pure code: no clients, no Spark. A lane is the records one source partition sent to one
target partition (with ``partition: source`` a source partition has one lane; with
``partition: hash`` one per target partition its keys went to). The *expected* side is the
source records of the lane in source order; the *actual* side is the target records
attributed to the lane in target order.

Alignment walks both sides in order. A record matches when its :class:`Fingerprint` has the
same identity: the same content (key, value, headers, timestamp) and, when the target
carries the source offset as a tracing header, the same source offset. Where the sides
disagree the walk first looks for an at-least-once replay, then for the nearest point where
they agree again, and classifies what lies between.

Invariants (checked by :func:`align` before it returns):

1. every actual record is counted exactly once: matched, duplicate, ahead, or part of a
   difference (extra, changed, reordered);
2. every expected record of the compared range is counted exactly once: matched or part of
   a difference (missing, changed, reordered);
3. with no differences, the two order-sensitive digests are equal.

A lane may start after *context*: ``expected[:before]`` are source records a previous slice
of the partition compares (see :mod:`k2k.verify.slicing`); they are never counted, only
recognised when the target replays them.

The digests are polynomial: a sequence of record hashes ``h0, h1, ...`` (64 bits each) has
the digest ``sum(h_i * 2**(64*i)) mod (2**255 - 19)``, so the digest of a concatenation
follows from the digests and lengths of its parts (:func:`combine`), whatever the slicing.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "CUT_MARGIN",
    "PREVIEW_BYTES",
    "Difference",
    "Fingerprint",
    "LaneResult",
    "align",
    "combine",
    "compact",
    "content_hash",
    "digest",
    "equal_lane",
    "field_digest",
    "fingerprint",
    "headers_digest",
]

#: Payloads in reports are cut to this many bytes (records may hold secrets: keep it short).
PREVIEW_BYTES = 24
#: How far (records on each side) a difference may reach before the walk gives up on it.
RESYNC_WINDOW = 200
#: How many records after a candidate resync point must agree too.
RESYNC_CONFIRM = 2
#: Records on each side of a slice's cut that agree one for one (:mod:`k2k.verify.slicing`).
CUT_MARGIN = 4

Content = tuple[bytes, bytes, bytes, int]
Headers = Sequence[tuple[str, bytes | None]]

#: The modulus of the polynomial digests (a prime; 2 has a huge order modulo it).
_P = 2**255 - 19

_blake2b = hashlib.blake2b
#: The digest of a null key or value (no blake2b digest is all zeros in practice).
_NULL = b"\x00" * 8
#: The digest of an empty header list (most records): computed once.
_NO_HEADERS = hashlib.blake2b(digest_size=8, person=b"k2k-headers").digest()


def field_digest(data: bytes | None) -> bytes:
    """An 8-byte digest of a key or value; None (a null key, a tombstone) differs from b"".

    >>> field_digest(None) == field_digest(b"")
    False
    """
    if data is None:
        return _NULL
    return _blake2b(data, digest_size=8).digest()


def headers_digest(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    """An 8-byte, order-sensitive digest of a header list.

    >>> headers_digest([("a", b"1"), ("b", b"2")]) == headers_digest([("b", b"2"), ("a", b"1")])
    False
    """
    if not headers:
        return _NO_HEADERS
    h = _blake2b(digest_size=8, person=b"k2k-headers")
    for name, value in headers:
        n = name.encode()
        h.update(len(n).to_bytes(4, "big") + n)
        if value is None:
            h.update(b"\xff\xff\xff\xff")
        else:
            h.update(len(value).to_bytes(4, "big") + value)
    return h.digest()


def content_hash(key: bytes | None, value: bytes | None, headers: Headers, timestamp: int) -> int:
    """A 64-bit (signed) hash of a record's key, value, headers and timestamp: Python's own tuple
    hash (SipHash for the payloads, computed in C), so equal within one Python version and
    ``PYTHONHASHSEED`` (Spark gives its Python workers ``0``); what the digests sum up.

    >>> content_hash(b"k", None, [], 1) == content_hash(b"k", b"", [], 1)
    False
    """
    return hash((key, value, tuple(headers) if headers else (), timestamp))


class Fingerprint(NamedTuple):
    """One record as the comparison sees it: small, picklable, payloads only as previews.

    ``source_offset`` is the record's own offset on the source side; on the target side the
    source offset from the tracing header, or None without one. A *compact* fingerprint
    (:func:`compact`) has the record's hash as its content and no previews: enough to prove
    two lanes equal, not to describe how they differ."""

    partition: int
    offset: int
    source_offset: int | None
    #: Digests of key, value and headers (8 bytes each) and the timestamp, or (compact) the
    #: content hash.
    content: Content | int
    key_preview: bytes | None
    value_preview: bytes | None
    #: :func:`content_hash` of the record: what the digests are made of.
    h: int = 0

    def identity(self, by_offset: bool) -> Any:
        return (self.source_offset, self.content) if by_offset else self.content


def fingerprint(
    partition: int,
    offset: int,
    source_offset: int | None,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
    timestamp: int,
    *,
    full: bool = True,
) -> Fingerprint:
    """The fingerprint of one record (``timestamp`` 0 when timestamps are not compared);
    with ``full`` false the compact one, whose content is its :func:`content_hash`."""
    h = hash((key, value, tuple(headers) if headers else (), timestamp))
    if not full:
        return Fingerprint(partition, offset, source_offset, h, None, None, h)
    return Fingerprint(
        partition,
        offset,
        source_offset,
        (field_digest(key), field_digest(value), headers_digest(headers), timestamp),
        None if key is None else key[:PREVIEW_BYTES],
        None if value is None else value[:PREVIEW_BYTES],
        h,
    )


#: :func:`fingerprint` with ``full=False``: enough to prove two lanes equal, not to say how
#: they differ.
compact = functools.partial(fingerprint, full=False)


def digest(hashes: Iterable[int]) -> int:
    """The polynomial digest of a sequence of 64-bit record hashes (see the module doc).

    >>> digest([1, 2]) == combine(digest([1]), 1, digest([2])) != digest([2, 1])
    True
    """
    data = array("q", hashes)  # signed, read back as unsigned: h mod 2**64
    if sys.byteorder == "big":
        data.byteswap()
    return int.from_bytes(data.tobytes(), "little") % _P


def combine(first: int, first_length: int, then: int) -> int:
    """The digest of a concatenation: ``first`` (of ``first_length`` records), then ``then``."""
    return (first + then * pow(2, 64 * first_length, _P)) % _P


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where the target does not hold what the source holds.

    ``kind``: ``missing`` (source records absent from the target), ``extra`` (target records
    no source record of the range explains), ``changed`` (a target record in a source
    record's place with other content; ``fields`` says which: key, value, headers,
    timestamp), ``reordered`` (the same records in another order). Offsets are the records'
    own on each side; ``target_partition`` is where the target records are."""

    kind: str
    source_offsets: tuple[int, ...]
    target_partition: int | None
    target_offsets: tuple[int, ...]
    fields: tuple[str, ...] = ()
    source_preview: dict[str, str] | None = None
    target_preview: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "sourceOffsets": list(self.source_offsets),
            "targetPartition": self.target_partition,
            "targetOffsets": list(self.target_offsets),
            "fields": list(self.fields),
            "source": self.source_preview,
            "target": self.target_preview,
        }


@dataclass(slots=True)
class LaneResult:
    """What aligning one lane found. ``ahead``: target records of source records after the
    compared range (replicated, not yet committed), not compared."""

    matched: int = 0
    duplicates: int = 0
    ahead: int = 0
    expected: int = 0
    actual: int = 0
    differences: list[Difference] = field(default_factory=list)
    #: Set when a difference reached further than the resync window: the rest of the lane
    #: was not aligned (counted as one difference from that point on).
    gave_up: bool = False
    source_digest: int = 0
    target_digest: int = 0
    #: How many target records the target digest covers (matched or differing).
    target_digested: int = 0
    #: A lane with context (``before``): a difference that looks like the tail of an
    #: at-least-once replay reaching back past the context, which only the whole partition
    #: can tell (see :mod:`k2k.verify.slicing`).
    doubt: bool = False
    #: How many records the walk matched one for one at the end of the lane (a slice that
    #: ends at a cut must end with :data:`CUT_MARGIN` of them, or its cut was no place
    #: where the two sides were in step).
    tail_matched: int = 0


def preview(fp: Fingerprint) -> dict[str, str]:
    """Truncated key and value of a record, for a report (bytes shown as Python escapes)."""

    def show(data: bytes | None) -> str:
        if data is None:
            return "null"
        return repr(data)[2:-1] + ("..." if len(data) >= PREVIEW_BYTES else "")

    return {"key": show(fp.key_preview), "value": show(fp.value_preview)}


def changed_fields(a: Fingerprint, b: Fingerprint) -> tuple[str, ...]:
    """Which of key, value, headers, timestamp differ between two fingerprints."""
    names = ("key", "value", "headers", "timestamp")
    if not isinstance(a.content, tuple) or not isinstance(b.content, tuple):
        return ()  # compact fingerprints: the fields are not known
    return tuple(n for n, x, y in zip(names, a.content, b.content, strict=True) if x != y)


def align(
    expected: Sequence[Fingerprint],
    actual: Sequence[Fingerprint],
    compared: int,
    *,
    by_offset: bool = False,
    before: int = 0,
) -> LaneResult:
    """Align ``actual`` (target order) with ``expected`` (source order).

    ``expected[before:compared]`` is the range being verified; ``expected[:before]`` is
    context (compared by the slice before; target records repeating it are replays);
    records after ``compared`` were not yet committed: target records matching them count
    as ``ahead``, and their absence is no difference. ``by_offset``: target fingerprints
    carry the source offset, which then has to match too.

    >>> fp = lambda o, v: fingerprint(0, o, None, b"k", v, [], 0)
    >>> src = [fp(i, b"v%d" % i) for i in range(6)]
    >>> dst = [fp(i, b"v%d" % i) for i in range(4)] + [fp(4 + i, b"v%d" % i) for i in (2, 3)] + [fp(6, b"v4"), fp(7, b"v5")]
    >>> r = align(src, dst, 6)
    >>> r.matched, r.duplicates, r.differences
    (6, 2, [])
    >>> swapped = [fp(o, b"v%d" % i) for o, i in enumerate([0, 2, 1, 3, 4, 5])]
    >>> r = align(src, swapped, 6)
    >>> [(d.kind, d.source_offsets, d.target_offsets) for d in r.differences]
    [('reordered', (1, 2), (1, 2))]
    >>> r = align(src, dst[4:], 6, before=2)  # the slice from source offset 2 on
    >>> r.matched, r.duplicates, r.expected
    (4, 0, 4)
    """
    r = equal_lane(expected, actual, compared, by_offset, before)
    if r is None:
        walk = _Walk(expected, actual, compared, by_offset, before)
        walk.run()
        r = walk.result
    _check_invariants(r, compared - before, len(actual))
    return r


def equal_lane(
    E: Sequence[Fingerprint], A: Sequence[Fingerprint], compared: int, by_offset: bool, before: int
) -> LaneResult | None:
    """The result of :func:`align` when ``A`` is exactly ``E[before:]`` up to some point at
    or after ``compared`` (nothing differs, no replays), else None. Compares identities
    only, so it also works on compact fingerprints: the fast path of every lane."""
    n = len(A)
    if n < compared - before or before + n > len(E):
        return None
    if by_offset:
        same = all(
            a.source_offset == e.source_offset and a.content == e.content
            for a, e in zip(A, E[before:], strict=False)
        )
    else:
        same = [a.content for a in A] == [e.content for e in E[before : before + n]]
    if not same:
        return None
    matched = compared - before
    return LaneResult(
        matched=matched,
        ahead=n - matched,
        expected=matched,
        actual=n,
        source_digest=digest(f.h for f in E[before:compared]),
        target_digest=digest(f.h for f in A[:matched]),
        target_digested=matched,
        tail_matched=n,
    )


class _Walk:
    """One alignment: positions ``i`` (expected) and ``j`` (actual) move forward only."""

    def __init__(
        self,
        expected: Sequence[Fingerprint],
        actual: Sequence[Fingerprint],
        compared: int,
        by_offset: bool,
        before: int,
    ) -> None:
        self.E, self.A, self.compared, self.before = expected, actual, compared, before
        self.ids_e = [f.identity(by_offset) for f in expected]
        self.ids_a = [f.identity(by_offset) for f in actual]
        self.where: dict[Any, list[int]] = {}
        for k, ident in enumerate(self.ids_e):
            self.where.setdefault(ident, []).append(k)
        self.result = LaneResult(expected=compared - before, actual=len(actual))
        #: The target records the target digest covers: matched or differing, in order.
        self.taken: list[Fingerprint] = []

    def run(self) -> None:
        r, E, A, compared = self.result, self.E, self.A, self.compared
        i, j = self.before, 0
        #: Where the last difference ended in ``A`` (a replay right after it: see doubt).
        differed_to = -1
        streak = 0
        while j < len(A):
            if i < len(E) and self.ids_a[j] == self.ids_e[i]:
                if i < compared:
                    r.matched += 1
                    self.taken.append(A[j])
                else:
                    r.ahead += 1
                i, j = i + 1, j + 1
                streak += 1
                continue
            streak = 0
            run = _replay_run(self.ids_e, self.ids_a, self.where, i, j)
            if run:
                r.duplicates += run
                if j == differed_to and self.before:
                    r.doubt = True  # a replay right after a difference: cut short?
                j += run
                continue
            di, dj = self._differ(i, j)
            if self.before and not di and dj and i and self.ids_a[j + dj - 1] == self.ids_e[i - 1]:
                r.doubt = True  # extra records ending where the target had got: a replay?
            i, j = i + di, j + dj
            differed_to = j
        if i < compared:
            r.differences.append(_diff(E[i:compared], (), "missing"))
            streak = 0
        r.tail_matched = streak
        if self.before and r.gave_up:
            r.doubt = True
        r.source_digest = digest(f.h for f in E[self.before : compared])
        r.target_digest = digest(f.h for f in self.taken)
        r.target_digested = len(self.taken)

    def _differ(self, i: int, j: int) -> tuple[int, int]:
        """At a disagreement: record what differs up to the next point where both sides
        agree again (or the ends) and return how far each side moves."""
        r, E, A = self.result, self.E, self.A
        if i >= len(E):
            di, dj = 0, 1
        else:
            point = _resync(self.ids_e, self.ids_a, i, j)
            if point is None:
                r.gave_up = True
                point = (len(E) - i, len(A) - j)
            di, dj = point
        d = _region(E[i : i + di], A[j : j + dj], self.compared - i)
        if d is not None:
            r.differences.append(d)
            self.taken.extend(A[j : j + dj])
        return di, dj


def _replay_run(
    ids_e: Sequence[tuple[Any, ...]],
    ids_a: Sequence[tuple[Any, ...]],
    where: dict[tuple[Any, ...], list[int]],
    i: int,
    j: int,
) -> int:
    """The length of the at-least-once replay that starts at ``ids_a[j]``, or 0.

    A replay is the target holding source records it already holds again, in source order:
    ``ids_a[j:j+L] == ids_e[k:k+L]`` with ``k + L <= i``. It must run up to where the target
    had got (``k + L == i``), or be cut by the lane's end or by another replay."""
    best = 0
    for k in reversed(where.get(ids_a[j], ())):
        if k >= i:
            continue
        n = 0
        while k + n < i and j + n < len(ids_a) and ids_a[j + n] == ids_e[k + n]:
            n += 1
        end = j + n
        if k + n == i or end == len(ids_a) or any(x < i for x in where.get(ids_a[end], ())):
            best = max(best, n)
            if k + n == i:
                break
    return best


def _resync(
    ids_e: Sequence[tuple[Any, ...]], ids_a: Sequence[tuple[Any, ...]], i: int, j: int
) -> tuple[int, int] | None:
    """The nearest (fewest skipped records on both sides) point ``(di, dj)`` after which
    both sides agree again for :data:`RESYNC_CONFIRM` records or up to an end; the ends of
    both sides count as such a point. None when it lies beyond :data:`RESYNC_WINDOW`."""
    nE, nA = len(ids_e), len(ids_a)
    end_point = (nE - i, nA - j)
    for s in range(1, 2 * RESYNC_WINDOW + 1):
        if sum(end_point) == s:
            return end_point
        for di in range(max(0, s - RESYNC_WINDOW), min(s, RESYNC_WINDOW) + 1):
            dj = s - di
            x, y = i + di, j + dj
            if x >= nE or y >= nA or ids_e[x] != ids_a[y]:
                continue
            t = 1
            while t < RESYNC_CONFIRM and x + t < nE and y + t < nA:
                if ids_e[x + t] != ids_a[y + t]:
                    break
                t += 1
            else:
                return di, dj
    return None


def _diff(
    src: Sequence[Fingerprint], dst: Sequence[Fingerprint], kind: str, fields: tuple[str, ...] = ()
) -> Difference:
    return Difference(
        kind,
        tuple(f.offset for f in src),
        dst[0].partition if dst else None,
        tuple(f.offset for f in dst),
        fields,
        preview(src[0]) if src else None,
        preview(dst[0]) if dst else None,
    )


def _region(
    src: Sequence[Fingerprint], dst: Sequence[Fingerprint], in_range: int
) -> Difference | None:
    """Classify what lies between two points where the sides agree (source records after
    the compared range missing from the target are no difference: None when nothing else
    is left)."""
    if not dst:
        src = src[: max(in_range, 0)]
        if not src:
            return None
        return _diff(src, dst, "missing")
    if not src:
        return _diff(src, dst, "extra")
    if (
        len(src) == len(dst)
        and len(src) > 1
        and sorted(f.content for f in src) == sorted(f.content for f in dst)
    ):
        return _diff(src, dst, "reordered")
    if len(src) == len(dst):
        first = next((k for k in range(len(src)) if src[k].content != dst[k].content), 0)
        return _diff(src, dst, "changed", changed_fields(src[first], dst[first]) or ("offset",))
    kind = "missing" if len(src) > len(dst) else "extra"
    return _diff(src, dst, kind, changed_fields(src[0], dst[0]))


def _check_invariants(r: LaneResult, compared: int, actual: int) -> None:
    """Invariant 1 is counted per record; 3 follows from the digests when nothing differs
    (``compared``: the records of the range, context left out)."""
    if not r.differences and not r.gave_up:
        assert r.matched + r.duplicates + r.ahead == actual, (r, actual)
        assert r.matched == compared, (r, compared)
        assert r.source_digest == r.target_digest, r
