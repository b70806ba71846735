"""The per-topic plan: everything the runner does to a topic's records, decided once.

Runs on: driver (compiled once per discovered topic); the plans travel to the runners inside
the lease spec, so every field is picklable. Per record the runner only reads the plan's
fields into locals at the start of a run; a ``transform`` of None keeps the fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from k2k.stages.bidirectional import LoopMarker
from k2k.stages.headers import TracingHeaders
from k2k.stages.partitioning import PartitionRule, partition_rule

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

__all__ = [
    "RecordSteps",
    "RecordTransform",
    "StepsFactory",
    "TopicPlan",
    "TransformFactory",
    "compile_topic_plans",
    "tracing_headers",
]


class RecordTransform(Protocol):
    """An optional rewrite of keys and values (e.g. schema ids), called once per run of
    consumed records (one source partition); returns the run's keys and values, in order.
    It must be picklable; clients it needs are built lazily on the executor, at its first
    call. It raises a ``K2KError`` for a record it
    cannot rewrite, before anything of that record is produced."""

    def __call__(self, run: Sequence[Any]) -> tuple[list[bytes | None], list[bytes | None]]: ...


#: Builds a topic's transform from (source topic, target topic); None: the topic has none.
TransformFactory = Callable[[str, str], RecordTransform | None]


class RecordSteps(Protocol):
    """A topic's ``replication[].transforms`` steps (:class:`k2k.transforms.TopicSteps`):
    per record, whether it is copied and, when a step rewrites it, its new key, value and
    headers. Picklable."""

    #: A kept record can differ from the consumed one (else only filters).
    rewrites: bool
    #: A step rewrites keys or values, not only headers.
    rewrites_data: bool
    #: The records' own headers are copied (``features.headerReplication``).
    keep_headers: bool

    def run(self, msg: Any) -> tuple[int, Any]: ...

    def outcome(self, msg: Any) -> int: ...


#: Builds a topic's steps from (source topic, target topic); None: no step applies to it.
StepsFactory = Callable[[str, str], RecordSteps | None]


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """How the records of one source topic are replicated.

    >>> from k2k.stages.partitioning import SourcePartition
    >>> p = TopicPlan("orders", "dr.orders", SourcePartition(), True, True, None)
    >>> p.target, p.partitioning.target_partition(2), p.transform is None
    ('dr.orders', 2, True)
    """

    source: str
    target: str
    partitioning: PartitionRule
    keep_headers: bool
    keep_timestamp: bool
    tracing: TracingHeaders | None
    transform: RecordTransform | None = None
    #: Bidirectional replication's marker (None: replication is one-way).
    marker: LoopMarker | None = None
    #: ``offsets: identical``: each record keeps its source offset on the target
    #: (k2k.pipeline.task.identical).
    identical: bool = False
    #: ``replication[].transforms`` for this topic (None: records are copied as consumed).
    steps: RecordSteps | None = None


def tracing_headers(cfg: PipelineConfig) -> TracingHeaders | None:
    """The pipeline's tracing headers, or None when it adds none."""
    on, names = cfg.features.tracing_headers, cfg.tracing.headers
    headers = TracingHeaders(
        names.topic if on.topic else None,
        names.partition if on.partition else None,
        names.offset if on.offset else None,
        names.pipeline if on.pipeline else None,
        cfg.name,
    )
    return (
        headers
        if any((headers.topic, headers.partition, headers.offset, headers.pipeline))
        else None
    )


def compile_topic_plans(
    cfg: PipelineConfig,
    routes: Mapping[str, str],
    transforms: TransformFactory | None = None,
    marker: LoopMarker | None = None,
    steps: StepsFactory | None = None,
) -> dict[str, TopicPlan]:
    """One plan per routed source topic (``routes``: source topic -> target topic);
    ``transforms`` gives each topic's optional transform (schema mapping); ``marker``
    bidirectional replication's loop breaker (:func:`k2k.stages.bidirectional.loop_marker`);
    ``steps`` each topic's ``replication[].transforms`` (:func:`k2k.transforms.steps_for`)."""
    tracing = tracing_headers(cfg)
    partitioning = partition_rule(cfg.replication.sink.partition)
    return {
        source: TopicPlan(
            source,
            target,
            partitioning,
            keep_headers=cfg.features.header_replication,
            keep_timestamp=cfg.features.keep_record_creation_timestamp,
            tracing=tracing,
            transform=transforms(source, target) if transforms is not None else None,
            marker=marker,
            identical=cfg.replication.sink.offsets.identical,
            steps=steps(source, target) if steps is not None else None,
        )
        for source, target in routes.items()
    }
