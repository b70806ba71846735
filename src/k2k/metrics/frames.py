"""The runner -> driver metrics frame: one runner's running totals since its task started.

Runs on: both sides. A frame is one line of JSON, versioned by ``v``, sent over the lease
channel at most once a second and once more inside the runner's summary. Totals rather than
deltas: a lost or repeated frame changes nothing, because the driver subtracts what it
already counted from the same runner (:class:`FrameDeltas`).

Histograms travel as per-bucket (count, sum) pairs over :data:`LATENCY_BOUNDS_S` or
:data:`COMMIT_BOUNDS_S`; the driver records each bucket's mean that many times, which keeps
every bucket's count and the total sum exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from k2k.kafka import TP

__all__ = [
    "AGE_BOUNDS_S",
    "COMMIT_BOUNDS_S",
    "FRAME_VERSION",
    "LATENCY_BOUNDS_S",
    "Buckets",
    "FrameDelta",
    "FrameDeltas",
    "PartitionDelta",
    "PartitionTotals",
    "RunnerFrame",
]

FRAME_VERSION = 2

#: Histogram bucket bounds (seconds) of end-to-end latency and of commit duration.
LATENCY_BOUNDS_S = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0
)  # fmt: skip
#: Record age when read (MirrorMaker 2's record-age): the same scale as latency.
AGE_BOUNDS_S = LATENCY_BOUNDS_S
COMMIT_BOUNDS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(slots=True)
class Buckets:
    """A histogram's running (count, sum) per bucket; the last bucket is +Inf."""

    counts: list[int]
    sums: list[float]

    @classmethod
    def empty(cls, bounds: tuple[float, ...]) -> Buckets:
        return cls([0] * (len(bounds) + 1), [0.0] * (len(bounds) + 1))

    def minus(self, earlier: Buckets | None) -> list[tuple[int, float]]:
        """Per bucket, (count, sum) since ``earlier``; buckets that did not change are
        (0, 0.0)."""
        if earlier is None:
            return list(zip(self.counts, self.sums, strict=True))
        return [
            (c - c0, s - s0)
            for c, s, c0, s0 in zip(
                self.counts, self.sums, earlier.counts, earlier.sums, strict=True
            )
        ]


@dataclass(slots=True)
class PartitionTotals:
    """Running totals of one source partition in one runner: ``bytes`` of keys and values,
    ``key_bytes`` of keys alone; ``target`` is the topic its records go to."""

    records: int = 0
    bytes: int = 0
    latency: Buckets = field(default_factory=lambda: Buckets.empty(LATENCY_BOUNDS_S))
    key_bytes: int = 0
    age: Buckets = field(default_factory=lambda: Buckets.empty(AGE_BOUNDS_S))
    target: str = ""

    def copy(self) -> PartitionTotals:
        return PartitionTotals(
            self.records,
            self.bytes,
            Buckets(list(self.latency.counts), list(self.latency.sums)),
            self.key_bytes,
            Buckets(list(self.age.counts), list(self.age.sums)),
            self.target,
        )


@dataclass(slots=True)
class RunnerFrame:
    """One runner's totals: ``runner`` is unique per task attempt, ``partitions`` holds only
    the partitions that changed since the previous frame.

    >>> f = RunnerFrame("r1", 3, {("t", 0): PartitionTotals(5, 50)}, 1, commit_failures=1)
    >>> RunnerFrame.decode(f.encode()) == f
    True
    >>> f.foreign[("t2", 0)] = 4  # foreign records found on target t2[0]
    >>> RunnerFrame.decode(f.encode()) == f
    True
    >>> f.clients["producer"] = {"records": 9, "rttAvg": 0.002}  # k2k.metrics.clientstats
    >>> RunnerFrame.decode(f.encode()) == f
    True
    """

    runner: str
    lease: int
    partitions: dict[TP, PartitionTotals] = field(default_factory=dict)
    #: Grows with every frame of the runner: an older frame arriving late is ignored.
    seq: int = 0
    commits: Buckets = field(default_factory=lambda: Buckets.empty(COMMIT_BOUNDS_S))
    commit_failures: int = 0
    #: Foreign records found per target partition (optional in the frame: absent when none).
    foreign: dict[TP, int] = field(default_factory=dict)
    #: Per client role, the summary of the runner's client statistics (optional in the
    #: frame: absent when off or none came yet; k2k.metrics.clientstats).
    clients: dict[str, dict[str, float]] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc = {
            "v": FRAME_VERSION,
            "runner": self.runner,
            "lease": self.lease,
            "seq": self.seq,
            "tp": [
                [
                    t,
                    p,
                    x.records,
                    x.bytes,
                    x.latency.counts,
                    x.latency.sums,
                    x.key_bytes,
                    x.age.counts,
                    x.age.sums,
                    x.target,
                ]
                for (t, p), x in self.partitions.items()
            ],
            "commits": [self.commits.counts, self.commits.sums],
            "commitFailures": self.commit_failures,
        }
        if self.foreign:
            doc["foreign"] = [[t, p, n] for (t, p), n in self.foreign.items()]
        if self.clients:
            doc["clients"] = self.clients
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> RunnerFrame | None:
        """The frame, or None for a version this driver does not read (a mixed deployment
        loses metrics, never replication)."""
        doc: dict[str, Any] = json.loads(raw)
        if doc.get("v") != FRAME_VERSION:
            return None
        counts, sums = doc["commits"]
        return cls(
            runner=str(doc["runner"]),
            lease=int(doc["lease"]),
            seq=int(doc["seq"]),
            partitions={
                (str(t), int(p)): PartitionTotals(
                    int(r),
                    int(b),
                    Buckets(list(c), list(s)),
                    int(k),
                    Buckets(list(ac), list(asum)),
                    str(tt),
                )
                for t, p, r, b, c, s, k, ac, asum, tt in doc["tp"]
            },
            commits=Buckets(list(counts), list(sums)),
            commit_failures=int(doc["commitFailures"]),
            foreign={(str(t), int(p)): int(n) for t, p, n in doc.get("foreign", [])},
            clients={
                str(role): {str(k): float(v) for k, v in summary.items()}
                for role, summary in doc.get("clients", {}).items()
            },
        )


@dataclass(slots=True)
class PartitionDelta:
    """What one source partition adds: records, key and value bytes, the latency and
    record-age buckets (count, sum), and the target topic."""

    records: int
    key_bytes: int
    value_bytes: int
    latency: list[tuple[int, float]]
    age: list[tuple[int, float]]
    target: str


@dataclass(slots=True)
class FrameDelta:
    """What one frame adds to what the driver already counted from its runner."""

    partitions: dict[TP, PartitionDelta]
    commits: list[tuple[int, float]]
    commit_failures: int
    #: Foreign records newly found per target partition.
    foreign: dict[TP, int] = field(default_factory=dict)


class FrameDeltas:
    """Runs on: driver. Turns each runner's totals into increments, per runner; frames older
    than one already counted, and frames of a lease that ended (its last totals came with
    the summaries), give None.

    >>> d = FrameDeltas()
    >>> d.delta(RunnerFrame("r1", 1, {("t", 0): PartitionTotals(5, 50, key_bytes=10)}, seq=1)).partitions[("t", 0)].value_bytes
    40
    >>> d.delta(RunnerFrame("r1", 1, {("t", 0): PartitionTotals(7, 50)}, seq=3)).partitions[("t", 0)].records
    2
    >>> d.delta(RunnerFrame("r1", 1, {("t", 0): PartitionTotals(6, 50)}, seq=2)) is None
    True
    """

    def __init__(self) -> None:
        self._seen: dict[str, RunnerFrame] = {}
        self._ended: set[int] = set()

    def delta(self, frame: RunnerFrame) -> FrameDelta | None:
        if frame.lease in self._ended:
            return None
        seen = self._seen.setdefault(frame.runner, RunnerFrame(frame.runner, frame.lease))
        if frame.seq <= seen.seq:
            return None
        seen.seq = frame.seq
        partitions = {}
        for tp, now in frame.partitions.items():
            before = seen.partitions.get(tp) or PartitionTotals()
            keys = now.key_bytes - before.key_bytes
            partitions[tp] = PartitionDelta(
                now.records - before.records,
                keys,
                now.bytes - before.bytes - keys,
                now.latency.minus(before.latency),
                now.age.minus(before.age),
                now.target,
            )
            seen.partitions[tp] = now
        commits = frame.commits.minus(seen.commits)
        failures = frame.commit_failures - seen.commit_failures
        seen.commits, seen.commit_failures = frame.commits, frame.commit_failures
        foreign = {
            tp: n - seen.foreign.get(tp, 0)
            for tp, n in frame.foreign.items()
            if n > seen.foreign.get(tp, 0)
        }
        seen.foreign.update(frame.foreign)
        return FrameDelta(partitions, commits, failures, foreign)

    def lease_ended(self, lease: int) -> None:
        """Forget the lease's runners once their summaries were counted."""
        self._ended.add(lease)
        self._seen = {k: f for k, f in self._seen.items() if f.lease != lease}
