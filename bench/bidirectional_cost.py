"""What bidirectional replication's loop breaker costs the copy loop, per record.

In-process, no brokers: the copier (:class:`k2k.pipeline.task.copier.RecordCopier`) copies
batches of real ``confluent_kafka.Message`` objects (100 B values, ``partition: source``,
one run per batch) into a producer whose ``produce`` does nothing, so what is timed is k2k's
own Python work per record; a real produce adds its own cost on top, equal in every case.
Cases: one-way (no marker), bidirectional with records that carry no headers, with three
headers of their own (``headerReplication`` on), and with records all marked by the other
direction (all dropped). Rounds alternate the order; the summary gives medians.

    .venv/bin/python -m bench.bidirectional_cost [--records 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from confluent_kafka import Message

from k2k.pipeline.task.copier import RecordCopier
from k2k.stages import SourcePartition, TopicPlan
from k2k.stages.bidirectional import LoopMarker

BATCH = 10_000
MARKER = LoopMarker("__k2k_bidirectional", b"B-cluster-id", b"A-cluster-id")


class _NullProducer:
    def produce(self, *args: Any) -> None:
        pass


class _Strategy:
    producer = _NullProducer()
    on_ack = None

    def begin(self) -> None:
        pass

    def produced(self, records: int, acks: int) -> None:
        pass


def _batch(headers: list[tuple[str, bytes]] | None) -> list[Message]:
    value = b"x" * 100
    return [
        Message(
            topic="t",
            partition=0,
            offset=i,
            key=b"k%d" % i,
            value=value,
            headers=list(headers) if headers is not None else None,  # one list per record
        )
        for i in range(BATCH)
    ]


CASES: dict[str, tuple[LoopMarker | None, list[tuple[str, bytes]] | None]] = {
    "one-way, no headers": (None, None),
    "bidirectional, no headers": (MARKER, None),
    "one-way, 3 headers": (None, [("a", b"1"), ("b", b"2"), ("c", b"3")]),
    "bidirectional, 3 headers": (MARKER, [("a", b"1"), ("b", b"2"), ("c", b"3")]),
    "bidirectional, all marked (dropped)": (MARKER, [("__k2k_bidirectional", b"A-cluster-id")]),
}


def _ns_per_record(marker: LoopMarker | None, headers: Any, records: int) -> float:
    plan = TopicPlan("t", "t", SourcePartition(), True, True, None, marker=marker)
    copier = RecordCopier({"t": plan}, {"t"}, lambda m: None, lambda m, e: None)  # type: ignore[arg-type,return-value]
    strategy: Any = _Strategy()
    spent = 0.0
    for _ in range(records // BATCH):
        # Fresh messages every batch: a message's headers() is one cached list, which the
        # copier extends with the headers k2k adds (each consumed record is copied once).
        batch = _batch(headers)
        start = time.perf_counter()
        copier.copy(batch, strategy)
        spent += time.perf_counter() - start
    return spent * 1e9 / records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    results: dict[str, list[float]] = {name: [] for name in CASES}
    for name in CASES:  # warm-up: allocator, caches
        _ns_per_record(*CASES[name], BATCH * 2)
    for r in range(args.rounds):
        order = list(CASES) if r % 2 == 0 else list(reversed(CASES))
        for name in order:
            results[name].append(_ns_per_record(*CASES[name], args.records))
    print(f"| case | ns/record (median of {args.rounds}) |")
    print("|---|---|")
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values):.0f} |")


if __name__ == "__main__":
    main()
