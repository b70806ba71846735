"""MirrorMaker 2's ``sync.group.offsets.enabled`` run by ``k2k start --mm2``: groups consumed
on the source stand at their exact translated positions on the target within two intervals
of moving, and a group with members on the target is skipped and logged, not failed; the
Offset Mapping app runs the same file (``k2k offset-mapping start --mm2``)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.helpers.groups import failover_reads, target_commits
from tests.helpers.kafka import create_topic, eventually, produce
from tests.helpers.pipelines import BASE_TS, k2k_cli
from tests.helpers.procs import K2KProcess
from tests.integration.test_mm2_start import _commit

pytestmark = pytest.mark.integration

INTERVAL_S = 3


def _properties(source: str, target: str, alias: str, topic: str) -> str:
    return f"""\
clusters = {alias}, backup
{alias}.bootstrap.servers = {source}
backup.bootstrap.servers = {target}
{alias}->backup.enabled = true
{alias}->backup.topics = {topic}
emit.heartbeats.enabled = false
emit.checkpoints.enabled = false
sync.group.offsets.enabled = true
sync.group.offsets.interval.seconds = {INTERVAL_S}
"""


def _member(bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
    """A consumer of ``group`` on the target that stays a member until ``stop``."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            consumer.poll(0.2)
    finally:
        consumer.close()


def test_mm2_group_offset_sync_moves_idle_groups_and_skips_active_ones(
    clusters, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    alias, topic = f"gs_{run}", f"group-sync-{run}"
    remote = f"{alias}.{topic}"
    create_topic(clusters.source, topic, 3)
    create_topic(clusters.target, remote, 3)
    produce(
        clusters.source,
        topic,
        [(i % 3, b"k%d" % i, b"v%d" % i, [], BASE_TS + i) for i in range(300)],
    )
    idle, active = f"app-{run}", f"live-{run}"
    first = {0: 40, 1: 100, 2: 7}
    _commit(clusters.source, idle, topic, first)
    _commit(clusters.source, active, topic, {0: 50, 1: 50, 2: 50})
    path = tmp_path / "mm2.properties"
    path.write_text(_properties(clusters.source, clusters.target, alias, topic))
    stop = threading.Event()
    member = threading.Thread(target=_member, args=(clusters.target, active, remote, stop))
    member.start()
    proc = K2KProcess(path, tmp_path / "k2k.log", flag="--mm2")
    try:
        expected = {(remote, p): o for p, o in first.items()}  # a fresh target: same offsets
        eventually(lambda: target_commits(clusters.target, idle), expected=expected, timeout=120)
        # The application reads on: its new positions reach the target within two intervals.
        moved = {0: 90, 1: 100, 2: 60}
        _commit(clusters.source, idle, topic, moved)
        committed_at = time.monotonic()
        expected = {(remote, p): o for p, o in moved.items()}
        eventually(lambda: target_commits(clusters.target, idle), expected=expected, timeout=60)
        assert time.monotonic() - committed_at <= 2 * INTERVAL_S + 2
        positions = {(topic, p): o for p, o in moved.items()}
        rename = lambda t: f"{alias}.{t}"  # noqa: E731
        assert failover_reads(clusters, idle, positions, rename)[1:] == (0, 0)
        # The group with a member on the target is left alone, and said so.
        assert target_commits(clusters.target, active) == {}
        eventually(
            lambda: f"target group '{active}' has" in proc.output(), expected=True, timeout=30
        )
    finally:
        stop.set()
        member.join()
        assert proc.stop() == 0, proc.output()[-3000:]
    assert "Traceback" not in proc.output()
    # The Offset Mapping app reads the same file: one pass moves the group again.
    _commit(clusters.source, idle, topic, {0: 100, 1: 100, 2: 100})
    done = k2k_cli("offset-mapping", "start", "--mm2", str(path), "--once")
    assert done.returncode == 0, done.stderr[-2000:]
    expected = {(remote, p): 100 for p in range(3)}
    assert target_commits(clusters.target, idle) == expected
    # The other group's consumers have stopped: now it moves too.
    assert target_commits(clusters.target, active) == {(remote, p): 50 for p in range(3)}
