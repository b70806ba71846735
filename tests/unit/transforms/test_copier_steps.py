"""The copier with transform steps: dropped records are not produced but count toward the
batch (progress moves past them), kept records carry the steps' output, and runs split
where records were dropped (so offset mappings stay exact)."""

from __future__ import annotations

from typing import Any

from k2k.pipeline.task.copier import RecordCopier
from k2k.stages.partitioning import SourcePartition
from k2k.stages.topicplan import TopicPlan
from tests.unit.stages.test_bidirectional import Strategy, consumed
from tests.unit.transforms.test_steps import steps


def test_copier_produces_what_the_steps_keep_and_counts_the_rest() -> None:
    s = steps(
        {"filter": {"drop": '"drop" in headers'}},
        {"insertHeader": {"name": "origin", "value": "eu"}},
    )
    plan = TopicPlan("orders", "dr.orders", SourcePartition(), True, True, None, steps=s)
    copier = RecordCopier({"orders": plan}, {"orders"}, lambda m: None, lambda m, e: None)  # type: ignore[arg-type,return-value]
    msgs = [
        consumed(0, None),
        consumed(1, [("drop", b"")]),
        consumed(2, [("a", b"1")]),
        consumed(3, [("drop", b"")]),
    ]
    strategy = Strategy()
    copier.copy(msgs, strategy)  # type: ignore[arg-type]
    assert strategy.producer.sent == [
        ("dr.orders", b"v0", 0, [("origin", b"eu")]),
        ("dr.orders", b"v2", 0, [("a", b"1"), ("origin", b"eu")]),
    ]
    assert strategy.counted == [(4, 0)]  # the dropped two count toward the batch
    assert (copier.records, copier.filtered, copier.failed, copier.skipped) == (2, 2, 0, 0)


def test_a_topic_without_steps_keeps_the_fast_path_beside_one_with_steps() -> None:
    plans: dict[str, Any] = {
        "orders": TopicPlan(
            "orders",
            "orders",
            SourcePartition(),
            False,
            True,
            None,
            steps=steps({"filter": {"keep": "offset > 0"}}),
        ),
        "other": TopicPlan("other", "other", SourcePartition(), False, True, None),
    }
    copier = RecordCopier(plans, {"orders", "other"}, lambda m: None, lambda m, e: None)  # type: ignore[arg-type,return-value]
    strategy = Strategy()
    msgs = [consumed(0, None), consumed(1, None), consumed(0, None, topic="other")]
    copier.copy(msgs, strategy)  # type: ignore[arg-type]
    assert [(t, v) for t, v, _, _ in strategy.producer.sent] == [
        ("orders", b"v1"),
        ("other", b"v0"),
    ]
    assert copier.filtered == 1
