"""Apache Kafka MirrorMaker 2 in dedicated mode as a benchmark contender, at-least-once and
exactly-once.

MM2 is the replicator that ships with Apache Kafka, so it is the reference k2k is measured
against. It runs here exactly as a user would run ``connect-mirror-maker.sh``: one JVM,
``org.apache.kafka.connect.mirror.MirrorMaker <mm2.properties> --clusters <target>``, from
the jars of the same Kafka release as the brokers (resolved from Maven Central by
``bench/mm2/pom.xml``, see :func:`ensure_mm2_installed`). The configuration is a committed
template per guarantee (``bench/mm2/*.properties``; its header says what was tuned and why)
that :meth:`MirrorMaker2AtLeastOnce.start` fills in for the run.

MM2 never stops by itself (``exits_when_done`` is False): the harness stops it with SIGTERM,
on which the JVM's shutdown hook stops the Connect workers cleanly.

Self-check (starts its own clusters; under a minute per variant)::

    .venv/bin/python -m bench.mm2 --selfcheck [--records 50000] [--only mm2,mm2-eos] [--keep]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bench.contender import Contender, Ctx, create_topic
from k2k.kafka.produce import produce_when_room
from k2k.local import (
    KAFKA_VERSION,
    ensure_kafka_installed,
    find_java,
    free_port,
    k2k_home,
    start_pair,
)
from k2k.local.install import maven_install

__all__ = [
    "MirrorMaker2AtLeastOnce",
    "MirrorMaker2ExactlyOnce",
    "ensure_mm2_installed",
    "java_command",
    "render_config",
]

HERE = Path(__file__).resolve().parent / "mm2"
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
TARGET_ALIAS = "target"
"""The target cluster's alias. Fixed: only the source alias decides names on the target."""

#: Heap: 8 tasks each own a producer (buffer.memory 32 MiB by default, so up to 256 MiB of
#: batches when the target is the bottleneck) and a consumer (up to 4 MiB per fetch), next to
#: Connect's own small state. 1 GiB leaves room for that without a GC spiral; the stock
#: ``connect-mirror-maker.sh`` allows 2 GiB, which would only let RSS grow further on this
#: benchmark's small machine. The GC flags are Kafka's stock ``kafka-run-class.sh`` ones, so
#: MM2 runs as shipped; a fast-start JIT (C1 only) is not used because it costs peak speed.
JVM_OPTIONS = (
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

#: log4j2 configuration (properties format: log4j-core reads it without extra jars; YAML
#: would need jackson-dataformat-yaml, which MM2 does not depend on). Warnings and errors,
#: plus MM2's own lifecycle lines (herder start, connector configuration, topic creation, each
#: task's partitions, stop), whose timestamps show where start-up and shutdown time goes.
#: Connect's INFO output (every client's full configuration, per task) stays out.
LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.mirror.name = org.apache.kafka.connect.mirror
logger.mirror.level = INFO
"""

_PLACEHOLDER = re.compile(r"\$\{([a-z][a-z.]*)\}")


# -- installation -------------------------------------------------------------------------
def mm2_dir() -> Path:
    """Where the MM2 jars of :data:`KAFKA_VERSION` live (next to the broker's install)."""
    return k2k_home() / f"mm2-{KAFKA_VERSION}"


def ensure_mm2_installed() -> Path:
    """Make sure the MM2 jars are installed and return their ``libs`` directory.

    ``bench/mm2/pom.xml`` resolved once by k2k's own Maven installer, with the Kafka version
    from :data:`k2k.local.KAFKA_VERSION` so MM2 always matches the brokers. The libs
    directory is a complete classpath of its own (MM2 never shares one with the broker's jars,
    so no jar can appear twice in two versions); jars the broker install already fetched come
    from ``~/.m2``, so nothing is downloaded twice.
    """
    find_java()  # fail before downloading if the jars could never run
    return maven_install(
        f"MirrorMaker 2 {KAFKA_VERSION}",
        (HERE / "pom.xml").read_text(encoding="utf-8"),
        mm2_dir(),
        {"kafka.version": KAFKA_VERSION},
        f"connect-mirror-{KAFKA_VERSION}.jar",
    )


# -- configuration --------------------------------------------------------------------------
def render_config(template: Path, values: Mapping[str, str]) -> str:
    """Fill the ``${name}`` placeholders of an MM2 properties template (comments stay as is).

    Strict both ways, so a typo in a template cannot silently reach MM2: a placeholder
    without a value is an error, and so is a value no placeholder uses. Connect's own
    ``${provider:path:key}`` references contain a colon and are left alone.
    """
    text = template.read_text(encoding="utf-8")
    used: set[str] = set()

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"{template.name}: no value for placeholder ${{{name}}}")
        used.add(name)
        return values[name]

    rendered = "".join(
        line if line.lstrip().startswith(("#", "!")) else _PLACEHOLDER.sub(fill, line)
        for line in text.splitlines(keepends=True)
    )
    unused = set(values) - used
    if unused:
        raise KeyError(f"{template.name}: no placeholder for {', '.join(sorted(unused))}")
    return rendered


def topic_regex(topic: str) -> str:
    """``topic`` as a Java regex that matches only itself, escaped for a properties value.

    MM2's ``topics`` is a list of regexes, so the ``.`` in a topic name would match any
    character; every character that is not a letter, digit or ``_`` gets a backslash, and
    each backslash is doubled because ``java.util.Properties`` reads ``\\x`` as ``x``.
    """
    escaped = "".join(c if c.isalnum() or c == "_" else "\\" + c for c in topic)
    return escaped.replace("\\", "\\\\")


def java_command(libs: Path, config: Path, log4j2: Path) -> list[str]:
    """The MM2 command line: ``java <options> -cp <libs>/* MirrorMaker <config> --clusters``.

    ``--clusters`` names only the target alias, so this node runs only the herders that
    write into the target (here: the one source->target flow).
    """
    return [
        find_java(),
        *JVM_OPTIONS,
        f"-Dlog4j2.configurationFile={log4j2}",
        "-cp",
        f"{libs}/*",
        MAIN_CLASS,
        str(config),
        "--clusters",
        TARGET_ALIAS,
    ]


# -- contenders ------------------------------------------------------------------------------
class MirrorMaker2AtLeastOnce(Contender):
    """MM2 dedicated mode, one flow source->target, one task per partition (of one topic:
    ``tasks.max`` is the partition count of a topic, also when a run copies many).

    :param refresh_topics_s: ``refresh.topics.interval.seconds`` of the flow, appended to the
        template's settings; None: MM2's default (10 minutes). The long W2 sets it to k2k's
        discovery interval, so that both find the topic it creates mid-run in the window.
    """

    key = "mm2"
    name = "MirrorMaker 2 at-least-once"
    template: ClassVar[str] = "mm2-at-least-once.properties"
    prefix_capable = True

    def __init__(self, refresh_topics_s: int | None = None) -> None:
        self.refresh_topics_s = refresh_topics_s

    def setup(self) -> None:
        """Fetch the MM2 jars before any cluster starts (a cold Maven cache takes a while)."""
        ensure_mm2_installed()

    @staticmethod
    def source_alias(run: str) -> str:
        """A per-run source alias: it names the target topic and MM2's internal state."""
        return f"mm{run}"

    def dest_topic(self, topic: str, run: str) -> str:
        """``<source alias>.<topic>``: DefaultReplicationPolicy's name, fresh for every run."""
        return f"{self.source_alias(run)}.{topic}"

    def config_values(self, ctx: Ctx) -> dict[str, str]:
        """The placeholder values of the template for this run."""
        return {
            "source.alias": self.source_alias(ctx.run),
            "target.alias": TARGET_ALIAS,
            "source.bootstrap": ctx.source,
            "target.bootstrap": ctx.target,
            # With ctx.prefix: every topic that starts with it (a Java regex, escaped).
            "topics": topic_regex(ctx.topic) + (".*" if ctx.prefix else ""),
            "tasks.max": str(ctx.partitions),
            "run": ctx.run,
        }

    def render(self, ctx: Ctx) -> str:
        """The run's properties file: the template filled in, plus the topic refresh
        interval when one is set."""
        text = render_config(HERE / self.template, self.config_values(ctx))
        if self.refresh_topics_s is not None:
            flow = f"{self.source_alias(ctx.run)}->{TARGET_ALIAS}"
            text += (
                "\n# -- set by the harness (bench/mm2.py) --\n"
                f"{flow}.refresh.topics.interval.seconds = {self.refresh_topics_s}\n"
            )
        return text

    def start(self, ctx: Ctx) -> None:
        """Write the run's config and log4j2 files into ``ctx.tmp`` and start the MM2 JVM."""
        expected = self.dest_topic(ctx.topic, ctx.run)
        if ctx.dest != expected:  # the copy lands where the replication policy puts it
            raise ValueError(f"MM2 writes {ctx.topic} to {expected}, not {ctx.dest}")
        libs = ensure_mm2_installed()
        ctx.tmp.mkdir(parents=True, exist_ok=True)
        config = ctx.tmp / f"mm2-{ctx.run}.properties"
        config.write_text(self.render(ctx))
        log4j2 = ctx.tmp / "mm2-log4j2.properties"
        log4j2.write_text(LOG4J2_PROPERTIES)
        with open(ctx.tmp / f"mm2-{ctx.run}.log", "wb") as log:  # the child keeps its own fd
            ctx.procs.append(
                subprocess.Popen(
                    java_command(libs, config, log4j2),
                    cwd=ctx.tmp,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )


class MirrorMaker2ExactlyOnce(MirrorMaker2AtLeastOnce):
    """MM2 with Connect's exactly-once source support (KIP-618), in dedicated mode with the
    internal REST server that multi-node dedicated clusters need for it (KIP-710).

    Records and source offsets commit in one transaction per task poll. Each commit leaves a
    transaction marker that takes an offset in every partition it wrote, so the target's end
    offsets run ahead of its record counts: count the copy with a ``read_committed`` consumer,
    not by comparing end offsets with the source's.
    """

    key = "mm2-eos"
    name = "MirrorMaker 2 exactly-once"
    guarantee = "exactly-once"
    template: ClassVar[str] = "mm2-exactly-once.properties"


# -- self-check -------------------------------------------------------------------------------
def _selfcheck(records: int, keys: list[str], keep: bool) -> int:
    """Run each variant against a fresh cluster pair and check the copy; 0 when all pass.

    Why a self-check and not a test: it needs the MM2 jars and two brokers and takes up to a
    minute per variant; it is run by hand after changing the templates. ``keep`` leaves the
    scratch directory (configs, MM2 logs) behind for reading.
    """
    contenders = [c() for c in (MirrorMaker2AtLeastOnce, MirrorMaker2ExactlyOnce) if c.key in keys]
    ensure_kafka_installed()
    t0 = time.monotonic()
    for contender in contenders:
        contender.setup()
    print(f"jars ready in {time.monotonic() - t0:.1f} s: {mm2_dir() / 'libs'}")
    failures = 0
    root = Path(tempfile.mkdtemp(prefix="k2k-mm2-check-"))
    try:
        pair = start_pair(root / "clusters", free_port(), free_port())
        try:
            topic = f"check-{uuid.uuid4().hex[:6]}"
            create_topic(pair.source.bootstrap, topic, 8)
            _load(pair.source.bootstrap, topic, records)
            expected = _read_all(pair.source.bootstrap, topic, 8, "read_committed")
            print(f"source {topic}: {sum(map(len, expected.values())):,} committed records")
            for contender in contenders:
                failures += _check_one(
                    contender, pair.source.bootstrap, pair.target.bootstrap, topic, expected, root
                )
        finally:
            pair.stop()
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print("ALL PASSED" if failures == 0 else f"{failures} FAILED")
    return 1 if failures else 0


def _load(bootstrap: str, topic: str, records: int) -> None:
    """Write ``records`` plain records around one aborted and one committed transaction.

    Keys (some null), 100-byte values, explicit timestamps and, on every 7th record, headers
    with repeated keys, an empty and a null value: everything MM2 must copy byte for byte.
    """

    rng = random.Random(7)
    base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago: clearly not MM2's clock
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})

    def write(producer: Producer, start: int, stop: int, tag: bytes) -> None:
        for i in range(start, stop):
            headers = None
            if i % 7 == 0:
                headers = [("h", b"x%d" % i), ("dup", b"1"), ("dup", b"2"), ("empty", b"")]
                if i % 14 == 0:
                    headers.append(("nil", None))
            value = tag + rng.randbytes(100 - len(tag))
            key = None if i % 11 == 0 else b"k%d" % i
            produce_when_room(producer, topic, value, key, i % 8, None, None, base_ts + i, headers)
        producer.flush(60)

    half = records // 2
    write(plain, 0, half, b"P")
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"check-{topic}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    write(txn, records, records + 800, b"ABORTED")
    txn.abort_transaction(30)
    txn.begin_transaction()
    write(txn, records + 800, records + 1600, b"COMMITTED")
    txn.commit_transaction(30)
    write(plain, half, records, b"P")


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, list]:
    """Every record of ``topic`` up to its current end, per partition, as comparable tuples."""

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    while len(at_end) < partitions and time.monotonic() < deadline:
        for m in c.consume(10_000, 0.5):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                continue
            out[m.partition()].append((m.key(), m.value(), m.timestamp(), m.headers()))
    c.close()
    if len(at_end) < partitions:
        raise TimeoutError(f"reading {topic} did not reach the end in 120 s")
    return out


def _check_one(
    contender: MirrorMaker2AtLeastOnce,
    source: str,
    target: str,
    topic: str,
    expected: dict[int, list],
    root: Path,
) -> int:
    """Run one variant and check counts, content, aborted records and the SIGTERM stop."""

    run = uuid.uuid4().hex[:6]
    dest = contender.dest_topic(topic, run)
    ctx = Ctx(source, target, topic, dest, 8, False, run, root / f"run-{contender.key}-{run}")
    want = {p: len(v) for p, v in expected.items()}
    print(f"\n== {contender.name} ({contender.key}) -> {dest}")
    problems: list[str] = []
    started = time.monotonic()
    contender.start(ctx)
    proc = ctx.procs[0]
    print("   " + " ".join(proc.args))
    late = _await_copy(proc, target, dest, want, run, started)
    problems += [late] if late else []
    problems += _stop(proc)
    if not late:
        problems += _check_content(target, dest, expected)
    log = ctx.tmp / f"mm2-{run}.log"
    errors = [line for line in log.read_text(errors="replace").splitlines() if " ERROR " in line]
    print(f"   log {log}: {len(errors)} ERROR lines")
    for line in errors[:5]:
        print(f"     {line[:240]}")
    for problem in problems:
        print(f"   FAIL: {problem}")
    return 1 if problems else 0


def _await_copy(
    proc: subprocess.Popen, target: str, dest: str, want: dict[int, int], run: str, started: float
) -> str | None:
    """Wait (up to 180 s from ``started``) for the topic MM2 creates, then count committed
    records as they arrive; None once every partition reached its count, else what is
    missing."""
    c = Consumer(
        {
            "bootstrap.servers": target,
            "group.id": f"check-{run}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    t_topic = t_first = t_done = None
    seen = dict.fromkeys(range(8), 0)
    deadline = started + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if t_topic is None:
            md = c.list_topics(dest, timeout=5).topics.get(dest)
            if md is None or md.error is not None or len(md.partitions) != 8:
                time.sleep(0.1)  # polling for the topic, not waiting blindly
                continue
            t_topic = time.monotonic()
            c.assign([TopicPartition(dest, p, 0) for p in range(8)])
        for m in c.consume(10_000, 0.2):
            if m.error() is None:
                seen[m.partition()] += 1
                t_first = t_first or time.monotonic()
        if seen == want:
            t_done = time.monotonic()
            break
    c.close()
    if t_done is None or t_topic is None or t_first is None:
        return f"not copied in time: {sum(seen.values()):,} of {sum(want.values()):,}"
    print(
        f"   target topic created after {t_topic - started:.1f} s, first record after "
        f"{t_first - started:.1f} s, all {sum(want.values()):,} after "
        f"{t_done - started:.1f} s (copy {t_done - t_first:.2f} s)"
    )
    return None


def _stop(proc: subprocess.Popen) -> list[str]:
    """Stop as the harness does (SIGTERM) and time the clean shutdown; what failed."""
    stop_at = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(60)
        print(f"   SIGTERM: exited with {code} after {time.monotonic() - stop_at:.1f} s")
        return []
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return ["did not exit within 60 s of SIGTERM (killed)"]


def _check_content(target: str, dest: str, expected: dict[int, list]) -> list[str]:
    """The copy's committed records equal ``expected`` partition by partition, and none of
    the aborted source transaction's records reached the target; what failed."""
    problems: list[str] = []
    got = _read_all(target, dest, 8, "read_committed")
    if got != expected:
        bad = [p for p in expected if got[p] != expected[p]]
        problems.append(
            f"content differs in partitions {bad} (counts {[len(got[p]) for p in bad]})"
        )
    raw = _read_all(target, dest, 8, "read_uncommitted")
    if any(v.startswith(b"ABORTED") for recs in raw.values() for _, v, _, _ in recs):
        problems.append("records of the aborted source transaction reached the target")
    extra = sum(map(len, raw.values())) - sum(map(len, expected.values()))
    print(f"   content identical: {got == expected}; read_uncommitted extra records: {extra}")
    return problems


def main() -> None:
    """Command line: ``--selfcheck`` runs :func:`_selfcheck`."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--selfcheck", action="store_true", help="copy a small topic with each variant")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--only", default="mm2,mm2-eos", help="variants to check (mm2, mm2-eos)")
    ap.add_argument("--keep", action="store_true", help="keep configs and MM2 logs")
    args = ap.parse_args()
    if not args.selfcheck:
        ap.print_help()
        return
    sys.exit(_selfcheck(args.records, args.only.split(","), args.keep))


if __name__ == "__main__":
    main()
