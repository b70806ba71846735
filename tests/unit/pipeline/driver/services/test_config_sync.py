"""The topic config filter and sync decisions (k2k.config.topics, k2k.pipeline.driver.services.configsync):
what is copied, set and removed, per configuration."""

from __future__ import annotations

import itertools
import logging

from k2k.config.topics import MM2_CONFIG_EXCLUSIONS, ReplicatedTopicCreation
from k2k.errors import ClusterError
from k2k.pipeline.driver.services.configsync import ConfigChange, TopicConfigSync


class _Cluster:
    """A cluster's topic configs, as ClusterView answers them (no broker: decisions only)."""

    def __init__(self, configs: dict[str, dict[str, str]]) -> None:
        self.own = configs
        self.answering = True
        #: The topics of each configs read, in order.
        self.reads: list[list[str]] = []
        self.altered: list[tuple[str, dict[str, str], frozenset[str]]] = []

    def configs(self, topics, own_only: bool = False, retry: bool = True):
        assert own_only  # the sync compares the topics' own configs only
        self.reads.append(sorted(topics))
        return {topic: dict(self.own[topic]) for topic in topics}

    def alter_topic_configs(self, topic: str, updates: dict[str, str], removals) -> None:
        self.altered.append((topic, dict(updates), frozenset(removals)))


def _sync(creation: ReplicatedTopicCreation, source: _Cluster, target: _Cluster, clock=None):
    return TopicConfigSync(creation, source, target, clock or (lambda: 0.0))  # type: ignore[arg-type]


def test_default_exclusions_are_mm2s_and_match_whole_names():
    creation = ReplicatedTopicCreation()
    assert tuple(creation.config_exclusions) == MM2_CONFIG_EXCLUSIONS
    for name in ("min.insync.replicas", "message.timestamp.type", "unclean.leader.election.enable"):
        assert not creation.copies_config(name)
    # Whole-name matching: a longer name that starts like an excluded one is copied.
    assert creation.copies_config("message.timestamp.type.extra")
    assert creation.copies_config("retention.ms")


def test_configured_exclusions_replace_the_defaults():
    creation = ReplicatedTopicCreation.model_validate({"configExclusions": [r"segment\..*"]})
    assert not creation.copies_config("segment.ms")
    assert creation.copies_config("min.insync.replicas")
    assert ReplicatedTopicCreation.model_validate({"configExclusions": []}).copies_config(
        "min.insync.replicas"
    )


def test_change_sets_only_differences_keeps_overrides_and_excluded_target_values():
    creation = ReplicatedTopicCreation.model_validate(
        {"configs": {"retention.ms": "1"}, "common": {"config": {"cleanup.policy": "delete"}}}
    )
    sync = _sync(creation, _Cluster({}), _Cluster({}))
    change = sync.change(
        {"retention.ms": "9", "segment.ms": "5", "unclean.leader.election.enable": "true"},
        {"retention.ms": "1", "cleanup.policy": "compact", "min.insync.replicas": "2", "x": "y"},
    )
    # retention.ms: the override wins and already holds; segment.ms new; cleanup.policy is
    # the common override; x is no longer set on the source; min.insync.replicas is excluded.
    assert change == ConfigChange({"segment.ms": "5", "cleanup.policy": "delete"}, frozenset({"x"}))


def test_nothing_to_change_alters_nothing():
    source = _Cluster({"a": {"retention.ms": "5"}})
    target = _Cluster({"b": {"retention.ms": "5"}})
    assert not _sync(ReplicatedTopicCreation(), source, target).sync("a", "b")
    assert target.altered == []


def test_maybe_sync_waits_for_the_interval_and_uses_the_first_source_of_a_target():
    creation = ReplicatedTopicCreation.model_validate({"configSyncInterval": "10 seconds"})
    source = _Cluster({"a": {"retention.ms": "1"}, "b": {"retention.ms": "2"}})
    target = _Cluster({"merged": {}})
    now = itertools.count(0, 6)  # 0 at construction, then 6, 12, 18 s
    sync = _sync(creation, source, target, lambda: float(next(now)))
    routes = {"b": "merged", "a": "merged"}
    sync.maybe_sync(routes)  # 6 s: not yet
    assert target.altered == []
    sync.maybe_sync(routes)  # 12 s: due
    assert target.altered == [("merged", {"retention.ms": "1"}, frozenset())]
    sync.maybe_sync(routes)  # 18 s: next one due at 22 s
    assert len(target.altered) == 1


class _Failing(_Cluster):
    """Fails describing a topic; ``answering_after``: whether the cluster answers its probes
    by the time the failure is logged (the reachability watch probes meanwhile)."""

    def __init__(self, answering_after: bool) -> None:
        super().__init__({})
        self.answering_after = answering_after

    def configs(self, topics, own_only: bool = False, retry: bool = True):
        self.answering = self.answering_after
        raise ClusterError(f"target cluster at x:1: describing topics {sorted(topics)} timed out")


def test_a_failed_sync_is_a_warning_or_debug_when_a_cluster_stopped_answering(caplog):
    creation = ReplicatedTopicCreation.model_validate({"configSyncInterval": "1 second"})
    now = itertools.count(0, 2)
    for answering_after, level in ((True, logging.WARNING), (False, logging.DEBUG)):
        caplog.clear()
        target = _Failing(answering_after)
        sync = _sync(creation, _Cluster({"a": {}}), target, lambda: float(next(now)))
        with caplog.at_level(logging.DEBUG, logger="k2k.planner"):
            sync.maybe_sync({"a": "b"})  # due: fails inside, logged, not raised
        assert [(r.levelno, r.getMessage()[:45]) for r in caplog.records] == [
            (level, "topic config sync of 1 target topic(s) failed")
        ]


def test_no_sync_while_a_cluster_does_not_answer_and_one_as_soon_as_it_does():
    creation = ReplicatedTopicCreation.model_validate({"configSyncInterval": "1 second"})
    source, target = _Cluster({"a": {"retention.ms": "1"}}), _Cluster({"b": {}})
    target.answering = False
    now = itertools.count(0, 2)
    sync = _sync(creation, source, target, lambda: float(next(now)))
    sync.maybe_sync({"a": "b"})
    assert target.altered == []
    target.answering = True
    sync.maybe_sync({"a": "b"})
    assert target.altered == [("b", {"retention.ms": "1"}, frozenset())]


def test_one_pass_reads_the_configs_of_all_topics_at_once_per_cluster():
    creation = ReplicatedTopicCreation.model_validate({"configSyncInterval": "1 second"})
    names = [f"t{i}" for i in range(5)]
    source = _Cluster({n: {"retention.ms": str(i)} for i, n in enumerate(names)})
    target = _Cluster({f"x.{n}": {"retention.ms": "0"} for n in names})
    now = itertools.count(0, 2)
    sync = _sync(creation, source, target, lambda: float(next(now)))
    sync.maybe_sync({n: f"x.{n}" for n in names})
    assert source.reads == [names]
    assert target.reads == [[f"x.{n}" for n in names]]
    assert [(t, u) for t, u, _ in target.altered] == [
        (f"x.{n}", {"retention.ms": str(i)}) for i, n in enumerate(names) if i
    ]
