"""Target topic configs as MirrorMaker 2 manages them (docs/operations.md#topic-management).

* A created target topic carries the source topic's own configs through the property filter
  (``topicCreation.replicated.configExclusions``, MM2's default exclusions): an excluded
  property is not copied, an allowed one is, and ``configs`` overrides apply.
* While a pipeline runs, source config changes reach the target within
  ``configSyncInterval``: changed values set, a dropped config removed, excluded ones (and
  the operator's values of them on the target) untouched; records keep flowing.

Partition growth without a restart is covered by
test_topic_lifecycle.py::test_running_pipeline_follows_growth_deletion_and_recreation.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from k2k.errors import K2KError
from tests.integration.conftest import BASE_TS, pipeline_dict, write_pipeline
from tests.integration.procs import K2KProcess
from tests.kafkautil import create_topic, end_offsets, eventually, produce, read_all

pytestmark = pytest.mark.integration


def _own_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The configs the topic sets itself (what a copy of it carries)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=30)[resource].result()
    return {
        n: e.value
        for n, e in entries.items()
        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None
    }


def _alter(bootstrap: str, topic: str, sets: dict[str, str], deletes: tuple[str, ...] = ()):
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()
    ]
    entries += [
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes
    ]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource], request_timeout=30)[resource].result()


def _records(first: int, count: int) -> list:
    return [
        (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("h", f"{i}".encode())], BASE_TS + i)
        for i in range(first, first + count)
    ]


def _contents(bootstrap: str, topic: str) -> dict[int, list]:
    return {p: [r.content() for r in recs] for p, recs in read_all(bootstrap, topic).items()}


def test_created_topic_is_filtered_and_configs_follow_the_source_while_running(
    clusters, tmp_path, topic_name
):
    """One ``k2k start`` with ``configSyncInterval: 2 seconds``:

    1. the target topic is created with ``retention.ms`` and ``segment.ms`` (allowed) and the
       ``configs`` override, without ``min.insync.replicas`` and ``message.timestamp.type``
       (MM2's default exclusions);
    2. the operator sets ``min.insync.replicas`` on the target topic by hand;
    3. on the source, ``retention.ms`` changes, ``max.message.bytes`` is added, ``segment.ms``
       dropped and ``unclean.leader.election.enable`` (excluded) set: the target follows the
       first three only and keeps the operator's ``min.insync.replicas``, the override stays,
       and the records written meanwhile arrive, in order, without a new lease.
    """
    t = topic_name("tmgmt")
    source_own = {
        "retention.ms": "86400000",
        "segment.ms": "3600000",
        "min.insync.replicas": "1",
        "message.timestamp.type": "LogAppendTime",
    }
    create_topic(clusters.source, t, 2, source_own)
    produce(clusters.source, t, _records(0, 100))
    doc = pipeline_dict(
        clusters,
        topic_name("ptmgmt"),
        [t],
        topicCreation={
            "replicated": {
                "configs": {"cleanup.policy": "delete"},
                "configSyncInterval": "2 seconds",
            }
        },
    )
    doc["replication"][0]["source"]["discoveryInterval"] = "1 second"
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log")
    try:
        # 1. Creation through the filter.
        src = _contents(clusters.source, t)
        eventually(lambda: _contents(clusters.target, t), src, 120, 0.5, (K2KError,))
        created = {"retention.ms": "86400000", "segment.ms": "3600000", "cleanup.policy": "delete"}
        assert _own_configs(clusters.target, t) == created

        # 2 and 3. The operator's excluded value on the target; changes on the source.
        _alter(clusters.target, t, {"min.insync.replicas": "1"})
        _alter(
            clusters.source,
            t,
            {
                "retention.ms": "7200000",
                "max.message.bytes": "2000000",
                "unclean.leader.election.enable": "true",
            },
            deletes=("segment.ms",),
        )
        produce(clusters.source, t, _records(100, 60))
        synced = {
            "retention.ms": "7200000",
            "max.message.bytes": "2000000",
            "cleanup.policy": "delete",
            "min.insync.replicas": "1",
        }
        eventually(lambda: _own_configs(clusters.target, t), synced, 60, 0.5)
        src = _contents(clusters.source, t)
        assert [len(src[p]) for p in (0, 1)] == [80, 80]
        eventually(lambda: _contents(clusters.target, t), src, 60, 0.5)
        assert end_offsets(clusters.target, t) == {0: 80, 1: 80}
        output = proc.output()
        assert f"synced configs of target topic {t} from source topic {t}: set " in output
        assert "removed segment.ms" in output
        assert "starting a new lease" not in output  # a config change needs no new lease
    finally:
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]
    assert "Traceback" not in proc.output()
