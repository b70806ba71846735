"""How long a small exactly-once commit batch waits on the target, with nothing else running.

The runner's exactly-once commit point flushes the batch (every record acknowledged) before
the other producer may write, then commits in the background. This replays that pattern
on an idle embedded pair, without Spark, the source, or k2k's loop: 100 ms batches of
100 B records over 4 partitions plus one progress record, at about 5k records/s, through
two transactional producers in turn (``--producers 1``: one producer that commits in line).

It separates what the broker and the transaction protocol cost from what a loaded machine
adds: compare its flush times with the latency of ``bench/run``'s exactly-once contenders.

    .venv/bin/python -m bench.txn_latency [--producers 1|2] [--seconds 40]
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.latency import percentile
from k2k.local import free_port, start_pair
from k2k.pipeline.task.commit.transactions import TransactionPair

BATCH_S = 0.1
PARTITIONS = 4
VALUE = b"x" * 100


def _ms(values: list[float], q: float) -> int:
    return round(1000 * percentile(sorted(values), q))


def run(bootstrap: str, producers: int, seconds: float) -> tuple[list[float], list[float]]:
    """Commit batches for ``seconds``; returns (flush durations, commit durations)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic("data", PARTITIONS, 1), NewTopic("progress", 1, 1)]
    ).values():
        future.result()
    clients = []
    for suffix in "ab"[:producers]:
        p = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"lat.{suffix}", "linger.ms": 5}
        )
        p.init_transactions(30)
        clients.append(p)
    # Two producers: the runner's own TransactionPair (batch N commits in the background
    # while N+1 fills the other producer, and only after N-1 committed).
    pair = TransactionPair(clients) if producers == 2 else None
    flushes: list[float] = []
    commits: list[float] = []

    def commit(p: Producer) -> None:
        started = time.monotonic()
        p.commit_transaction(60)
        commits.append(time.monotonic() - started)

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        p = pair.current if pair is not None else clients[0]
        p.begin_transaction()
        started = time.monotonic()
        while time.monotonic() - started < BATCH_S:
            for partition in range(PARTITIONS):
                p.produce("data", VALUE, partition=partition)
            p.poll(0)
            time.sleep(0.0008)  # pacing to about 5k records/s, not synchronisation
        p.produce("progress", b"progress", partition=0)
        started = time.monotonic()
        p.flush(60)
        flushes.append(time.monotonic() - started)
        if pair is not None:
            pair.wait()
            pair.hand_off(functools.partial(commit, p), None)
        else:
            commit(p)
    if pair is not None:
        pair.wait()
        pair.close()
    return flushes, commits


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--producers", type=int, choices=(1, 2), default=2)
    ap.add_argument("--seconds", type=float, default=40.0)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="k2k-txn-latency-")
    pair = start_pair(root, free_port(), free_port())
    try:
        flushes, commits = run(pair.target.bootstrap, args.producers, args.seconds)
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.producers} producer(s), {len(flushes)} batches: flush p50 {_ms(flushes, 0.5)} "
        f"ms, p99 {_ms(flushes, 0.99)} ms, max {_ms(flushes, 1.0)} ms; commit p50 "
        f"{_ms(commits, 0.5)} ms, p99 {_ms(commits, 0.99)} ms, max {_ms(commits, 1.0)} ms"
    )


if __name__ == "__main__":
    main()
