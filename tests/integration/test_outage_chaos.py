"""The outage drill, both modes: brokers killed under a live load while ``k2k start`` runs.

A live producer writes keyed records with headers to a source topic (about 30 % in
transactions, one transaction in three aborted) while the target broker is killed with
SIGKILL and started again several times, with outages of growing length, and the source
broker once. An at-least-once and an exactly-once ``k2k start`` copy the topic side by side
(:mod:`tests.helpers.sidebyside`) and must stay up throughout; at the end each target topic
holds the source's read_committed records (exactly-once: record for record, zero
duplicates; at-least-once: every record, in source order, duplicates only as replays of a
run).

The suite runs a short drill. The product owners' drill (500k records; target outages of 10,
45 and 90 s; a 20 s source outage) is the same test with::

    K2K_CHAOS_RECORDS=500000 K2K_CHAOS_TARGET_OUTAGES=10,45,90 K2K_CHAOS_SOURCE_OUTAGE=20 \\
        .venv/bin/python -m pytest -s tests/integration/test_outage_chaos.py

Figures of that run: docs/benchmarks.md (the outage drill section).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from k2k.errors import K2KError
from k2k.local import LocalCluster, free_port, start_pair
from tests.helpers.compare import assert_at_least_once, assert_same_records
from tests.helpers.kafka import Clusters, create_topic, end_offsets, eventually, read_all
from tests.helpers.pipelines import BASE_TS, committed_progress, write_pipeline
from tests.helpers.procs import K2KProcess
from tests.helpers.sidebyside import PREFIXES, side_by_side_docs

pytestmark = pytest.mark.integration

RECORDS = int(os.environ.get("K2K_CHAOS_RECORDS", "30000"))
TARGET_OUTAGES = [float(s) for s in os.environ.get("K2K_CHAOS_TARGET_OUTAGES", "3,6,12").split(",")]
SOURCE_OUTAGE = float(os.environ.get("K2K_CHAOS_SOURCE_OUTAGE", "4"))
PARTITIONS = 4
#: About how long one broker takes to come back after its outage, with room for a loaded
#: machine (about 3 s on an idle one): the load is paced to last through every outage.
RESTART_S = 6.0


@pytest.fixture
def own_pair(tmp_path_factory) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    """A source and a target cluster of the test's own: killing them disturbs no other test."""
    pair = start_pair(
        tmp_path_factory.mktemp("chaos"),
        free_port(),
        free_port(),
        timeout=120,
        owner_pid=os.getpid(),
    )
    try:
        yield pair.source, pair.target
    finally:
        pair.stop()


class LiveLoad(threading.Thread):
    """Writes ``total`` keyed records with headers at about ``rate`` records/s. With
    ``transactions``, about 30 % of the chunks go in transactions, one in three aborted.

    Rides out a source outage as an application would: plain records wait in the idempotent
    producer and are retried; a transaction that fails is aborted (or its producer replaced
    when fatal) and written again, so the source's read_committed view holds each record
    once."""

    def __init__(self, bootstrap: str, topic: str, total: int, rate: float, transactions: bool):
        super().__init__(name="live-load", daemon=True)
        self.bootstrap, self.topic, self.total, self.rate = bootstrap, topic, total, rate
        self.transactions = transactions
        self.rng = random.Random(11)
        self.counts = {"plain": 0, "committed": 0, "aborted": 0, "retried": 0}
        self.error: BaseException | None = None
        self.plain = Producer(self._conf(enable_idempotence=True))
        self.txn: Producer | None = None

    def _conf(self, **extra: object) -> dict:
        conf = {"bootstrap.servers": self.bootstrap, "linger.ms": 10, "message.timeout.ms": 600_000}
        return conf | {k.replace("_", "."): v for k, v in extra.items()}

    def _new_txn_producer(self) -> Producer:
        # A short timeout: a transaction left open by a replaced producer ends soon (the
        # delivery timeout may not exceed it).
        txn = Producer(
            self._conf(
                transactional_id=f"chaos-src-{uuid.uuid4().hex[:8]}",
                transaction_timeout_ms=20_000,
                message_timeout_ms=20_000,
            )
        )
        txn.init_transactions(120)
        return txn

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test, which joins this thread
            self.error = exc

    def _run(self) -> None:
        started, i, chunk, kinds = time.monotonic(), 0, 500, 0
        while i < self.total:
            n = min(chunk, self.total - i)
            records = [self._record(j) for j in range(i, i + n)]
            if self.transactions and self.rng.random() < 0.3:
                self._transaction(records, abort=kinds % 3 == 2)
                kinds += 1
            else:
                for key, value, headers, ts, p in records:
                    self._produce(self.plain, key, value, headers, ts, p)
                self.counts["plain"] += n
            self.plain.poll(0)
            i += n
            ahead = started + i / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # pacing the load generator, not synchronisation
        assert self.plain.flush(600) == 0

    def _record(self, j: int) -> tuple:
        key = b"key-%d" % self.rng.randrange(10_000)
        value = b"value-%09d-" % j + bytes(self.rng.randrange(20, 120))
        return key, value, [("h-seq", str(j).encode())], BASE_TS + j, j % PARTITIONS

    def _produce(self, producer: Producer, key, value, headers, ts, p) -> None:
        while True:
            try:
                producer.produce(self.topic, value, key, p, headers=headers, timestamp=ts)
                return
            except BufferError:
                producer.poll(0.05)

    def _transaction(self, records: list[tuple], abort: bool) -> None:
        """One transaction, written again until it completes (a source outage fails it)."""
        deadline, exc = time.monotonic() + 600, None
        while time.monotonic() < deadline:
            try:
                if self.txn is None:
                    self.txn = self._new_txn_producer()
                self.txn.begin_transaction()
                for key, value, headers, ts, p in records:
                    self._produce(self.txn, key, value, headers, ts, p)
                if self.txn.flush(120) != 0:
                    raise KafkaException("records not delivered within 120 s")
                if abort:
                    self.txn.abort_transaction(120)
                else:
                    self.txn.commit_transaction(120)
                self.counts["aborted" if abort else "committed"] += len(records)
                return
            except KafkaException as failure:
                exc = failure
                self.counts["retried"] += 1
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and err.txn_requires_abort() and self.txn:
                    with contextlib.suppress(KafkaException):
                        self.txn.abort_transaction(120)
                else:
                    self.txn = None  # a new transactional id; the old transaction times out
        raise AssertionError(f"a source transaction did not complete within 600 s: {exc}")


def _crash(cluster: LocalCluster) -> None:
    """SIGKILL the broker (its JVM leads its own process group), like a machine dying."""
    pid = cluster.pid
    assert pid is not None, f"{cluster.name} is not running"
    os.killpg(pid, signal.SIGKILL)
    eventually(cluster.is_running, False, timeout=30)
    cluster.stop()  # only tidies up: pid file, watchdog


def _outage(cluster: LocalCluster, seconds: float, progress) -> float:
    """Once both pipelines moved on (``progress``: mode -> records committed), crash
    ``cluster`` for ``seconds`` and start it again; returns how long it was away."""
    before = progress()

    def moved() -> bool:
        now = progress()
        return all(now[mode] > n for mode, n in before.items())

    eventually(moved, expected=True, timeout=300, interval=0.5, ignore=(K2KError,))
    down = time.monotonic()
    _crash(cluster)
    time.sleep(seconds)  # the outage itself: its length is the point of the drill
    cluster.start(timeout=180)
    return time.monotonic() - down


def _progress(target: str, doc: dict) -> int:
    try:
        progress = committed_progress(target, doc["coordination"]["commit"]["topic"], doc["name"])
    except K2KError:  # the commit topic is not there yet
        return 0
    return sum(progress.values())


def test_outage_drill_in_both_modes_side_by_side(own_pair, tmp_path, topic_name) -> None:
    source, target = own_pair
    t = topic_name("chaos")
    create_topic(source.bootstrap, t, PARTITIONS)
    clusters = Clusters(source.bootstrap, target.bootstrap)
    # One Spark core each: two drivers and two brokers (restarted under them) share 2 cores.
    docs = side_by_side_docs(clusters, t, uuid.uuid4().hex[:8], spark={"master": "local[1]"})

    def progress() -> dict[str, int]:
        return {mode: _progress(target.bootstrap, doc) for mode, doc in docs.items()}

    planned = sum(TARGET_OUTAGES) + SOURCE_OUTAGE + RESTART_S * (len(TARGET_OUTAGES) + 1) + 10
    load = LiveLoad(source.bootstrap, t, RECORDS, RECORDS / planned, transactions=True)
    procs = {
        mode: K2KProcess(
            write_pipeline(tmp_path, doc, f"{doc['name']}.yaml"), tmp_path / f"{mode}.log"
        )
        for mode, doc in docs.items()
    }
    began = time.monotonic()
    load.start()
    outages = []
    try:
        for seconds in TARGET_OUTAGES:
            outages.append(("target", _outage(target, seconds, progress)))
            _assert_up(procs)
        outages.append(("source", _outage(source, SOURCE_OUTAGE, progress)))
        _assert_up(procs)
        load.join(900)
        assert not load.is_alive() and load.error is None, load.error
        ends = end_offsets(source.bootstrap, t, "read_committed")
        for doc in docs.values():
            eventually(
                lambda doc=doc: committed_progress(
                    target.bootstrap, doc["coordination"]["commit"]["topic"], doc["name"]
                ),
                {(t, p): end for p, end in ends.items()},
                timeout=600,
                interval=1,
                ignore=(K2KError,),
            )
        elapsed = time.monotonic() - began
        _assert_up(procs)
        for proc in procs.values():
            assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        for proc in procs.values():
            if proc.proc.poll() is None:
                proc.kill()

    src = read_all(source.bootstrap, t, timeout=300)
    replicated = sum(len(v) for v in src.values())
    # A transaction whose commit outcome the load could not learn was written again.
    assert replicated >= load.counts["plain"] + load.counts["committed"]
    print(
        f"\noutage drill: {replicated:,} records of {RECORDS:,} written ({load.counts['aborted']:,}"
        f" aborted, {load.counts['retried']} transactions written again); outages "
        f"{', '.join(f'{c} {s:.0f} s' for c, s in outages)}; {elapsed:.0f} s in all"
    )
    for mode in docs:
        target_topic = PREFIXES[mode] + t
        # A transaction some producer left open holds read_committed readers back until the
        # coordinator aborts it (transaction.timeout.ms); the figures say how long that was.
        settled = time.monotonic()
        open_ends = end_offsets(target.bootstrap, target_topic, "read_uncommitted")
        eventually(
            lambda tt=target_topic: end_offsets(target.bootstrap, tt, "read_committed"),
            open_ends,
            timeout=300,
        )
        settled = time.monotonic() - settled
        dst = read_all(target.bootstrap, target_topic, timeout=300)
        if mode == "exactly-once":
            assert_same_records(src, dst)
            duplicates = 0
        else:
            duplicates = assert_at_least_once(src, dst)
        out = procs[mode].output()
        paused = len(re.findall(r"replication paused", out))
        resumed = [int(s) for s in re.findall(r"replicating again after (\d+) s", out)]
        print(
            f"{mode}: k2k paused {paused} times, resumed after {resumed} s; the target's "
            f"read_committed end settled {settled:.0f} s after the last commit; "
            f"{duplicates:,} duplicates on the target"
        )


def _assert_up(procs: dict[str, K2KProcess]) -> None:
    for mode, proc in procs.items():
        assert proc.proc.poll() is None, f"{mode}:\n{proc.output()[-3000:]}"
