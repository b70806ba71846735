"""The effective client settings: k2k's defaults, the user's properties over them, and the
forced settings over both (k2k.kafka.factory)."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import Producer

from k2k.kafka.factory import (
    CONSUMER_DEFAULTS,
    admin_settings,
    consumer_settings,
    producer_settings,
    ready,
)


def test_source_fetches_are_batched_by_default() -> None:
    conf = consumer_settings({"bootstrap.servers": "b:9092"}, "g")
    assert conf["fetch.min.bytes"] == "65536"
    assert conf["fetch.wait.max.ms"] == "25"
    assert conf["isolation.level"] == "read_committed"


def test_user_fetch_settings_win_over_the_defaults() -> None:
    conf = consumer_settings({"fetch.min.bytes": "1", "fetch.wait.max.ms": "500"}, "g")
    assert (conf["fetch.min.bytes"], conf["fetch.wait.max.ms"]) == ("1", "500")


def test_user_linger_wins_in_both_modes() -> None:
    for exactly_once in (False, True):
        assert producer_settings({}, False, exactly_once=exactly_once)["linger.ms"] == "5"
        conf = producer_settings({"linger.ms": "0"}, False, exactly_once=exactly_once)
        assert conf["linger.ms"] == "0"
        assert (conf["acks"], conf["enable.idempotence"]) == ("all", "true")


def test_exactly_once_producers_keep_two_requests_in_flight_unless_told() -> None:
    assert "max.in.flight.requests.per.connection" not in producer_settings({}, False)
    conf = producer_settings({}, False, exactly_once=True)
    assert conf["max.in.flight.requests.per.connection"] == "2"
    mine = {"max.in.flight.requests.per.connection": "5"}
    assert (
        producer_settings(mine, False, exactly_once=True)["max.in.flight.requests.per.connection"]
        == "5"
    )


def test_whole_partition_readers_keep_fetching_under_the_users_settings() -> None:
    """``k2k verify``'s readers and the control topics' readers take the fetch defaults that
    stop librdkafka from pausing a second whenever their queue fills; the user's win."""
    from k2k.kafka.tail import tail_settings
    from k2k.verify.job import _whole_partition_reader

    verify = _whole_partition_reader({"bootstrap.servers": "b:9092"}, "k2k.p.verify")
    assert {k: verify[k] for k in CONSUMER_DEFAULTS} == {
        **CONSUMER_DEFAULTS,
        "isolation.level": "read_committed",
    }
    assert (verify["enable.auto.commit"], verify["enable.partition.eof"]) == ("false", "true")
    mine = _whole_partition_reader({"fetch.queue.backoff.ms": "100", "fetch.min.bytes": "1"}, "g")
    assert (mine["fetch.queue.backoff.ms"], mine["fetch.min.bytes"]) == ("100", "1")

    assert tail_settings({}, "g")["fetch.queue.backoff.ms"] == "1"
    assert tail_settings({"fetch.queue.backoff.ms": "100"}, "g")["fetch.queue.backoff.ms"] == "100"
    assert tail_settings({}, "g", untransacted=True)["isolation.level"] == "read_uncommitted"


def test_executors_import_the_runner_and_the_verify_task_without_the_config_model() -> None:
    """What a Python worker imports for a lease or a verify task: not the config model, whose
    import was a share of every worker's start (docs/benchmarks.md, issue 21's section)."""
    code = (
        "import sys, k2k.pipeline.task.runner, k2k.verify.task\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'k2k.config'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_ready_returns_the_client_and_leaves_a_failure_to_the_next_request():
    """Nothing listens on port 1: the metadata request times out quietly; the caller's next
    request (here a flush) is the one that meets the failure."""
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    assert ready(producer, "any", timeout_s=0.2) is producer
    producer.produce("any", b"x")
    assert producer.flush(0.2) == 1  # still queued: no broker


def test_admin_clients_ride_out_a_dead_broker_unless_told() -> None:
    """A dead broker must not stall admin requests for minutes nor make the client
    reconnect to it in a busy loop (see ADMIN_DEFAULTS); a user's own values win."""
    assert admin_settings({"bootstrap.servers": "b:9092"}) == {
        "bootstrap.servers": "b:9092",
        "topic.metadata.refresh.interval.ms": "5000",
        "enable.sparse.connections": "false",
    }
    mine = {"topic.metadata.refresh.interval.ms": "60000", "enable.sparse.connections": "true"}
    assert admin_settings(mine) == mine
