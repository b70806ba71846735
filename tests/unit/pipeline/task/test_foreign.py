"""The foreign-write watch: counts from delivery offsets alone, never a false positive."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

import pytest

from k2k.pipeline.task.foreign import ForeignWatch, watched_targets
from k2k.pipeline.task.observe import ProducedRun
from k2k.stages.partitioning import KeyHash, SourcePartition
from k2k.stages.topicplan import TopicPlan


@dataclass
class _Ledger:
    foreign: dict = field(default_factory=dict)


class _Faults:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def fail(self, reason: str) -> None:
        self.failures.append(reason)


class _Log:
    """A target partition: who wrote each offset; runs are reported in write order."""

    def __init__(self) -> None:
        self.slots: list[str] = []

    def write(self, what: str, n: int = 1) -> tuple[int, int]:
        first = len(self.slots)
        self.slots += [what] * n
        return first, len(self.slots) - 1

    def foreign_between(self, first: int, last: int) -> int:
        return sum(1 for s in self.slots[first : last + 1] if s == "foreign")


def run_of(first: int, last: int, count: int, partition: int = 0, topic: str = "t") -> ProducedRun:
    return ProducedRun("s", partition, 0, count - 1, count, topic, partition, first, last, 0)


def watch(
    policy: str = "warn", batch=None, ledger=None, data_records=None
) -> tuple[ForeignWatch, _Faults]:
    faults = _Faults()
    w = ForeignWatch(
        frozenset({"t"}),
        ledger or _Ledger(),  # type: ignore[arg-type]
        faults,  # type: ignore[arg-type]
        policy,
        batch,
        data_records=data_records,
    )
    return w, faults


def found(w: ForeignWatch, partition: int = 0) -> int:
    return w._windows[("t", partition)].found


def test_at_least_once_counts_every_gap_and_warns_once(caplog):
    ledger = _Ledger({("s", 0): 4})  # counted by an earlier runner
    w, faults = watch(ledger=ledger)
    with caplog.at_level(logging.WARNING, logger="k2k.runner"):
        w.on_run(run_of(100, 109, 10))
        assert found(w) == 0 and not caplog.records
        w.on_run(run_of(113, 114, 2))  # 110..112 foreign
        assert found(w) == 3 and ledger.foreign[("s", 0)] == 7
        w.on_run(run_of(115, 120, 5))  # one foreign record inside the run
        w.on_run(run_of(121, 121, 1))
    assert found(w) == 4 and ledger.foreign[("s", 0)] == 8
    [warning] = caplog.records
    assert "3 record(s) on t[0] between target offsets 110 and 114" in warning.getMessage()
    assert "errorHandling.onForeignWrites: warn" in warning.getMessage()
    assert not faults.failures


def test_fail_names_the_partition_offsets_and_policy():
    w, faults = watch("fail")
    w.on_run(run_of(0, 9, 10))
    w.on_run(run_of(12, 12, 1))
    [reason] = faults.failures
    assert "2 record(s) on t[0] between target offsets 10 and 12" in reason
    assert "errorHandling.onForeignWrites: fail" in reason and "\n" not in reason


def test_unwatched_topics_and_restarted_windows_count_nothing():
    w, _ = watch()
    w.on_run(run_of(0, 9, 10, topic="other"))
    assert not w._windows
    w.on_run(run_of(50, 59, 10))
    w.on_run(run_of(5, 9, 5))  # offsets went back (topic recreated): a new window
    assert found(w) == 0


def test_only_one_writer_per_target_partition_is_watched():
    src, hashed = SourcePartition(), KeyHash()

    def plan(s: str, t: str, p=src) -> TopicPlan:
        return TopicPlan(s, t, p, keep_headers=True, keep_timestamp=True, tracing=None)

    assert watched_targets({"a": plan("a", "A"), "b": plan("b", "B")}) == {"A", "B"}
    # Two source topics routed into one target topic: both write its partitions.
    assert watched_targets({"a": plan("a", "X"), "b": plan("b", "X"), "c": plan("c", "C")}) == {"C"}
    # partition: hash spreads every source partition over the target's partitions.
    assert watched_targets({"a": plan("a", "A", hashed)}) == frozenset()


def _exactly_once_scenario(rng: random.Random, foreign_rate: float) -> None:
    """Random schedules of two producers in turn: batch n's marker lands after its records
    and before batch n + 2's; foreign records anywhere. After every run the count is at most
    the foreign records in the window; once markers land promptly again it is exact."""
    log = _Log()
    state = {"batch": 0}
    w, faults = watch(batch=lambda: state["batch"])
    pending: list[int] = []  # batches whose marker has not landed
    first_run = None
    for batch in range(40):
        state["batch"] = batch
        # Batch n's marker must land before batch n + 2 writes.
        for b in [b for b in pending if b <= batch - 2]:
            log.write(f"marker{b}")
            pending.remove(b)
        for _ in range(rng.randint(1, 3)):
            if rng.random() < foreign_rate:
                log.write("foreign", rng.randint(1, 3))
            if pending and rng.random() < 0.5:
                log.write(f"marker{pending.pop(0)}")
            a, b = log.write(f"batch{batch}", rng.randint(1, 5))
            first_run = a if first_run is None else first_run
            w.on_run(run_of(a, b, b - a + 1))
            assert found(w) <= log.foreign_between(first_run, b)
        pending.append(batch)
    # Markers land promptly again: the last two batches' markers come before the next run.
    for batch in (40, 41, 42):
        state["batch"] = batch
        while pending:
            log.write(f"marker{pending.pop(0)}")
        a, b = log.write(f"batch{batch}", 2)
        w.on_run(run_of(a, b, 2))
        pending.append(batch)
    assert found(w) == log.foreign_between(first_run, len(log.slots) - 1)
    assert not faults.failures


@pytest.mark.parametrize("seed", range(200))
def test_exactly_once_never_counts_its_own_markers(seed):
    _exactly_once_scenario(random.Random(seed), foreign_rate=0.0 if seed % 4 == 0 else 0.2)


def test_exactly_once_markers_inside_the_next_batch_are_not_foreign():
    state = {"batch": 0}
    w, _ = watch(batch=lambda: state["batch"])
    w.on_run(run_of(0, 9, 10))  # batch 0
    state["batch"] = 1
    w.on_run(run_of(10, 11, 2))
    w.on_run(run_of(13, 19, 7))  # batch 0's marker at 12
    state["batch"] = 2
    w.on_run(run_of(21, 29, 9))  # batch 1's marker at 20
    assert found(w) == 0
    state["batch"] = 3
    w.on_run(run_of(31, 31, 1))  # batch 2's marker at 30
    w.on_run(run_of(35, 35, 1))  # 32..34 foreign
    assert found(w) == 3


def _reader(log: _Log, reads: list[tuple[int, int]]):
    """Data records of the log's ``[first, last]``: everything but markers."""

    def data_records(tp, first: int, last: int) -> int:
        reads.append((first, last))
        return sum(1 for s in log.slots[first : last + 1] if not s.startswith("marker"))

    return data_records


def _marker_written_twice(log: _Log, w: ForeignWatch, state: dict, foreign: int) -> None:
    """Batch 0, then batch 1 with batch 0's marker landing twice (its coordinator moved
    mid-commit) and ``foreign`` records among them, then batches 2 and 3."""
    a, b = log.write("batch0", 10)
    w.on_run(run_of(a, b, 10))
    state["batch"] = 1
    log.write("marker0")
    log.write("marker0")  # written again by the new coordinator
    log.write("foreign", foreign)
    a, b = log.write("batch1", 5)
    w.on_run(run_of(a, b, 5))
    state["batch"] = 2
    log.write("marker1")
    a, b = log.write("batch2", 3)
    w.on_run(run_of(a, b, 3))
    state["batch"] = 3
    log.write("marker2")
    a, b = log.write("batch3", 3)
    w.on_run(run_of(a, b, 3))


def test_exactly_once_a_marker_written_again_is_read_and_not_counted(caplog):
    log, reads, state = _Log(), [], {"batch": 0}
    w, faults = watch("fail", batch=lambda: state["batch"], data_records=_reader(log, reads))
    with caplog.at_level(logging.INFO, logger="k2k.runner"):
        _marker_written_twice(log, w, state, foreign=0)
    assert found(w) == 0 and not faults.failures
    assert reads and all(last < len(log.slots) for _, last in reads)
    assert "transaction marker written again" in caplog.text


def test_exactly_once_foreign_records_beside_a_marker_written_again_are_counted():
    log, reads, state = _Log(), [], {"batch": 0}
    w, _ = watch(batch=lambda: state["batch"], data_records=_reader(log, reads))
    _marker_written_twice(log, w, state, foreign=2)
    assert reads and found(w) == 3  # the rule's count: the extra marker beside two records


def test_exactly_once_without_a_reader_counts_a_marker_written_again():
    log, state = _Log(), {"batch": 0}
    w, _ = watch(batch=lambda: state["batch"])
    _marker_written_twice(log, w, state, foreign=0)
    assert found(w) == 1
