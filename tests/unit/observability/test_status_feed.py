"""The status page's feed with a scripted snapshot: what a document holds, how rates and
history are made, when it samples, and that a failed read is an error, never a crash."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from k2k.observability.http import feed as feed_module
from k2k.observability.http.feed import STALL_S, StatusFeed, _Sample
from k2k.observability.readiness import Health
from tests.helpers.kafka import eventually


def _doc(committed: list[int], behind: int = 5, alive: int = 1, lag: float = 1.5) -> dict:
    """A ``k2k status --json`` document with one partition per committed offset."""
    return {
        "pipeline": "orders",
        "exactlyOnce": False,
        "members": [{"member": "a", "state": "alive"}],
        "partitions": [
            {"topic": "t", "partition": i, "committed": c} for i, c in enumerate(committed)
        ],
        "totals": {"recordsBehind": behind, "maxLagSeconds": lag, "membersAlive": alive},
    }


class Script:
    """A snapshot that returns the next scripted document (or raises the next exception) and
    a clock that moves ``step`` seconds per read."""

    def __init__(self, docs: list[Any], step: float = 2.0) -> None:
        self.docs = docs
        self.calls = 0
        self.now = 1_000.0
        self.step = step

    def clock(self) -> float:
        self.now += self.step
        return self.now

    def __call__(self) -> dict:
        item = self.docs[min(self.calls, len(self.docs) - 1)]
        self.calls += 1
        if isinstance(item, BaseException):
            raise item
        return item


@pytest.fixture
def make_feed() -> Iterator[Callable[..., StatusFeed]]:
    feeds: list[StatusFeed] = []

    def make(script: Script, **kwargs: Any) -> StatusFeed:
        kwargs.setdefault("interval", 0.01)
        f = StatusFeed(script, source="control-topics", clock=script.clock, **kwargs)
        feeds.append(f)
        return f

    yield make
    for f in feeds:
        f.close()


def assert_invariants(history: dict[str, list]) -> None:
    """Times increase, every series is as long as the times, and the window is kept."""
    t = history["t"]
    assert t == sorted(set(t))
    assert all(len(v) == len(t) for v in history.values())
    assert not t or t[-1] - t[0] <= feed_module.HISTORY_S


def test_the_first_request_samples_at_once_and_the_document_has_the_contract_fields(make_feed):
    script = Script([_doc([10, 20])])
    doc = make_feed(script, pipeline="orders")()
    assert script.calls >= 1
    assert doc["v"] == 1 and doc["source"] == "control-topics"
    assert doc["pipeline"] == "orders" and doc["totals"]["recordsBehind"] == 5
    assert doc["ready"] == {"ready": True, "reason": "1 members alive, 5 records behind"}
    assert doc["errors"] == []
    assert doc["history"]["recordsBehind"][0] == 5
    assert doc["history"]["recoveryPointSeconds"][0] == 1.5
    assert doc["history"]["recordsPerSecond"][0] is None  # no earlier sample
    assert set(doc["rates"]) == {"recordsPerSecond"}


def test_records_per_second_is_the_change_of_committed_offsets_between_samples(make_feed):
    # Each read is 2 s after the one before; committed offsets grow by 30 and 10 per read.
    docs = [_doc([100 + 30 * i, 50 + 10 * i]) for i in range(6)]
    script = Script(docs, step=2.0)
    f = make_feed(script, interval=2.0 / 3)  # the fake clock's 2 s are within 3 intervals
    doc = _until_samples(f, 4)
    rates = doc["history"]["recordsPerSecond"]
    assert rates[0] is None and set(rates[1:]) == {20.0}
    assert doc["rates"]["recordsPerSecond"] == 20.0


def test_after_a_pause_the_rate_is_unknown_and_old_samples_leave_the_window(make_feed):
    # Reads 100 s apart: no rate, and at most 600 s of history is kept.
    script = Script([_doc([i * 1000]) for i in range(30)], step=100.0)
    f = make_feed(script)

    def trimmed() -> dict | None:
        doc = f()
        assert_invariants(doc["history"])
        return doc if script.calls >= 12 else None

    doc = eventually(trimmed, timeout=30, interval=0.05)
    history = doc["history"]
    assert len(history["t"]) <= 7
    assert set(history["recordsPerSecond"]) == {None}


def test_sampling_stops_when_nobody_looks_and_starts_again_on_a_request(make_feed, monkeypatch):
    monkeypatch.setattr(feed_module, "VIEWED_S", 0.05)
    script = Script([_doc([1])])
    f = make_feed(script)
    f()
    eventually(lambda: f._thread is None, expected=True, timeout=10, interval=0.02)
    stopped_at = script.calls
    f()
    assert script.calls > stopped_at


def test_a_failed_read_is_an_error_and_not_ready_and_the_next_read_clears_it(make_feed):
    script = Script([RuntimeError("control topic k2k-commit unreadable"), _doc([5])])
    f = make_feed(script, interval=60.0)
    doc = f()
    assert doc["ready"] == {
        "ready": False,
        "reason": "cannot read the pipeline's state: RuntimeError: control topic k2k-commit "
        "unreadable",
    }
    (error,) = doc["errors"]
    assert (error["class"], error["message"]) == (
        "RuntimeError",
        "control topic k2k-commit unreadable",
    )
    assert doc["partitions"] == [] and doc["totals"] is None
    f._sample()  # the next scheduled read, now
    doc = f()
    assert doc["ready"]["ready"] is True
    assert len(doc["errors"]) == 1  # kept as the page's last errors


def test_supplied_readiness_and_errors_come_first_and_errors_are_capped(make_feed):
    errs = [{"at": float(i), "class": "ReplicationError", "message": f"e{i}"} for i in range(25)]
    f = make_feed(
        Script([_doc([1], alive=0)]),
        ready=lambda: Health(False, "target unreachable for 70 s"),
        errors=lambda: list(reversed(errs)),
    )
    doc = f()
    assert doc["ready"] == {"ready": False, "reason": "target unreachable for 70 s"}
    assert [e["message"] for e in doc["errors"]] == [f"e{i}" for i in range(5, 25)]
    assert f.health() == Health(False, "target unreachable for 70 s")


def _samples(behind: list[int], committed: list[int], alive: int = 1, step: float = 10.0):
    return [
        _Sample(i * step, {("t", 0): c}, None, b, 1.0, alive)
        for i, (b, c) in enumerate(zip(behind, committed, strict=True))
    ]


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], Health(False, "no status read yet")),
        (
            _samples([0], [5], alive=0),
            Health(False, "no member of the commit group is alive"),
        ),
        (
            _samples([10 * i for i in range(8)], [5] * 8),
            Health(False, "records behind grew from 10 to 70 in 60 s without a commit"),
        ),
        (
            _samples([10 * i for i in range(8)], [5 + i for i in range(8)]),
            Health(True, "1 members alive, 70 records behind"),
        ),
        (_samples([3, 3, 3], [5, 5, 5]), Health(True, "1 members alive, 3 records behind")),
    ],
    ids=["nothing-read", "no-member", "stalled", "growing-but-committing", "short-window"],
)
def test_control_topic_readiness(history, expected):
    assert STALL_S == 60.0
    assert StatusFeed.judge(history, None) == expected


def test_rates_compare_offsets_partition_by_partition(make_feed):
    """A partition that appears later adds nothing to the rate at its first sample."""
    docs = [_doc([10]), _doc([12, 1000]), _doc([14, 1002])]
    f = make_feed(Script(docs, step=1.0), interval=0.5)
    doc = _until_samples(f, 3)
    assert doc["history"]["recordsPerSecond"][:3] == [None, 2.0, 4.0]


def _until_samples(f: StatusFeed, n: int) -> dict:
    """The document once its history has ``n`` samples, invariants checked on every poll."""

    def enough() -> dict | None:
        doc = f()
        assert_invariants(doc["history"])
        return doc if len(doc["history"]["t"]) >= n else None

    return eventually(enough, timeout=30, interval=0.05)
