"""Every key of Lenses K2K's reference files and what k2k does with it.

The table docs/config.md shows (generated from here). ``tests/unit/config/test_k2k_keys.py``
loads K2K's reference pipeline and Offset Mapping app files (``tests/unit/config/data``) and
checks each key's outcome against it: read, accepted with a warning (k2k.config.inert), or
refused. So nothing in a K2K file is silently ignored, and the docs cannot drift.
"""

from __future__ import annotations

__all__ = ["APP", "PIPELINE", "READ", "REFUSED", "WARNED"]

READ = "read"
WARNED = "warning"
REFUSED = "refused"

_RUNS = "as in K2K"
_CLIENT = "passed to the clients (librdkafka spelling or translated)"

#: Key path (as in the reference pipeline file) -> (outcome, what k2k does).
PIPELINE: dict[str, tuple[str, str]] = {
    "name": (READ, "the pipeline's identity: control-record keys, transactional ids"),
    "license.acceptEula": (WARNED, "no license: k2k is open software"),
    "license.token": (WARNED, "no license: no feature is gated"),
    "features.exactlyOnce": (READ, "transactions and fencing (docs/exactly-once.md)"),
    "features.keepRecordCreationTimestamp": (READ, _RUNS),
    "features.checkKafkaConnectionOnStartup": (READ, "step-by-step connection check"),
    "features.headerReplication": (READ, _RUNS),
    "features.schemaMapping": (READ, "docs/schema-mapping.md"),
    "features.optimizeOffsetCommitPartition": (
        WARNED,
        "progress records are placed by key (docs/operations.md#commit-topic-partitions)",
    ),
    "features.autoCreateControlTopics": (READ, _RUNS),
    "features.autoCreateTopics": (READ, _RUNS),
    "features.validateControlTopicSettings": (READ, _RUNS),
    "features.tracingHeaders": (READ, _RUNS),
    "features.bidirectionalReplication": (READ, "loop marker header"),
    "features.offsetMapping": (READ, "offset mappings on the target"),
    "source.kafka.common.bootstrap.servers": (READ, _CLIENT),
    "source.kafka.consumer.group.id": (
        READ,
        "the group librdkafka looks up (Describe ACL); never joined or committed to",
    ),
    "source.kafka.admin": (READ, _CLIENT),
    "source.registry.config.schema.registry.url": (READ, "schema mapping's source registry"),
    "target.kafka.common.bootstrap.servers": (READ, _CLIENT),
    "target.kafka.producer": (READ, _CLIENT),
    "target.kafka.admin": (READ, _CLIENT),
    "target.kafka.consumer": (READ, "control-topic readers and verify"),
    "target.registry.config.schema.registry.url": (READ, "schema mapping's target registry"),
    "replication[0].source.name": (READ, "stage label"),
    "replication[0].source.topic": (READ, "regex or list of names"),
    "replication[1].sink.name": (READ, "stage label"),
    "replication[1].sink.topic": (READ, "target topic naming"),
    "replication[1].sink.partition": (READ, "partition mapping"),
    "coordination.kafka.charset": (READ, "UTF-8 only; any other is refused"),
    "coordination.kafka.consumer": (READ, "control-topic readers, over target.kafka.consumer"),
    "coordination.kafka.commit.topic": (READ, _RUNS),
    "coordination.kafka.commit.syncTimeout": (READ, _RUNS),
    "coordination.kafka.commit.batchSize": (READ, _RUNS),
    "coordination.kafka.commit.batchTimeout": (READ, _RUNS),
    "coordination.kafka.commit.group": (READ, "the commit group progress is recorded under"),
    "coordination.kafka.assignment.topic": (READ, _RUNS),
    "coordination.kafka.assignment.graceWindow": (READ, _RUNS),
    "coordination.kafka.assignment.fencingMaxParallelism": (READ, _RUNS),
    "tracing.headers.partition": (READ, _RUNS),
    "tracing.headers.offset": (READ, _RUNS),
    "tracing.headers.topic": (READ, _RUNS),
    "tracing.headers.pipeline": (READ, _RUNS),
    "schemaMapping.topics[0].pattern": (READ, _RUNS),
    "schemaMapping.topics[0].key": (READ, _RUNS),
    "schemaMapping.topics[0].value": (READ, _RUNS),
    "bidirectional.mode": (READ, _RUNS),
    "bidirectional.headers.bidirectional": (READ, _RUNS),
    "offsetMapping.topic": (READ, _RUNS),
    "errorHandling.onCommitSyncTimeout": (READ, _RUNS),
    "errorHandling.onControlMessageDeserializationError": (READ, _RUNS),
    "metrics.kafka.topic": (
        REFUSED,
        'the reference\'s value "<metrics topic>" is no topic name; a real name is read',
    ),
    "metrics.prefix": (
        READ,
        "metric name prefixes (with -t): `replicator`, and `sourceConsumer` and "
        "`targetProducer` of the client statistics (`metrics.clientStatistics`)",
    ),
    "topicCreation": (READ, "partitions, replication and configs of created topics"),
}

#: The same for the Offset Mapping app's keys.
APP: dict[str, tuple[str, str]] = {
    "name": (READ, "the app's identity"),
    "license.acceptEula": (WARNED, "no license: k2k is open software"),
    "license.token": (WARNED, "no license: no feature is gated"),
    "features.autoCreateControlTopics": (READ, _RUNS),
    "features.applyMappingsGuard": (READ, "rewind guard in commit metadata"),
    "errorHandling.onMultipleTargetCommittedOffsets": (READ, _RUNS),
    "errorHandling.onActiveConsumerGroupCommit": (READ, _RUNS),
    "groups.pollInterval": (READ, _RUNS),
    "groups.consumerGroups": (READ, _RUNS),
    "groups.offsetGuardPrefix": (READ, _RUNS),
    "offsetMapping.topic": (READ, _RUNS),
    "offsetMapping.retention.time": (READ, _RUNS),
    "offsetMapping.retention.count": (READ, _RUNS),
    "offsetMapping.retention.schedule": (READ, _RUNS),
    "source.kafka.common.bootstrap.servers": (READ, _CLIENT),
    "source.kafka.admin": (READ, "reads the source groups' offsets"),
    "target.kafka.common.bootstrap.servers": (READ, _CLIENT),
    "target.kafka.consumer": (READ, "reads the mappings"),
    "target.kafka.producer": (READ, "the metrics topic's producer (`kafka` exporter)"),
    "target.kafka.admin": (READ, "commits the groups' offsets"),
    "metrics.prefix.targetConsumer": (WARNED, "the app exports no Kafka client metrics"),
    "metrics.prefix.targetProducer": (WARNED, "the app exports no Kafka client metrics"),
    "metrics.prefix.offsetMappingApp": (READ, "prefix of the app's metrics (with -t)"),
}
