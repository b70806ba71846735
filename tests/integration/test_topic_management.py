"""Target topic configs as MirrorMaker 2 manages them (docs/operations.md#topic-management).

* A created target topic carries the source topic's own configs through the property filter
  (``topicCreation.replicated.configExclusions``, MM2's default exclusions): an excluded
  property is not copied, an allowed one is, and ``configs`` overrides apply.
* While a pipeline runs, source config changes reach the target within
  ``configSyncInterval``: changed values set, a dropped config removed, excluded ones (and
  the operator's values of them on the target) untouched; records keep flowing.
* On brokers with an authorizer, the source topic's literal ACLs reach the target topic as
  MM2 copies them, minus anything that grants writing: ALLOW ALL becomes READ, WRITE and
  ALTER are dropped, DENY is kept; prefixed ACLs and other topics' are not copied.

Partition growth without a restart is covered by
test_topic_lifecycle.py::test_running_pipeline_follows_growth_deletion_and_recreation.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)

from k2k.errors import K2KError
from k2k.local import LocalCluster, free_port
from tests.helpers.kafka import create_topic, end_offsets, eventually, produce, read_all
from tests.helpers.pipelines import BASE_TS, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess

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


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory):
    """One broker with KRaft's StandardAuthorizer; the tests' clients are ANONYMOUS, a super
    user, so ACLs for other principals are data to copy, not restrictions on the test. Source
    and target at once (topics routed to ``copy.<name>``): one broker is half the cost."""
    overrides = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    cluster = LocalCluster(
        "acl",
        free_port(),
        tmp_path_factory.mktemp("acl"),
        broker_overrides=overrides,
        owner_pid=os.getpid(),
    )
    cluster.start(timeout=120)
    try:
        yield cluster.bootstrap
    finally:
        cluster.stop()


def _acl(topic: str, principal: str, op, permission=AclPermissionType.ALLOW, **kw) -> AclBinding:
    pattern = kw.get("pattern", ResourcePatternType.LITERAL)
    return AclBinding(
        ResourceType.TOPIC, topic, pattern, principal, kw.get("host", "*"), op, permission
    )


def _topic_acls(bootstrap: str, topic: str) -> set[AclBinding]:
    any_acl = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.describe_acls(any_acl, request_timeout=30).result())


def _create_acls(bootstrap: str, bindings: list[AclBinding]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()


def test_topic_acls_are_synced_read_only_on_brokers_with_an_authorizer(
    acl_cluster, tmp_path, topic_name
):
    """One ``k2k start`` routing ``t`` to ``copy.t`` with ``aclSyncInterval: 2 seconds``:
    the copied ACLs are exactly the reading ones (ALL as READ) and the DENY; an ACL added to
    the source topic while running follows; the source's ACLs are unchanged."""
    t, other = topic_name("acl"), topic_name("aclother")
    target = f"copy.{t}"
    create_topic(acl_cluster, t, 2)
    produce(acl_cluster, t, _records(0, 50))
    source_acls = [
        _acl(t, "User:alice", AclOperation.READ),
        _acl(t, "User:bob", AclOperation.ALL),
        _acl(t, "User:carol", AclOperation.WRITE),
        _acl(t, "User:hank", AclOperation.ALTER),
        _acl(t, "User:dave", AclOperation.READ, AclPermissionType.DENY),
        _acl(t, "User:erin", AclOperation.DESCRIBE, host="10.0.0.1"),
        _acl(t[:-2], "User:frank", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        _acl(other, "User:gina", AclOperation.READ),
    ]
    _create_acls(acl_cluster, source_acls)
    doc = pipeline_dict(
        SimpleNamespace(source=acl_cluster, target=acl_cluster),
        topic_name("pacl"),
        [t],
        topicCreation={"replicated": {"aclSyncInterval": "2 seconds"}},
    )
    doc["replication"][0]["source"]["discoveryInterval"] = "1 second"
    doc["replication"][1]["sink"]["topic"] = {"prefix": "copy."}
    before = _topic_acls(acl_cluster, t)
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log")
    try:
        expected = {
            _acl(target, "User:alice", AclOperation.READ),
            _acl(target, "User:bob", AclOperation.READ),
            _acl(target, "User:dave", AclOperation.READ, AclPermissionType.DENY),
            _acl(target, "User:erin", AclOperation.DESCRIBE, host="10.0.0.1"),
        }
        eventually(lambda: _topic_acls(acl_cluster, target), expected, 120, 0.5)
        _create_acls(acl_cluster, [_acl(t, "User:ivan", AclOperation.DESCRIBE_CONFIGS)])
        expected.add(_acl(target, "User:ivan", AclOperation.DESCRIBE_CONFIGS))
        eventually(lambda: _topic_acls(acl_cluster, target), expected, 60, 0.5)
        src = _contents(acl_cluster, t)
        eventually(lambda: _contents(acl_cluster, target), src, 60, 0.5, (K2KError,))
        assert "synced topic ACL to the target: ALLOW READ on topic " + target in proc.output()
    finally:
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]
    assert _topic_acls(acl_cluster, t) - before == {
        _acl(t, "User:ivan", AclOperation.DESCRIBE_CONFIGS)
    }


def test_a_target_without_authorizer_skips_acl_sync_once_and_replicates(
    acl_cluster, clusters, tmp_path, topic_name
):
    """Source ACLs, a target cluster without an authorizer: the sync is said once to be
    skipped, never fails the pipeline, and the records arrive."""
    t = topic_name("aclnoauth")
    create_topic(acl_cluster, t, 2)
    produce(acl_cluster, t, _records(0, 40))
    _create_acls(acl_cluster, [_acl(t, "User:alice", AclOperation.READ)])
    doc = pipeline_dict(
        SimpleNamespace(source=acl_cluster, target=clusters.target),
        topic_name("paclnoauth"),
        [t],
        topicCreation={"replicated": {"aclSyncInterval": "1 second"}},
    )
    doc["replication"][0]["source"]["discoveryInterval"] = "1 second"
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log")
    skipped = "topic ACL sync skipped: the target cluster has no authorizer"
    try:
        src = _contents(acl_cluster, t)
        eventually(lambda: _contents(clusters.target, t), src, 120, 0.5, (K2KError,))
        eventually(lambda: skipped in proc.output(), True, 60, 0.5)
        produce(acl_cluster, t, _records(40, 20))
        src = _contents(acl_cluster, t)
        eventually(lambda: _contents(clusters.target, t), src, 60, 0.5)  # syncs ran meanwhile
    finally:
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]
    assert proc.output().count(skipped) == 1
    assert "topic ACL sync failed" not in proc.output()
