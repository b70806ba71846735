"""Kafka clients for k2k: construction with k2k's settings, fault classification, admin
queries, control-topic tails and the murmur2 key hash. Nothing here knows Spark or the
pipeline; every other package builds and classifies its Kafka clients through this one."""

__all__ = ["TP"]

#: A topic partition as (topic, partition): hashable and picklable, unlike the client's
#: ``TopicPartition``, so it keys dicts and travels to executors.
TP = tuple[str, int]
