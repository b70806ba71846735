"""Topic ACL sync: who may read a source topic may read its target topic.

The counterpart of MirrorMaker 2's ``sync.topic.acls.*`` (``topicCreation.replicated.aclSync``
and ``aclSyncInterval``; docs/operations.md#topic-management). Like MM2 it copies only ACLs
bound to one topic by name (a LITERAL pattern), renamed to the target topic, adds and never
deletes, and never lets anyone but k2k write a target topic: ALLOW ALL becomes ALLOW READ.
k2k is stricter than MM2 about the rest: of the ALLOW bindings only READ, DESCRIBE and
DESCRIBE_CONFIGS are copied (MM2 drops WRITE only, so ALTER or DELETE would pass); DENY
bindings are copied as they are (they grant nothing).

Runs on: driver, from the planner's discovery checks; only with ``features.autoCreateTopics``
(k2k manages the target topics then). Reads ACLs on the source, never changes them there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType

from k2k.config import PipelineConfig
from k2k.errors import K2KError
from k2k.kafka.admin import ClusterView
from k2k.pipeline.driver.services.periodic import Interval, answering, failure_level

__all__ = ["TopicAclSync", "target_binding"]

log = logging.getLogger("k2k.planner")

#: What an ALLOW binding may grant on a target topic: reading it and its metadata.
_READ_ONLY = frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS})


def target_binding(binding: AclBinding, target_topic: str) -> AclBinding | None:
    """The binding to create on ``target_topic`` for a source topic's literal ``binding``.

    Returns None when it is not copied: an ALLOW binding for anything but reading (WRITE,
    ALTER, DELETE, ...: only k2k writes target topics). ALLOW ALL is copied as ALLOW READ;
    DENY bindings are copied as they are.
    """
    operation = binding.operation
    if binding.permission_type == AclPermissionType.ALLOW:
        if operation == AclOperation.ALL:
            operation = AclOperation.READ
        elif operation not in _READ_ONLY:
            return None
    return AclBinding(
        binding.restype,
        target_topic,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        operation,
        binding.permission_type,
    )


class TopicAclSync:
    """Runs on: driver. Adds the source topics' read ACLs to their target topics.

    Every ``aclSyncInterval``: the source's literal topic ACLs of the replicated topics,
    through :func:`target_binding`, minus those the target already has, are created on the
    target. A target without an authorizer is said once and skipped; a source without one
    has no ACLs to copy.
    """

    @classmethod
    def of(
        cls, cfg: PipelineConfig, source: ClusterView, target: ClusterView
    ) -> TopicAclSync | None:
        """The sync of a pipeline, or None when it has none (``aclSync`` disabled, or
        ``features.autoCreateTopics`` disabled: the target topics are the operator's)."""
        creation = cfg.topic_creation.replicated
        if not (cfg.features.auto_create_topics and creation.acl_sync):
            return None
        return cls(source, target, creation.acl_sync_interval.total_seconds())

    def __init__(
        self,
        source: ClusterView,
        target: ClusterView,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source, self.target = source, target
        # First at the first check: a target topic just created needs its readers.
        self.interval = Interval(interval_s, wait_first=False, clock=clock)
        self._no_authorizer_said = False

    def maybe_sync(self, routes: Mapping[str, str]) -> None:
        """Sync the ACLs of ``routes`` (source topic -> target topic) when
        ``aclSyncInterval`` has passed since the last sync, and both clusters answer (else at
        the first check they do). A failure is logged and retried at the next interval: ACLs
        lagging behind never stop replication."""
        if not answering(self.source, self.target) or not self.interval.due():
            return
        try:
            self.sync(routes)
        except K2KError as exc:
            log.log(
                failure_level(self.source, self.target),
                "topic ACL sync failed (retried in %g s): %s",
                self.interval.interval_s,
                exc,
            )

    def sync(self, routes: Mapping[str, str]) -> list[AclBinding]:
        """Create the missing target bindings of ``routes``; returns those created."""
        source = self.source.literal_topic_acls()
        if source is None:
            self._no_authorizer("source")
            return []
        wanted = set(_target_bindings(source, routes))
        if not wanted:
            return []
        have = self.target.literal_topic_acls()
        missing = sorted(wanted - set(have or ()), key=str)
        if have is None or not self.target.create_acls(missing):
            self._no_authorizer("target")
            return []
        for binding in missing:
            log.info("synced topic ACL to the target: %s", _describe(binding))
        return missing

    def _no_authorizer(self, cluster: str) -> None:
        if not self._no_authorizer_said:
            log.info("topic ACL sync skipped: the %s cluster has no authorizer", cluster)
            self._no_authorizer_said = True


def _target_bindings(
    source: Iterable[AclBinding], routes: Mapping[str, str]
) -> Iterable[AclBinding]:
    for binding in source:
        target_topic = routes.get(binding.name)
        if target_topic is not None and (copied := target_binding(binding, target_topic)):
            yield copied


def _describe(binding: AclBinding) -> str:
    permission = AclPermissionType(binding.permission_type).name
    operation = AclOperation(binding.operation).name
    return (
        f"{permission} {operation} on topic {binding.name} for {binding.principal} from host "
        f"{binding.host}"
    )
