"""Time from ``k2k start`` to the first copied record, over many source topics.

    .venv/bin/python -m bench.start_many_topics --source 127.0.0.1:19092 \\
        --target 127.0.0.1:29092 --topics 1000 --partitions 8 [--python PY ...]

Creates ``--topics`` source topics of ``--partitions`` partitions (one request), waits until
every partition has a leader, writes one record into partition 0 of each, then starts
``k2k start`` with each ``--python`` in turn (a k2k build: another checkout's interpreter,
or one with ``PYTHONPATH`` at another source tree) and reports how long each took to put
the first record on the target. Between builds the target topics are deleted and the
brokers given time to drop their files, so every build creates them afresh. Everything the
run created is deleted at the end. Figures: docs/benchmarks.md (issue 47).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

#: Brokers delete a deleted topic's files this long after the topic (file.delete.delay.ms).
_FILE_DELETE_DELAY_S = 65


def main() -> None:
    args = _arguments()
    source = AdminClient({"bootstrap.servers": args.source})
    target = AdminClient({"bootstrap.servers": args.target})
    stem = f"start-{uuid.uuid4().hex[:6]}"
    names = [f"{stem}-{i:04d}" for i in range(args.topics)]
    try:
        took = _source_topics(source, args.source, names, args.partitions)
        print(f"source topics ready after {took:.1f} s", flush=True)
        for python in args.python or [sys.executable]:
            group = f"{stem}-{uuid.uuid4().hex[:4]}"
            first = _first_record(args, python, stem, group, target, names)
            print(f"{python}: first record after {first:.1f} s", flush=True)
            _delete(target, [*names, f"__k2k_progress-{group}"])
            time.sleep(_FILE_DELETE_DELAY_S)  # the next build creates on a broker at rest
    finally:
        _delete(source, names)
        _delete(target, names)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="source bootstrap.servers")
    parser.add_argument("--target", required=True, help="target bootstrap.servers")
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--python", action="append", help="a k2k build's interpreter")
    return parser.parse_args()


def _source_topics(admin: AdminClient, bootstrap: str, names: list[str], partitions: int) -> float:
    """Create the source topics, wait for every leader, write one record per topic."""
    started = time.monotonic()
    new = [NewTopic(name, partitions, -1) for name in names]
    for future in admin.create_topics(new, request_timeout=120).values():
        future.result()
    _wait_for_leaders(admin, [TopicPartition(n, p) for n in names for p in range(partitions)])
    producer = Producer({"bootstrap.servers": bootstrap})
    for name in names:
        producer.produce(name, b"v", b"k", partition=0)
    if producer.flush(120) != 0:
        raise SystemExit("bench: the source did not take the records within 120 s")
    return time.monotonic() - started


def _wait_for_leaders(admin: AdminClient, partitions: list[TopicPartition]) -> None:
    pending = set(partitions)
    while pending:
        request = {tp: OffsetSpec.latest() for tp in pending}
        for tp, future in admin.list_offsets(request, request_timeout=60).items():
            if future.exception() is None:
                pending.discard(tp)
        time.sleep(0.5)  # the brokers create the partitions' logs meanwhile


def _first_record(
    args: argparse.Namespace,
    python: str,
    stem: str,
    group: str,
    target: AdminClient,
    names: list[str],
) -> float:
    """Start one build and return the seconds until a record shows on the target."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pipeline.yaml"
        path.write_text(yaml.safe_dump(_pipeline(args, stem, group)))
        log = Path(tmp) / "k2k.log"
        with log.open("wb") as out:
            started = time.monotonic()
            proc = subprocess.Popen(
                [python, "-m", "k2k", "start", "-f", str(path)], stdout=out, stderr=out
            )
            try:
                return _until_a_record(target, names, proc, started)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(120)


def _until_a_record(
    target: AdminClient, names: list[str], proc: subprocess.Popen, started: float
) -> float:
    probe = {TopicPartition(name, 0): OffsetSpec.latest() for name in names}
    while proc.poll() is None:
        shown = target.list_topics(timeout=30).topics
        request = {tp: spec for tp, spec in probe.items() if tp.topic in shown}
        if request:
            for future in target.list_offsets(request, request_timeout=30).values():
                if future.exception() is None and future.result().offset > 0:
                    return time.monotonic() - started
        time.sleep(0.2)  # the probe's interval
    raise SystemExit(f"bench: k2k start exited with {proc.returncode} before copying a record")


def _pipeline(args: argparse.Namespace, stem: str, group: str) -> dict:
    return {
        "name": group,
        "features": {"autoCreateTopics": "enabled", "autoCreateControlTopics": "enabled"},
        "source": {"kafka": {"common": {"bootstrap.servers": args.source}}},
        "target": {"kafka": {"common": {"bootstrap.servers": args.target}}},
        "replication": [
            {"source": {"name": "source", "topic": f"{stem}-\\d+"}},
            {"sink": {"name": "sink", "topic": "source", "partition": "source"}},
        ],
        "coordination": {"commit": {"topic": f"__k2k_progress-{group}"}},
        "spark": {"master": "local[2]"},
    }


def _delete(admin: AdminClient, names: list[str]) -> None:
    existing = set(admin.list_topics(timeout=30).topics)
    doomed = [name for name in names if name in existing]
    if doomed:
        for future in admin.delete_topics(doomed, request_timeout=120).values():
            future.exception()  # one gone already is fine


if __name__ == "__main__":
    main()
