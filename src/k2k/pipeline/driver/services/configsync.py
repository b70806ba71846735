"""Topic config sync: target topics keep the configs of their source topics while k2k runs.

The counterpart of MirrorMaker 2's ``sync.topic.configs.*`` with ``use.defaults.from=target``
(``topicCreation.replicated.configSync`` and ``configSyncInterval``;
docs/operations.md#topic-management). k2k copies only the configs a source topic sets
itself (not the cluster's defaults, as MM2 does for dynamic broker configs): a target topic
carries what the source topic chose, and the target cluster's defaults otherwise.

Runs on: driver, from the planner's discovery checks; only with ``features.autoCreateTopics``
(k2k manages the target topics then).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from k2k.config import PipelineConfig
from k2k.config.topics import ReplicatedTopicCreation
from k2k.errors import K2KError
from k2k.kafka.admin import ClusterView
from k2k.pipeline.driver.services.periodic import Interval, answering, failure_level

__all__ = ["ConfigChange", "TopicConfigSync"]

log = logging.getLogger("k2k.planner")


@dataclass(frozen=True)
class ConfigChange:
    """What one sync changes on a target topic: values set, and configs removed (the target
    cluster's default applies to them again)."""

    updates: dict[str, str]
    removals: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.updates or self.removals)


class TopicConfigSync:
    """Runs on: driver. Brings target topic configs in line with their source topics.

    For a target topic, the wanted configs are its source topic's own configs that
    ``configExclusions`` lets through, under ``configs`` and ``common.config``
    (:meth:`ReplicatedTopicCreation.resolve`, as at creation). Of those, only values the target
    topic does not hold are set; a config the target topic sets itself, that the filter would
    copy and that is no longer wanted (the source topic dropped it) is removed. Configs the
    filter excludes are never touched on the target: operators own them there.
    """

    @classmethod
    def of(
        cls, cfg: PipelineConfig, source: ClusterView, target: ClusterView
    ) -> TopicConfigSync | None:
        """The sync of a pipeline, or None when it has none (``configSync`` disabled, or
        ``features.autoCreateTopics`` disabled: the target topics are the operator's)."""
        creation = cfg.topic_creation.replicated
        if not (cfg.features.auto_create_topics and creation.config_sync):
            return None
        return cls(creation, source, target)

    def __init__(
        self,
        creation: ReplicatedTopicCreation,
        source: ClusterView,
        target: ClusterView,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.creation = creation
        self.source, self.target = source, target
        # Creation has just applied the configs: the first sync after one interval.
        interval_s = creation.config_sync_interval.total_seconds()
        self.interval = Interval(interval_s, wait_first=True, clock=clock)

    def maybe_sync(self, routes: Mapping[str, str]) -> None:
        """Sync every target topic of ``routes`` (source topic -> target topic) when
        ``configSyncInterval`` has passed since the last sync, and both clusters answer (else
        at the first check they do). The configs of all topics are read in chunked requests
        (two reads per pass, not two per topic). A failure is logged and retried at the next
        interval: configs lagging behind never stop replication."""
        if not answering(self.source, self.target) or not self.interval.due():
            return
        pairs = _first_sources(routes)
        try:  # asked once: the lease's watch must not wait; the next interval retries
            sources = self.source.configs(set(pairs.values()), own_only=True, retry=False)
            targets = self.target.configs(pairs, own_only=True, retry=False)
        except K2KError as exc:
            self._failed(f"topic config sync of {len(pairs)} target topic(s)", exc)
            return
        for target, source in sorted(pairs.items()):
            try:
                self.apply(source, target, sources[source], targets[target])
            except K2KError as exc:
                self._failed(f"topic config sync of {target} from source topic {source}", exc)

    def _failed(self, what: str, exc: K2KError) -> None:
        log.log(
            failure_level(self.source, self.target),
            "%s failed (retried in %g s): %s",
            what,
            self.interval.interval_s,
            exc,
        )

    def sync(self, source_topic: str, target_topic: str) -> ConfigChange:
        """Apply the changed configs of ``source_topic`` to ``target_topic``; returns them."""
        source = self.source.configs([source_topic], own_only=True)[source_topic]
        target = self.target.configs([target_topic], own_only=True)[target_topic]
        return self.apply(source_topic, target_topic, source, target)

    def apply(
        self,
        source_topic: str,
        target_topic: str,
        source: Mapping[str, str],
        target: Mapping[str, str],
    ) -> ConfigChange:
        """Change ``target_topic`` (own configs ``target``) to carry what ``source_topic``
        (own configs ``source``) asks for; returns the change."""
        change = self.change(source, target)
        if change:
            self.target.alter_topic_configs(target_topic, change.updates, change.removals)
            log.info(
                "synced configs of target topic %s from source topic %s: set %s; removed %s",
                target_topic,
                source_topic,
                ", ".join(f"{k}={v}" for k, v in sorted(change.updates.items())) or "none",
                ", ".join(sorted(change.removals)) or "none",
            )
        return change

    def change(self, source: Mapping[str, str], target: Mapping[str, str]) -> ConfigChange:
        """What to change on a target topic holding ``target`` (its own configs) for a source
        topic holding ``source`` (its own configs).

        >>> sync = TopicConfigSync(ReplicatedTopicCreation(), None, None)
        >>> sync.change(
        ...     {"retention.ms": "5", "min.insync.replicas": "2"},
        ...     {"retention.ms": "9", "segment.ms": "7", "min.insync.replicas": "1"},
        ... )
        ConfigChange(updates={'retention.ms': '5'}, removals=frozenset({'segment.ms'}))
        """
        copied = {k: v for k, v in source.items() if self.creation.copies_config(k)}
        wanted = self.creation.overrides(copied)
        updates = {k: v for k, v in wanted.items() if target.get(k) != v}
        removals = frozenset(
            k for k in target if k not in wanted and self.creation.copies_config(k)
        )
        return ConfigChange(updates, removals)


def _first_sources(routes: Mapping[str, str]) -> dict[str, str]:
    """Per target topic, the first source topic (by name) routed to it: with many-to-one
    routing, the one whose configs the target topic was created with."""
    first: dict[str, str] = {}
    for source, target in sorted(routes.items()):
        first.setdefault(target, source)
    return first
