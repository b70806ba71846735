"""Spark Structured Streaming as a benchmark contender: what "just write a Spark job" costs.

The job itself is bench/sss_job.py (Spark's own ``kafka`` source and sink, at-least-once);
this module fetches Spark's Kafka connector, creates the target topic and starts the job in
its own process, on ``local[2]`` like k2k. Backlog runs use ``trigger(availableNow=True)``
and the process exits when the copy is done; steady runs use the default micro-batch
trigger and end on the harness's SIGTERM.

The connector is not part of pyspark: it is resolved from Maven Central with bench/sss/pom.xml
into ``${K2K_HOME:-~/.cache/k2k}/spark-kafka-<pyspark version>/libs`` (once; a stamp file
marks a finished install) and handed to Spark with ``spark.jars``. Not every Spark release
published it there (4.3.0 did not): then the contender stops the run before it starts and
says so, rather than measuring another release's connector.

    .venv/bin/python -m bench.spark_sss --selfcheck

starts a local cluster pair, copies a 50,000-record backlog and a few hundred steady records,
checks what arrived and prints the timings.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from bench.contender import Contender, Ctx, create_topic
from k2k.errors import LocalClusterError
from k2k.local import k2k_home
from k2k.local.install import maven_install

ROOT = Path(__file__).resolve().parents[1]
POM = Path(__file__).with_name("sss") / "pom.xml"

__all__ = [
    "ConnectorUnavailable",
    "SparkStructuredStreaming",
    "connector_writes_timestamps",
    "ensure_spark_kafka_installed",
]

_VERSION_SUFFIX = re.compile(r"-\d+(?:\.\d+)+[^/]*\.jar$")


def spark_kafka_dir(home: Path | None = None, version: str | None = None) -> Path:
    """The install directory for ``version`` (default: the running pyspark's release); it
    may not exist yet."""
    import pyspark

    version = version or pyspark.__version__
    return (home if home is not None else k2k_home()) / f"spark-kafka-{version}"


def ensure_spark_kafka_installed(
    home: Path | None = None, version: str | None = None
) -> list[Path]:
    """Return the connector jars for ``spark.jars``, running Maven the first time only.

    ``bench/sss/pom.xml`` resolved by k2k's own Maven installer for ``version``, by default
    the running pyspark's release (the benchmark measures no other release's connector;
    tests that only need a query's checkpoint pass a published one), minus every jar
    pyspark already ships.
    """
    import pyspark

    version = version or pyspark.__version__
    pyspark_jars = Path(pyspark.__file__).parent / "jars"
    target = spark_kafka_dir(home, version)
    try:
        libs = maven_install(
            f"Spark's Kafka connector {version}",
            POM.read_text(encoding="utf-8"),
            target,
            {"spark.version": version, "spark.token.version": version},
            f"spark-sql-kafka-0-10_2.13-{version}.jar",
            prune=lambda jars: _drop_jars_pyspark_ships(jars, pyspark_jars),
        )
    except LocalClusterError as exc:
        if _unpublished(target.parent / f"install-{target.name}.log", version):
            raise ConnectorUnavailable(version) from exc
        raise
    return sorted(libs.glob("*.jar"))


class ConnectorUnavailable(Exception):
    """Maven Central has no Kafka connector of the running pyspark's release."""

    def __init__(self, version: str) -> None:
        super().__init__(
            f"Spark's Kafka connector {version} (org.apache.spark:spark-sql-kafka-0-10_2.13 "
            f"and spark-token-provider-kafka-0-10_2.13) is not on Maven Central, so the "
            f"Structured Streaming contender cannot run on pyspark {version}; leave it out "
            "with --only, or benchmark it in an environment whose pyspark has a published "
            "connector (docs/dependencies.md)"
        )


def _unpublished(maven_log: Path, version: str) -> bool:
    """Whether Maven's output says a Spark artifact of ``version`` does not exist (rather
    than that Maven Central could not be reached)."""
    try:
        text = maven_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    missing = rf"org\.apache\.spark:spark-[\w.-]+:jar:{re.escape(version)} was not found in"
    return re.search(missing, text) is not None


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients`` (the name without its version).

    >>> _artifact("spark-sql-kafka-0-10_2.13-4.2.0.jar")
    'spark-sql-kafka-0-10_2.13'
    >>> _artifact("lz4-java-1.11.0.jar")
    'lz4-java'
    """
    return _VERSION_SUFFIX.sub("", jar_name)


def _drop_jars_pyspark_ships(libs: Path, pyspark_jars: Path) -> list[str]:
    """Delete jars whose artifact pyspark already ships; return their names.

    The pom excludes the ones known today; this catches what a later connector might add,
    since two versions of one library on a classpath fail in ways that are hard to trace.
    """
    shipped = {_artifact(p.name) for p in pyspark_jars.glob("*.jar")}
    dropped = []
    for jar in sorted(libs.glob("*.jar")):
        if _artifact(jar.name) in shipped:
            jar.unlink()
            dropped.append(jar.name)
    return dropped


def connector_writes_timestamps(jars: list[Path]) -> bool:
    """Whether the connector among ``jars`` can set record timestamps (from a column).

    Read from the jar rather than the version number: its writer names a
    ``timestampExpression`` exactly when it does. bench/sss_job.py asks the same question of
    the running JVM; this one needs no Spark, so the harness can know before a run.
    """
    for jar in jars:
        if _artifact(jar.name) == "spark-sql-kafka-0-10_2.13":
            with zipfile.ZipFile(jar) as z:
                code = z.read("org/apache/spark/sql/kafka010/KafkaWriter$.class")
            return b"timestampExpression" in code
    return False


class SparkStructuredStreaming(Contender):
    """bench/sss_job.py in its own process: Spark's Kafka source and sink, ``local[2]``."""

    key = "sss"
    name = "Spark Structured Streaming"
    exits_when_done = True  # backlog: availableNow ends the query; steady: SIGTERM

    jars: list[Path] | None = None
    #: Whether target records keep the source timestamps; known after ``setup`` (it depends
    #: on the connector release: see bench/sss_job.py). Keys, values, headers and partitions
    #: are always kept.
    keeps_timestamps: bool = False

    def setup(self) -> None:
        try:
            self.jars = ensure_spark_kafka_installed()
        except ConnectorUnavailable as exc:
            raise SystemExit(f"error: {self.key}: {exc}") from None
        self.keeps_timestamps = connector_writes_timestamps(self.jars)
        if not self.keeps_timestamps:
            print(
                "  sss: this Kafka connector cannot write record timestamps; the target's are "
                "send times",
                file=sys.stderr,
            )

    def command(self, ctx: Ctx) -> list[str]:
        """The job's command line for this run (checkpoint under the run's scratch dir)."""
        jars = self.jars if self.jars is not None else ensure_spark_kafka_installed()
        return [
            sys.executable,
            str(ROOT / "bench" / "sss_job.py"),
            *ctx.copy_args(),
            "--checkpoint",
            str(ctx.tmp / f"{ctx.dest}.checkpoint"),
            "--mode",
            "steady" if ctx.steady else "backlog",
            "--master",
            "local[2]",
            "--jars",
            ",".join(str(j) for j in jars),
        ]

    def start(self, ctx: Ctx) -> None:
        create_topic(ctx.target, ctx.dest, ctx.partitions)
        argv = self.command(ctx)
        with open(ctx.tmp / f"{ctx.dest}.log", "w") as log:  # the child keeps its own copy
            ctx.procs.append(
                subprocess.Popen(
                    argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
                )
            )


# -- self-check ------------------------------------------------------------------------


def _job_lines(log: str) -> list[str]:
    """The job's own lines in its log (Spark's errors, if any, are the other lines)."""
    return [line for line in log.splitlines() if line.startswith("sss:")]


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's end offset (retried: a topic created a moment ago may have no
    leader yet)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sss-selfcheck"})
    try:
        for _ in range(50):
            try:
                return {
                    p: c.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                    for p in range(partitions)
                }
            except KafkaException:
                time.sleep(0.2)
        raise RuntimeError(f"no end offsets for {topic} on {bootstrap}")
    finally:
        c.close()


def _read(bootstrap: str, topic: str, p: int, start: int, n: int) -> list[tuple]:
    """Up to ``n`` records of one partition from ``start``: (key, value, headers, timestamp)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sss-selfcheck"})
    c.assign([TopicPartition(topic, p, start)])
    out: list[tuple] = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        out.extend(
            (m.key(), m.value(), m.headers(), m.timestamp()[1])
            for m in c.consume(n - len(out), 1)
            if m.error() is None
        )
    c.close()
    return out


def _produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    """Records ``start`` .. ``start + count``, spread over the partitions; some without a key
    or headers, timestamps an hour old (unlike any send time)."""
    from confluent_kafka import Producer

    from k2k.kafka.produce import produce_when_room

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    base_ts = int(time.time() * 1000) - 3_600_000
    for i in range(start, start + count):
        key = None if i % 97 == 0 else f"key-{i}".encode()
        headers = [] if i % 89 == 0 else [("seq", str(i).encode()), ("bin", bytes([i % 256]))]
        value = os.urandom(100)
        produce_when_room(
            producer, topic, value, key, i % partitions, None, None, base_ts + i, headers
        )
    producer.flush(60)


_PARTITIONS = 8


def _selfcheck(records: int, steady_records: int) -> int:
    """Copy a backlog and a trickle on a fresh local cluster pair; print what was seen.

    Returns 0 if every check passed. Timestamps are reported, not required: whether the sink
    can write them depends on the connector release (see bench/sss_job.py).
    """
    from k2k.local import free_port, start_pair

    job = SparkStructuredStreaming()
    job.setup()
    print(
        f"connector jars: {[j.name for j in job.jars or []]}; keeps timestamps: {job.keeps_timestamps}"
    )
    failures: list[str] = []
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="sss-selfcheck-") as tmpdir:
        tmp = Path(tmpdir)
        pair = start_pair(tmp / "clusters", free_port(), free_port())
        try:
            src, dst = pair.source.bootstrap, pair.target.bootstrap
            ctx = Ctx(src, dst, "selfcheck", "selfcheck-sss", _PARTITIONS, False, "a", tmp, procs)
            failures += _check_backlog(job, ctx, records)
            procs.clear()
            ctx = Ctx(src, dst, "trickle", "trickle-sss", _PARTITIONS, True, "b", tmp, procs)
            failures += _check_steady(job, ctx, steady_records)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            pair.stop()
    for f in failures:
        print(f"FAIL: {f}")
    print("selfcheck: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


def _check_backlog(job: SparkStructuredStreaming, ctx: Ctx, records: int) -> list[str]:
    """The job copies a backlog of ``records``: per-partition counts equal, the first and
    last 200 records of each partition equal (key, value, headers); what failed."""
    failures: list[str] = []
    src, dst, parts = ctx.source, ctx.target, ctx.partitions
    create_topic(src, ctx.topic, parts)
    _produce(src, ctx.topic, 0, records, parts)
    source_ends = _ends(src, ctx.topic, parts)
    t0 = time.monotonic()
    job.start(ctx)
    first = done = None
    while ctx.procs[0].poll() is None and time.monotonic() - t0 < 600:
        have = sum(_ends(dst, ctx.dest, parts).values())
        now = time.monotonic()
        if have and first is None:
            first = now
        if have >= records and done is None:
            done = now
        time.sleep(0.1)
    exited = time.monotonic()
    rc = ctx.procs[0].wait(5)
    log = (ctx.tmp / f"{ctx.dest}.log").read_text()
    print(f"backlog: exit {rc}; job says:\n  " + "\n  ".join(_job_lines(log)))
    target_ends = _ends(dst, ctx.dest, parts)
    if rc != 0:
        failures.append(f"backlog job exited {rc}")
    if target_ends != source_ends:
        failures.append(f"per-partition counts differ: {source_ends} vs {target_ends}")
    same = stamped = 0
    for p, end in source_ends.items():
        for start in (0, max(0, end - 200)):
            a, b = _read(src, ctx.topic, p, start, 200), _read(dst, ctx.dest, p, start, 200)
            if [r[:3] for r in a] != [r[:3] for r in b] or not a:
                failures.append(f"partition {p} from {start}: records differ")
            same += len(a)
            stamped += sum(x[3] == y[3] for x, y in zip(a, b, strict=False))
    print(
        f"backlog: {sum(target_ends.values()):,} of {records:,} records; "
        f"{same} sampled records compared (key, value, headers); "
        f"timestamps kept on {stamped} of {same}"
    )
    if first is not None and done is not None:
        print(
            f"backlog: start -> first record on target {first - t0:.1f} s; "
            f"copy (first -> last) {done - first:.1f} s "
            f"({records / max(done - first, 1e-3):,.0f} records/s); "
            f"start -> exit {exited - t0:.1f} s"
        )
    return failures


def _check_steady(job: SparkStructuredStreaming, ctx: Ctx, steady_records: int) -> list[str]:
    """The streaming job passes a trickle of ``steady_records`` through and stops on
    SIGTERM within 30 s; what failed."""
    failures: list[str] = []
    src, dst, parts = ctx.source, ctx.target, ctx.partitions
    create_topic(src, ctx.topic, parts)
    t0 = time.monotonic()
    job.start(ctx)
    warm = 0
    while sum(_ends(dst, ctx.dest, parts).values()) == 0:
        if ctx.procs[0].poll() is not None or time.monotonic() - t0 > 300:
            failures.append("steady job never became ready")
            break
        _produce(src, ctx.topic, warm, parts, parts)
        warm += parts
        time.sleep(1)
    ready = time.monotonic()
    print(f"steady: first record through after {ready - t0:.1f} s")
    _produce(src, ctx.topic, warm, steady_records, parts)
    sent = time.monotonic()
    want = _ends(src, ctx.topic, parts)
    while _ends(dst, ctx.dest, parts) != want and time.monotonic() - sent < 120:
        time.sleep(0.05)
    arrived = time.monotonic()
    if _ends(dst, ctx.dest, parts) != want:
        failures.append("steady: records did not all arrive within 120 s")
    print(f"steady: {steady_records} records all on target {arrived - sent:.2f} s after sent")
    ctx.procs[0].send_signal(signal.SIGTERM)
    term = time.monotonic()
    try:
        rc = ctx.procs[0].wait(60)
        print(f"steady: exit {rc} {time.monotonic() - term:.1f} s after SIGTERM")
        log = (ctx.tmp / f"{ctx.dest}.log").read_text()
        print("steady: job says:\n  " + "\n  ".join(_job_lines(log)))
        if time.monotonic() - term > 30 or rc != 0:
            failures.append(f"steady: SIGTERM -> exit {rc} took too long or failed")
    except subprocess.TimeoutExpired:
        failures.append("steady: still running 60 s after SIGTERM")
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--selfcheck", action="store_true", help="run the self-check (see above)")
    ap.add_argument("--records", type=int, default=50_000, help="backlog records (self-check)")
    ap.add_argument("--steady-records", type=int, default=300, help="steady records (self-check)")
    args = ap.parse_args(argv)
    if args.selfcheck:
        return _selfcheck(args.records, args.steady_records)
    try:
        jars = ensure_spark_kafka_installed()
    except ConnectorUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for jar in jars:
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
