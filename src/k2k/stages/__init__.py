"""Replication stages: small policies compiled once per topic, applied by the runner.

* selection (:mod:`~k2k.stages.selection`): ``TopicSelection.should_replicate(topic)``;
* routing (:mod:`~k2k.stages.routing`): one class per ``sink.topic`` rule,
  ``route(topic) -> str | None``;
* MirrorMaker 2 replication policies (:mod:`~k2k.stages.policies`): alias and identity
  naming, read back for MM2's cycle, internal-topic and heartbeats rules;
* partitioning (:mod:`~k2k.stages.partitioning`): ``source``, ``hash`` or ``producer``,
  decided per run;
* tracing headers (:mod:`~k2k.stages.headers`);
* the per-topic plan that bundles them for the runner (:mod:`~k2k.stages.topicplan`).

Pure code: no clients, no Spark, so the config model, the runner and other tools can all use
it.
"""

from k2k.stages.headers import TracingHeaders
from k2k.stages.partitioning import (
    KeyHash,
    PartitionRule,
    ProducerPartitioner,
    SourcePartition,
    partition_rule,
)
from k2k.stages.policies import AliasPolicy, IdentityPolicy, PolicyRule, ReplicationPolicy
from k2k.stages.routing import (
    ExplicitTopicMap,
    PrefixSuffixTopicName,
    SameTopicName,
    StaticTopicName,
    TopicRouter,
    TopicRouting,
)
from k2k.stages.selection import TopicSelection, is_internal_topic
from k2k.stages.topicplan import RecordTransform, TopicPlan, compile_topic_plans

__all__ = [
    "AliasPolicy",
    "ExplicitTopicMap",
    "IdentityPolicy",
    "KeyHash",
    "PartitionRule",
    "PolicyRule",
    "PrefixSuffixTopicName",
    "ProducerPartitioner",
    "RecordTransform",
    "ReplicationPolicy",
    "SameTopicName",
    "SourcePartition",
    "StaticTopicName",
    "TopicPlan",
    "TopicRouter",
    "TopicRouting",
    "TopicSelection",
    "TracingHeaders",
    "compile_topic_plans",
    "is_internal_topic",
    "partition_rule",
]
