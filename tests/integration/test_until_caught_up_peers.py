"""``--until-caught-up`` next to a peer instance that died and is still inside its grace window.

A run whose own share of the partitions is already at its end must not exit while another
member's partitions are not: it waits until that member is gone (or finishes), takes its
partitions over, and copies them. Found by the SIGKILL chaos drill, whose final run started
seconds after the last kill and exited with half the partitions short.
"""

from __future__ import annotations

import pytest

from k2k.config.loader import deep_merge
from k2k.errors import K2KError
from tests.helpers.eos import assert_exact, eos_pipeline
from tests.helpers.kafka import create_topic, eventually, produce
from tests.helpers.pipelines import committed_progress, k2k_cli, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

#: Partitions 1 and 3 are small; 0 and 2 hold a backlog the slowed first instance cannot
#: finish. With members ("a", "b"), "b"'s share is partitions 1 and 3 (round robin).
SMALL, LARGE = 20, 10_000
#: Longer than the second instance's start-up, so it plans while "a" still counts as alive.
GRACE = "30 seconds"


def _load(source: str, topic: str) -> None:
    records = [
        (p, f"{p}-{i:06d}", f"value {p} {i}", None, None)
        for p in range(4)
        for i in range(LARGE if p % 2 == 0 else SMALL)
    ]
    # One record per batch: a fetch of at most 512 bytes a partition then returns a few
    # records (a broker sends a whole first batch, however large).
    produce(source, topic, records, **{"batch.num.messages": 1, "linger.ms": 0})


def test_a_caught_up_share_waits_for_a_dead_peer_s_partitions(clusters, tmp_path, topic_name):
    t = topic_name("peer")
    name = topic_name("ppeer")
    create_topic(clusters.source, t, 4)
    _load(clusters.source, t)
    coordination = {"assignment": {"topic": f"__k2k_assignment-{name}", "graceWindow": GRACE}}
    doc = eos_pipeline(clusters, name, [t], coordination=coordination)
    # Instance "a" reads in tiny fetches: it finishes the small partitions at once and is
    # still deep in the large ones when it is killed.
    slow = {"source": {"kafka": {"consumer": {"max.partition.fetch.bytes": "512"}}}}
    path_a = write_pipeline(tmp_path, deep_merge(doc, slow), "a.yaml")
    path_b = write_pipeline(tmp_path, doc, "b.yaml")
    commit_topic = doc["coordination"]["commit"]["topic"]

    def progress() -> dict[int, int]:
        try:
            return {
                p: o
                for (_, p), o in committed_progress(clusters.target, commit_topic, name).items()
            }
        except K2KError:  # the commit topic does not exist yet
            return {}

    a = K2KProcess(path_a, tmp_path / "a.log", "--instance", "a")
    try:
        eventually(
            lambda: (lambda c: c.get(1, 0) >= SMALL and c.get(3, 0) >= SMALL)(progress()),
            expected=True,
            timeout=120,
            interval=0.2,
        )
    finally:
        a.kill()
    before = progress()
    assert before.get(0, 0) < LARGE and before.get(2, 0) < LARGE, before

    result = k2k_cli(
        "start", "--until-caught-up", "--instance", "b", "-f", str(path_b), timeout=240
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert assert_exact(clusters.source, clusters.target, t) == 2 * LARGE + 2 * SMALL
    assert all(o >= (LARGE if p % 2 == 0 else SMALL) for p, o in progress().items()), progress()
