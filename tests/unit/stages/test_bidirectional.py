"""Bidirectional replication's loop breaker: the marker's values per mode, the filter, and
the copier stamping kept records and counting dropped ones toward the batch."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Message

from k2k.pipeline.task.copier import RecordCopier
from k2k.stages.bidirectional import LoopMarker, loop_marker
from k2k.stages.partitioning import SourcePartition
from k2k.stages.topicplan import TopicPlan

H = "__k2k_bidirectional"


def consumed(offset: int, headers: list | None, topic: str = "orders", part: int = 0) -> Message:
    """A consumed record as confluent_kafka builds it."""
    return Message(
        topic=topic,
        partition=part,
        offset=offset,
        key=b"k%d" % offset,
        value=b"v%d" % offset,
        headers=headers,
        timestamp=(1, 1000 + offset),
    )


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def produce(self, topic, value, key, partition, cb, _ts_type, ts, headers) -> None:
        self.sent.append((topic, value, partition, headers))


class Strategy:
    def __init__(self) -> None:
        self.producer = Producer()
        self.on_ack = None
        self.begun = 0
        self.counted: list[tuple[int, int]] = []

    def begin(self) -> None:
        self.begun += 1

    def produced(self, records: int, acks: int) -> None:
        self.counted.append((records, acks))


def _cfg(build: Any, **bidirectional: Any) -> Any:
    return build(
        {"features": {"bidirectionalReplication": "enabled"}, "bidirectional": bidirectional}
    )


@pytest.fixture
def build() -> Any:
    from k2k.config.loader import build_pipeline
    from tests.helpers.config import pipeline

    return lambda over: build_pipeline(pipeline(over), {})


def test_cluster_mode_stamps_the_source_id_and_skips_the_target_id(build: Any) -> None:
    cfg = _cfg(build, mode="cluster")
    assert loop_marker(cfg, "A-id", "B-id") == LoopMarker(H, b"A-id", b"B-id")


def test_cluster_mode_is_the_default(build: Any) -> None:
    cfg = build({"features": {"bidirectionalReplication": "enabled"}})
    assert cfg.bidirectional.mode == "cluster"
    assert loop_marker(cfg, "A", "B") == LoopMarker(H, b"A", b"B")


def test_pipeline_mode_stamps_and_skips_the_shared_name(build: Any) -> None:
    cfg = _cfg(build, mode="pipeline", headers={"bidirectional": "loop"})
    name = cfg.name.encode()
    assert loop_marker(cfg, "A", "B") == LoopMarker("loop", name, name)


def test_no_marker_without_the_feature(build: Any) -> None:
    assert loop_marker(build({}), "A", "B") is None


def test_the_two_directions_of_a_pair_recognise_each_other() -> None:
    """A -> B stamps what B -> A skips, and the other way round; records of a third
    cluster C are replicated both ways."""
    a_to_b, b_to_a = LoopMarker(H, b"A", b"B"), LoopMarker(H, b"B", b"A")
    written_on_b = consumed(0, [("x", b"1"), a_to_b.stamp_header])
    written_on_a = consumed(1, [b_to_a.stamp_header])
    from_c = consumed(2, [(H, b"C")])
    plain, no_headers = consumed(3, [("x", b"1")]), consumed(4, None)
    assert b_to_a.unmarked([written_on_b, from_c, plain, no_headers]) == [
        from_c,
        plain,
        no_headers,
    ]
    assert a_to_b.unmarked([written_on_a, from_c, plain]) == [from_c, plain]


@pytest.mark.parametrize("keep_headers", [True, False])
def test_copier_drops_marked_records_stamps_the_rest_and_counts_both(keep_headers: bool) -> None:
    marker = LoopMarker(H, b"B", b"A")  # the B -> A pipeline
    plan = TopicPlan("orders", "orders", SourcePartition(), keep_headers, True, None, marker=marker)
    copier = RecordCopier({"orders": plan}, {"orders"}, lambda m: None, lambda m, e: None)  # type: ignore[arg-type,return-value]
    msgs = [
        consumed(0, [("x", b"1")]),
        consumed(1, [(H, b"A")]),  # written on B by A -> B: not replicated back
        consumed(2, None),
        consumed(3, [(H, b"A"), ("y", b"2")]),
    ]
    strategy = Strategy()
    copier.copy(msgs, strategy)  # type: ignore[arg-type]
    own = [("x", b"1")] if keep_headers else []
    assert strategy.producer.sent == [
        ("orders", b"v0", 0, [*own, (H, b"B")]),
        ("orders", b"v2", 0, [(H, b"B")]),
    ]
    # Dropped records count toward the batch, so progress moves past them on time.
    assert strategy.counted == [(4, 0)]
    assert (copier.records, copier.skipped) == (2, 2)

    only_marked = Strategy()
    copier.copy([consumed(4, [(H, b"A")]), consumed(5, [(H, b"A")])], only_marked)  # type: ignore[arg-type]
    assert only_marked.producer.sent == [] and only_marked.begun == 0
    assert only_marked.counted == [(2, 0)]
