"""The effective client settings: k2k's defaults, the user's properties over them, and the
forced settings over both (k2k.kafka.factory)."""

from __future__ import annotations

from k2k.kafka.factory import consumer_settings, producer_settings


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
