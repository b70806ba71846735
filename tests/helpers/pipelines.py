"""Pipelines for the test clusters: their files, in-process and command-line runs, and the
progress they commit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from k2k.config import load_pipeline
from k2k.config.loader import deep_merge
from k2k.coordination.progress import ProgressStore
from k2k.errors import K2KError
from k2k.observability.stats import PipelineStats
from k2k.pipeline.driver.planner import Planner
from tests.helpers.kafka import eventually, read_all

K2K = [sys.executable, "-m", "k2k"]

#: Record timestamps for tests: an hour ago. Never a fixed date: brokers delete records
#: older than their retention (7 days by default) within ~30 s of starting.
BASE_TS = int(time.time() * 1000) - 3_600_000

Positions = dict[tuple[str, int], int]
"""Committed progress: (topic, partition) -> the next offset to copy."""

Progress = Mapping[tuple[str, int], int] | Callable[[Positions], bool]
"""Progress to wait for: exact positions, or a condition on all positions committed."""


def pipeline_dict(clusters, name: str, topic: Any, **sections: Any) -> dict[str, Any]:
    """A K2K-layout pipeline for the test clusters; ``sections`` deep-update it."""
    doc: dict[str, Any] = {
        "name": name,
        "features": {
            "autoCreateTopics": "enabled",
            "autoCreateControlTopics": "enabled",
            "headerReplication": "enabled",
        },
        "source": {"kafka": {"common": {"bootstrap.servers": clusters.source}}},
        "target": {"kafka": {"common": {"bootstrap.servers": clusters.target}}},
        "replication": [
            {"source": {"name": "source", "topic": topic}},
            {"sink": {"name": "sink", "topic": "source", "partition": "source"}},
        ],
        "coordination": {
            "commit": {"topic": f"__k2k_progress-{name}", "batchTimeout": "200 milliseconds"}
        },
        "spark": {"master": "local[2]", "leaseDuration": "60 seconds"},
    }
    return deep_merge(doc, sections)


def latest_progress(target: str, doc: dict[str, Any]) -> dict[tuple[str, int], Any]:
    """The newest committed progress record of ``doc``'s pipeline per source partition."""
    store = ProgressStore(
        {"bootstrap.servers": target},
        doc["coordination"]["commit"]["topic"],
        doc["name"],
        sync_timeout_s=30,
        on_sync_timeout="fail",
        on_bad_record="fail",
    )
    try:
        return store.load()
    finally:
        store.close()


def write_pipeline(tmp_path: Path, doc: dict[str, Any], name: str = "pipeline.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_until_caught_up(spark, tmp_path: Path, doc: dict[str, Any]) -> PipelineStats:
    """Run the pipeline in-process on the shared Spark session until caught up."""
    cfg = load_pipeline([write_pipeline(tmp_path, doc)])
    return Planner(cfg, until_caught_up=True, spark=spark).run()


def k2k_cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the real ``k2k`` CLI in a subprocess (its own Spark driver)."""
    return subprocess.run(
        [*K2K, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def committed_progress(target: str, topic: str, group: str) -> dict[tuple[str, int], int]:
    """The progress recorded under ``group`` in ``topic`` on ``target``: partition -> offset."""
    store = ProgressStore(
        {"bootstrap.servers": target},
        topic,
        group,
        sync_timeout_s=30,
        on_sync_timeout="fail",
        on_bad_record="fail",
    )
    try:
        return {tp: rec.offset for tp, rec in store.load().items()}
    finally:
        store.close()


def committed_total(target: str, topic: str, group: str) -> int:
    """The sum of ``group``'s committed positions (0 before its commit topic exists): a
    number that grows with every commit."""
    try:
        return sum(committed_progress(target, topic, group).values())
    except K2KError:  # no run has created the commit topic yet
        return 0


def wait_progress_past(source: str, target: str, topic: str, name: str) -> None:
    """Wait until pipeline ``name`` (progress on ``target``) committed past every record of
    ``topic`` on ``source`` as it is now: anything it would copy back is visible after."""
    past = {(topic, p): recs[-1].offset + 1 for p, recs in read_all(source, topic).items()}
    eventually(
        lambda: all(
            committed_progress(target, f"__k2k_progress-{name}", name).get(tp, 0) >= o
            for tp, o in past.items()
        ),
        expected=True,
        timeout=120,
    )


def wait_for_progress(path: Path, progress: Progress, timeout: float = 180) -> None:
    """Wait until the pipeline in file ``path`` committed ``progress``: for a mapping, its
    positions of the topics the mapping names are exactly those; for a condition, it holds.
    A progress topic not created yet counts as "not yet"."""
    doc = yaml.safe_load(path.read_text())
    target = doc["target"]["kafka"]["common"]["bootstrap.servers"]
    topic, group = doc["coordination"]["commit"]["topic"], doc["name"]

    def committed() -> Positions:
        return committed_progress(target, topic, group)

    if callable(progress):
        condition = progress
        eventually(lambda: condition(committed()), True, timeout, 0.5, (K2KError,))
        return
    expected = dict(progress)
    topics = {t for t, _ in expected}

    def of_those_topics() -> Positions:
        return {tp: offset for tp, offset in committed().items() if tp[0] in topics}

    eventually(of_those_topics, expected, timeout, 0.5, (K2KError,))
