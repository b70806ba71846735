"""When an exactly-once batch is due: its limits, without clients (stand-ins for the ledger,
the faults and the two producers, which are never called here)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from k2k.pipeline.task.commit.exactly_once import MAX_TXN_PARTITIONS, ExactlyOnce


def _strategy(touched: set, partitions: int = 4000) -> ExactlyOnce:
    spec = SimpleNamespace(batch_size=10_000, batch_timeout_s=2.0, ack_timeout_s=60.0)
    ledger = SimpleNamespace(committed={}, unwritten=set(), one_per_progress_partition=list)
    faults = SimpleNamespace(transactional_id=None)
    strategy = ExactlyOnce(spec, [object(), object()], ledger, faults, partitions, touched)  # type: ignore[arg-type]
    strategy.pair.close()
    return strategy


def test_a_batch_over_many_partitions_is_due_at_the_partition_limit():
    touched = {("t", p) for p in range(MAX_TXN_PARTITIONS - 1)}
    strategy = _strategy(touched)
    strategy.records = 5_000  # far below batchSize x 4000 partitions
    now = time.monotonic()
    assert not strategy.due(now)
    touched.add(("t", MAX_TXN_PARTITIONS))  # the source reader's set, updated in place
    assert strategy.due(now)


def test_a_batch_over_few_partitions_is_due_at_its_record_limit_or_timeout():
    strategy = _strategy({("t", 0)}, partitions=1)
    strategy.records = 9_999
    assert not strategy.due(time.monotonic())
    assert strategy.due(time.monotonic() + 2.0)  # batchTimeout
    strategy.records = 10_000
    assert strategy.due(time.monotonic())
