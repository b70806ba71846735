"""Which source topic ACL becomes which target topic ACL (k2k.pipeline.driver.services.aclsync)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from k2k.pipeline.driver.services.aclsync import TopicAclSync, target_binding

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def _acl(topic: str, op: AclOperation, permission: AclPermissionType = ALLOW) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:u", "*", op, permission
    )


@pytest.mark.parametrize(
    ("op", "permission", "copied"),
    [
        (AclOperation.READ, ALLOW, AclOperation.READ),
        (AclOperation.DESCRIBE, ALLOW, AclOperation.DESCRIBE),
        (AclOperation.DESCRIBE_CONFIGS, ALLOW, AclOperation.DESCRIBE_CONFIGS),
        (AclOperation.ALL, ALLOW, AclOperation.READ),  # MM2's downgrade
        (AclOperation.WRITE, ALLOW, None),  # only k2k writes target topics
        (AclOperation.ALTER, ALLOW, None),
        (AclOperation.ALTER_CONFIGS, ALLOW, None),
        (AclOperation.DELETE, ALLOW, None),
        (AclOperation.WRITE, DENY, AclOperation.WRITE),  # a DENY grants nothing
        (AclOperation.ALL, DENY, AclOperation.ALL),
    ],
)
def test_target_binding_grants_reading_only(op, permission, copied):
    got = target_binding(_acl("orders", op, permission), "eu.orders")
    assert got == (None if copied is None else _acl("eu.orders", copied, permission))


class _Cluster:
    def __init__(self, acls: list[AclBinding] | None) -> None:
        self.acls, self.created = acls, []
        self.answering = True

    def literal_topic_acls(self) -> list[AclBinding] | None:
        return self.acls

    def create_acls(self, bindings) -> bool:
        if self.acls is None:
            return False  # no authorizer
        self.created.extend(bindings)
        return True


def test_sync_creates_only_missing_bindings_of_routed_topics():
    source = _Cluster(
        [_acl("a", AclOperation.READ), _acl("a", AclOperation.ALL), _acl("b", AclOperation.READ)]
    )
    target = _Cluster([_acl("copy.a", AclOperation.READ)])
    sync = TopicAclSync(source, target, 60)  # type: ignore[arg-type]
    # ALL on "a" becomes the READ the target already has; "b" is not replicated.
    assert sync.sync({"a": "copy.a"}) == []
    source.acls.append(_acl("a", AclOperation.DESCRIBE))
    assert sync.sync({"a": "copy.a"}) == [_acl("copy.a", AclOperation.DESCRIBE)]
    assert target.created == [_acl("copy.a", AclOperation.DESCRIBE)]


def test_a_cluster_without_authorizer_is_skipped(caplog):
    target = _Cluster([])
    sync = TopicAclSync(_Cluster(None), target, 60)  # type: ignore[arg-type]
    assert sync.sync({"a": "a"}) == [] and target.created == []
    # A target without one: said once, however often the sync runs.
    sync = TopicAclSync(_Cluster([_acl("a", AclOperation.READ)]), _Cluster(None), 60)  # type: ignore[arg-type]
    with caplog.at_level("INFO", logger="k2k.planner"):
        assert sync.sync({"a": "a"}) == [] and sync.sync({"a": "a"}) == []
    assert [r.getMessage() for r in caplog.records] == [
        "topic ACL sync skipped: the target cluster has no authorizer"
    ]
