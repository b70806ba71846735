"""Admin requests in chunks, retried while the cluster says "not yet" (k2k.kafka.bulk.ask).

No client is involved: ``send`` stands where an AdminClient call would, and answers with
the futures and the real ``KafkaError`` values such a call gives. That a real broker's
answers take these paths is covered by tests/integration/test_many_topics.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from k2k.kafka.bulk import Backoff, ask, chunked

NOT_LEADER = KafkaError.NOT_LEADER_FOR_PARTITION
UNKNOWN = KafkaError.UNKNOWN_TOPIC_OR_PART


class _Future(Future):
    """A finished future that notes in ``events`` when its answer is read."""

    def __init__(self, key: Any, value: Any, events: list[str]) -> None:
        super().__init__()
        self.key, self.events = key, events
        if isinstance(value, KafkaError):
            self.set_exception(KafkaException(value))
        else:
            self.set_result(value)

    def result(self, timeout: float | None = None) -> Any:
        self.events.append(f"read {self.key}")
        return super().result(timeout)


class _Cluster:
    """Answers each key from a script: ``script[key]`` is the list of answers per round
    (a ``KafkaError`` or a value); the last one repeats."""

    def __init__(self, script: Mapping[Any, list[Any]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.events: list[str] = []
        self.requests: list[list[Any]] = []

    def send(self, keys: list[Any], timeout_s: float) -> dict[Any, Future]:
        assert timeout_s > 0
        self.requests.append(list(keys))
        self.events.append(f"send {len(keys)}")
        out = {}
        for key in keys:
            answers = self.script[key]
            out[key] = _Future(key, answers.pop(0) if len(answers) > 1 else answers[0], self.events)
        return out


def _ask(cluster: _Cluster, **kwargs: Any) -> Any:
    options: dict[str, Any] = {"chunk": 2, "timeout_s": 5.0, "doing": "testing"}
    options.update(kwargs)
    return ask(list(cluster.script), cluster.send, **options)


def test_keys_go_in_chunks_all_sent_before_any_answer_is_read():
    cluster = _Cluster({k: [k * 10] for k in range(5)})
    got = _ask(cluster)
    assert got.values == {k: k * 10 for k in range(5)} and got.errors == {}
    assert cluster.requests == [[0, 1], [2, 3], [4]]
    assert cluster.events[:3] == ["send 2", "send 2", "send 1"]
    assert cluster.events[3:] == [f"read {k}" for k in range(5)]


def test_only_keys_answered_retriably_are_asked_again_until_answered():
    cluster = _Cluster(
        {
            "a": [1],
            "b": [KafkaError(NOT_LEADER), KafkaError(KafkaError.NOT_CONTROLLER), 2],
            "c": [KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS), 3],
        }
    )
    got = _ask(cluster, chunk=10)
    assert got.values == {"a": 1, "b": 2, "c": 3} and got.errors == {}
    assert cluster.requests == [["a", "b", "c"], ["b", "c"], ["b"]]


def test_a_final_error_is_returned_at_once_and_an_answer_code_is_no_retry():
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    exists = KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)
    cluster = _Cluster({"denied": [denied], "exists": [exists], "ok": [1]})
    got = _ask(cluster, answers=(KafkaError.TOPIC_ALREADY_EXISTS,))
    assert got.values == {"ok": 1}
    assert {k: e.code() for k, e in got.errors.items()} == {
        "denied": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "exists": KafkaError.TOPIC_ALREADY_EXISTS,
    }
    assert not got.gave_up
    assert len(cluster.requests) == 2  # one round, in two chunks


def test_unknown_topic_is_retried_only_where_the_caller_says_it_settles():
    answers = {"new": [KafkaError(UNKNOWN), 7]}
    assert _ask(_Cluster(answers), settling=(UNKNOWN,)).values == {"new": 7}
    got = _ask(_Cluster(answers))
    assert got.values == {} and got.errors["new"].code() == UNKNOWN


def test_a_key_still_retriable_at_the_deadline_is_an_error_and_says_so():
    cluster = _Cluster({"stuck": [KafkaError(NOT_LEADER)], "ok": [1]})
    started = time.monotonic()
    got = _ask(cluster, timeout_s=0.4)
    assert time.monotonic() - started < 2.0
    assert got.values == {"ok": 1}
    assert got.errors["stuck"].code() == NOT_LEADER and got.gave_up
    rounds = len(cluster.requests) - 1  # the first request carried both keys
    assert rounds >= 2 and all(r == ["stuck"] for r in cluster.requests[1:])


def test_a_cluster_answering_one_more_key_per_round_is_waited_for_beyond_the_timeout():
    """The time counts from the last progress: a busy broker settling partition by
    partition is not cut off, however long it takes in all."""
    keys = 12
    cluster = _Cluster({k: [KafkaError(NOT_LEADER)] * k + [k] for k in range(keys)})
    started = time.monotonic()
    got = _ask(cluster, timeout_s=0.15, backoff=Backoff(0.05, 0.05))
    assert time.monotonic() - started > 0.15 * 3  # far beyond one timeout
    assert got.values == {k: k for k in range(keys)} and got.errors == {}


def test_without_retry_a_retriable_answer_comes_back_after_one_round():
    cluster = _Cluster({"a": [KafkaError(NOT_LEADER), 1]})
    got = _ask(cluster, retry=False)
    assert got.errors["a"].code() == NOT_LEADER and len(cluster.requests) == 1


def test_a_chunk_refused_before_sending_fails_its_keys_only():
    cluster = _Cluster({k: [k] for k in range(4)})

    def send(keys: list[int], timeout_s: float) -> dict[int, Future]:
        if 0 in keys:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "bad request"))
        return cluster.send(keys, timeout_s)

    got = ask(range(4), send, chunk=2, timeout_s=1.0, doing="testing")
    assert got.values == {2: 2, 3: 3}
    assert {k: e.code() for k, e in got.errors.items()} == {
        0: KafkaError._INVALID_ARG,
        1: KafkaError._INVALID_ARG,
    }


@pytest.mark.parametrize("size", [0, -1])
def test_a_chunk_size_below_one_is_refused(size: int):
    with pytest.raises(ValueError, match=f"got {size}"):
        list(chunked([1], size))


def test_the_first_retry_is_logged_once_at_info(caplog: pytest.LogCaptureFixture):
    cluster = _Cluster({("t", 0): [KafkaError(NOT_LEADER)] * 3 + [5]})
    with caplog.at_level("DEBUG", logger="k2k.kafka"):
        _ask(cluster)
    retries = [r for r in caplog.records if "answered" in r.getMessage()]
    assert [r.levelname for r in retries] == ["INFO", "DEBUG", "DEBUG"]
    assert "testing: 1 answered" in retries[0].getMessage()
    assert "t[0]" in retries[0].getMessage()
    rounds = [r.getMessage() for r in caplog.records if "request(s)" in r.getMessage()]
    assert rounds == ["testing: 1 in 1 request(s)"] * 4
