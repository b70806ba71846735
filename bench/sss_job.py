"""A plain Spark Structured Streaming Kafka -> Kafka copy: the job a Spark user writes by hand.

The benchmark's point of comparison for "just use Spark": Spark's own ``kafka`` source and
sink, no custom clients, no Python UDFs (so every record stays in the JVM; the Python driver
only starts the query and waits). At-least-once: the sink is not transactional, so a batch
that is retried after a failure is written again.

    python bench/sss_job.py --source HOST:PORT --target HOST:PORT --topic T --dest D \\
        --checkpoint DIR --mode backlog --jars a.jar,b.jar

``--mode backlog`` uses ``trigger(availableNow=True)``: the query copies everything the
source holds when it starts, then ends, and so does the process (exit 0). ``--mode steady``
uses the default trigger (the next micro-batch starts as soon as the previous one ends) and
runs until stopped. In both modes SIGTERM or SIGINT stops the query and the process exits 0
within a few seconds; a failed query exits 1 with Spark's error on stderr.

Choices, and why:

* No ``maxOffsetsPerTrigger``: Kafka -> Kafka holds no state, and a task streams its offset
  range from consumer to producer, so a bigger batch costs no memory, only replay on a
  crash; a limit would only add per-batch overhead (planning, two checkpoint writes). Pass
  ``--max-offsets-per-trigger`` to see what a bounded batch costs.
* ``kafka.isolation.level=read_committed``, as k2k reads: aborted transactional records
  are not copied.
* ``startingOffsets=earliest``: a new checkpoint starts at the beginning of the topic; once
  the checkpoint exists, it decides.
* Producer settings as k2k's (``acks=all``, idempotence, ``linger.ms=5``, 1 MB batches):
  durable, ordered on retry, and batched the same way, so the comparison is of the engines.
* The source ``partition`` column is written back, so every record lands in the partition
  number it came from, in order (the target topic must exist with as many partitions; one
  task reads one source partition's range, as long as ``minPartitions`` is not set).
* The record ``timestamp`` is written back only if this connector's sink accepts a
  ``timestamp`` column (Spark 4.2 and older do not: the target's timestamps are then the
  producer's send times); the job prints which it does.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

ROOT = Path(__file__).resolve().parents[1]
QUIET_LOG = ROOT / "src/k2k/pipeline/log4j2.properties"

#: Producer settings, comparable to k2k's (src/k2k/clients/factory.py) in the Java client's
#: terms: durable acknowledgements, retry-safe ordering, batching by size and a short linger.
PRODUCER_OPTIONS: dict[str, str] = {
    "kafka.acks": "all",
    "kafka.enable.idempotence": "true",
    "kafka.linger.ms": "5",
    "kafka.batch.size": "1000000",
    "kafka.max.request.size": "16777216",
}

#: Consumer settings: k2k also reads committed records only.
CONSUMER_OPTIONS: dict[str, str] = {
    "kafka.isolation.level": "read_committed",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="bootstrap servers of the source cluster")
    ap.add_argument("--target", required=True, help="bootstrap servers of the target cluster")
    ap.add_argument("--topic", required=True, help="source topic")
    ap.add_argument("--dest", required=True, help="target topic (must exist, same partitions)")
    ap.add_argument("--checkpoint", required=True, help="checkpoint directory of the query")
    ap.add_argument("--mode", choices=("backlog", "steady"), default="backlog")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--jars", default="", help="comma-separated connector jars (spark.jars)")
    ap.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=0,
        help="records per micro-batch across all partitions (0: no limit, the default)",
    )
    return ap.parse_args(argv)


def build_session(master: str, jars: str) -> SparkSession:
    """Start the Spark session: the connector jars plus the quiet settings k2k also uses.

    ``spark.jars`` rather than ``--packages``: the jars were resolved once with Maven (the
    benchmark runs offline from then on and never re-resolves), and Ivy is not involved.
    Unlike k2k's driver, the JVM is left with its full JIT: here it does the copying.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # imported late: pyspark is slow to import

    log_opt = f"-Dlog4j2.configurationFile=file:{QUIET_LOG}"
    spark = (
        SparkSession.builder.master(master)
        .appName("bench-sss")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", log_opt)
        .config("spark.executor.extraJavaOptions", log_opt)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def sink_writes_timestamp(spark: SparkSession) -> bool:
    """Whether this connector's Kafka sink sets the record timestamp from a column.

    Asked of the connector's own classes (its writer has a ``timestampExpression`` when it
    does) because the connector may not be the release of the running Spark: the installer
    falls back to an older one when Maven Central lacks the exact release.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a classic (not Spark Connect) session always has one
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        cls = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.kafka010.KafkaWriter$", False, loader
        )
    except Exception:  # py4j wraps ClassNotFoundException; then no connector at all
        return False
    return any(m.getName() == "timestampExpression" for m in cls.getMethods())


def start_query(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    """Define and start the copy: read the source topic, write key/value/headers/partition."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.source)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .options(**CONSUMER_OPTIONS)
    )
    if args.max_offsets_per_trigger > 0:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    columns = ["key", "value", "headers", "partition"]
    if sink_writes_timestamp(spark):
        columns.append("timestamp")
    print(f"sss: writing columns {columns}", file=sys.stderr, flush=True)
    writer = (
        reader.load()
        .select(*columns)
        .writeStream.format("kafka")
        .queryName("bench-sss")
        .option("kafka.bootstrap.servers", args.target)
        .option("topic", args.dest)
        .options(**PRODUCER_OPTIONS)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.mode == "backlog":
        writer = writer.trigger(availableNow=True)
    return writer.start()


def wait(query: StreamingQuery, stop: threading.Event) -> None:
    """Wait until the query ends by itself or ``stop`` is set (by a signal), then stop it.

    The signal handler only sets the event: stopping the query is a Py4J call, and the main
    thread may be inside another one (``awaitTermination``) when the signal arrives. Waiting
    in one-second slices lets the main thread see the event within a second. A failed query
    raises here (``StreamingQueryException``), so the process exits non-zero.
    """
    while not stop.is_set():
        if query.awaitTermination(1):
            return
    query.stop()


def report(query: StreamingQuery) -> None:
    """Print what each recent micro-batch did and where its time went (to the job's log).

    Spark keeps the last ``spark.sql.streaming.numRecentProgressUpdates`` (100) batches;
    empty batches of a steady run are summed up rather than listed.
    """
    progress = query.recentProgress
    busy = [p for p in progress if p.numInputRows]
    print(
        f"sss: {len(progress)} recent batches, {len(busy)} with records, "
        f"{sum(p.numInputRows for p in busy):,} records",
        file=sys.stderr,
    )
    for p in busy[-20:]:
        times = ", ".join(f"{k} {v}" for k, v in sorted(p.durationMs.items()))
        print(f"sss: batch {p.batchId}: {p.numInputRows:,} records; ms: {times}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Installed before Spark starts, so a SIGTERM during start-up still ends the run cleanly.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.monotonic()
    spark = build_session(args.master, args.jars)
    try:
        query = start_query(spark, args)
        print(
            f"sss: query started after {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True
        )
        wait(query, stop)
        report(query)
    finally:
        spark.stop()
    print(f"sss: done after {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
