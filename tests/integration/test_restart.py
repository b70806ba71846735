"""Crash and restart: kill -9 mid-run loses nothing; duplicates only from uncommitted batches."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from tests.helpers.kafka import create_topic, end_offsets, eventually, produce, read_all
from tests.helpers.pipelines import (
    BASE_TS,
    K2K,
    committed_progress,
    k2k_cli,
    pipeline_dict,
    write_pipeline,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
TOTAL = 120_000


def _source_offsets(rec) -> int:
    return int(dict(rec.headers)["k2k_offset"])


def _writes_settle(bootstrap: str, topic: str, quiet_s: float = 2.0) -> float:
    """Seconds until ``topic``'s end offsets stop moving for ``quiet_s``: a killed run's
    Python workers may outlive its driver briefly (docs/spark.md#when-the-driver-dies)."""
    started = time.monotonic()
    last, last_change = end_offsets(bootstrap, topic, "read_uncommitted"), time.monotonic()
    while time.monotonic() - last_change < quiet_s:
        time.sleep(0.1)  # the poll interval
        now = end_offsets(bootstrap, topic, "read_uncommitted")
        if now != last:
            last, last_change = now, time.monotonic()
    return last_change - started


def test_kill_9_mid_run_then_restart_loses_nothing(clusters, tmp_path, topic_name):
    t = topic_name("crash")
    name = topic_name("pcrash")
    create_topic(clusters.source, t, PARTITIONS)
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        features={"tracingHeaders": {"offset": "enabled"}},
        coordination={
            "commit": {
                "topic": f"__k2k_progress-{name}",
                "batchSize": 500,
                "batchTimeout": "100 milliseconds",
            }
        },
    )
    path = write_pipeline(tmp_path, doc)
    commit_topic = doc["coordination"]["commit"]["topic"]

    # A producer writes steadily while the replicator runs, so the kill lands mid-stream.
    def steady_producer() -> None:
        for chunk in range(60):
            base = chunk * (TOTAL // 60)
            produce(
                clusters.source,
                t,
                [
                    (i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [], BASE_TS + i)
                    for i in range(base, base + TOTAL // 60)
                ],
            )
            time.sleep(0.05)  # pacing the load generator, not synchronisation

    writer = threading.Thread(target=steady_producer)
    writer.start()
    proc = subprocess.Popen(
        [*K2K, "start", "-f", str(path)],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        eventually(
            lambda: sum(committed_progress(clusters.target, commit_topic, name).values()) > 10_000,
            expected=True,
            timeout=120,
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers at once
        proc.wait(30)
    writer.join()
    # The killed run's workers stop writing within a couple of seconds of their driver.
    assert _writes_settle(clusters.target, t) < 5.0
    at_kill = committed_progress(clusters.target, commit_topic, name)
    written_before_restart = {
        p: [_source_offsets(r) for r in recs] for p, recs in read_all(clusters.target, t).items()
    }

    result = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert result.returncode == 0, result.stderr

    src = read_all(clusters.source, t)
    dst = read_all(clusters.target, t)
    total_dups = 0
    for p in range(PARTITIONS):
        offsets = [_source_offsets(r) for r in dst[p]]
        # No loss: every source record is on the target.
        assert set(offsets) == {r.offset for r in src[p]}
        # Order: one ascending run, then (after the restart) a second ascending run that
        # starts exactly at the progress committed before the kill.
        before = written_before_restart.get(p, [])
        assert offsets[: len(before)] == before == sorted(before)
        after = offsets[len(before) :]
        assert after == sorted(after)
        restart_at = at_kill.get((t, p), 0)
        if after:
            assert after[0] == restart_at or (not before and after[0] == 0)
        # Duplicates are only records at or past the committed progress (uncommitted batches).
        dups = [o for o in after if o in set(before)]
        assert all(o >= restart_at for o in dups)
        assert dups == list(range(restart_at, restart_at + len(dups)))
        total_dups += len(dups)
        # Content is the source's, record for record (key, value) in source-offset order.
        by_offset = {r.offset: (r.key, r.value) for r in src[p]}
        assert all((r.key, r.value) == by_offset[_source_offsets(r)] for r in dst[p])
    print(
        f"kill -9 restart: {sum(len(v) for v in src.values())} source records, {total_dups} duplicates"
    )


@pytest.mark.parametrize(
    "how",
    ["sigterm-to-process", "ctrl-c-to-process-group"],
)
def test_signal_stops_cleanly_and_commits_everything(clusters, tmp_path, topic_name, how):
    """SIGTERM (an orchestrator) and Ctrl-C (SIGINT to the terminal's whole process group,
    Spark's JVM and Python workers included) both end with committed progress and exit 0."""
    t = topic_name("term")
    name = topic_name("pterm")
    create_topic(clusters.source, t, 2)
    produce(
        clusters.source,
        t,
        [(i % 2, b"k", f"v{i}".encode(), [], BASE_TS + i) for i in range(5000)],
    )
    path = write_pipeline(tmp_path, pipeline_dict(clusters, name, [t]))
    proc = subprocess.Popen(
        [*K2K, "start", "-f", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        eventually(
            lambda: sum(len(v) for v in read_all(clusters.target, t, timeout=5).values()),
            expected=5000,
            timeout=120,
        )
        started = time.monotonic()
        if how == "sigterm-to-process":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert time.monotonic() - started < 30
    commit_topic = f"__k2k_progress-{name}"
    assert committed_progress(clusters.target, commit_topic, name) == {(t, 0): 2500, (t, 1): 2500}
    assert "Traceback" not in err
