"""Progress deliveries that fail: the first real failure fails the next commit point, while
a purged record (dropped unsent because its transaction had already failed, or its lease)
never stands in for the cause: the commit's own error is the one the runner reports."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from k2k.errors import ReplicationError
from k2k.pipeline.task.commit.ledger import ProgressLedger
from k2k.pipeline.task.faults import RunnerFaults
from tests.helpers.inprocess import POLICIES, control_topics


def _ledger(faults: RunnerFaults) -> ProgressLedger:
    return ProgressLedger(
        [],
        faults,
        control=control_topics("p", "commits"),
        consumer={},
        policies=POLICIES,
        topic_ids={},
    )


@pytest.mark.parametrize("code", [KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT])
def test_a_purged_progress_record_is_not_the_failure(code: int) -> None:
    faults = RunnerFaults("txid")
    ledger = _ledger(faults)
    ledger.on_delivery(KafkaError(code), SimpleNamespace(topic=lambda: "commits"))
    faults.raise_failure()  # nothing remembered
    assert faults.failure is None


def test_a_rejected_progress_record_fails_the_next_commit_point() -> None:
    faults = RunnerFaults("txid")
    ledger = _ledger(faults)
    purged = KafkaError(KafkaError._PURGE_QUEUE)
    rejected = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    ledger.on_delivery(purged, SimpleNamespace(topic=lambda: "commits"))
    ledger.on_delivery(rejected, SimpleNamespace(topic=lambda: "commits"))
    with pytest.raises(ReplicationError, match="could not write progress to commits"):
        faults.raise_failure()
