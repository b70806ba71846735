"""Every Kafka failure maps to exactly one outcome (k2k.kafka.faults.classify).

The errors are real ``KafkaError`` values built with the flags librdkafka sets; no client is
involved. That each outcome is also what a real broker provokes is covered by the
integration tests (fencing, aborts, unreachable clusters).
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from k2k.errors import Unavailable
from k2k.kafka.faults import (
    Outcome,
    abort_transaction,
    classify,
    cluster_error,
    describe,
    kafka_error_of,
    tls_failure_hint,
)


@pytest.mark.parametrize(
    "err",
    [
        KafkaError(KafkaError._TRANSPORT, "broker went away"),
        KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION),
        KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
        # A transactional call that timed out: librdkafka says the call may be repeated.
        KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True),
        KafkaError(KafkaError.CONCURRENT_TRANSACTIONS, retriable=True),
    ],
    ids=lambda err: err.name(),
)
def test_transient_errors_are_retried(err: KafkaError) -> None:
    assert classify(err) is Outcome.RETRY


@pytest.mark.parametrize(
    "err",
    [
        KafkaError(KafkaError.MSG_SIZE_TOO_LARGE),
        KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED),
        KafkaError(KafkaError._AUTO_OFFSET_RESET, "offset out of range"),
        # Fatal wins over every other flag: the producer cannot be used any more.
        KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True),
        KafkaError(KafkaError._TRANSPORT, fatal=True),
        KafkaError(KafkaError._FATAL, "producer is fatal", fatal=True),
        KafkaError(KafkaError.INVALID_TXN_STATE, fatal=True, txn_requires_abort=True),
    ],
    ids=lambda err: f"{err.name()}{'-fatal' if err.fatal() else ''}",
)
def test_permanent_and_fatal_errors_fail(err: KafkaError) -> None:
    assert classify(err) is Outcome.FAIL


def test_an_unknown_code_fails_rather_than_being_skipped() -> None:
    """Never silent loss: a code nobody listed stops the lease with its reason."""
    err = KafkaError(-12345, "something new")
    assert classify(err) is Outcome.FAIL
    assert describe(err).startswith("something new (")


@pytest.mark.parametrize(
    "err",
    [
        KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True),
        KafkaError(KafkaError.PRODUCER_FENCED, fatal=True),
        KafkaError(KafkaError.INVALID_PRODUCER_EPOCH),
        # Fenced also wins over an abortable flag: there is nothing left to abort with.
        KafkaError(KafkaError.PRODUCER_FENCED, txn_requires_abort=True),
    ],
    ids=lambda err: f"{err.name()}{'-fatal' if err.fatal() else ''}",
)
def test_a_newer_owner_of_the_transactional_id_fences(err: KafkaError) -> None:
    assert classify(err) is Outcome.FENCED


@pytest.mark.parametrize(
    "err",
    [
        KafkaError(KafkaError._MSG_TIMED_OUT, "records expired", txn_requires_abort=True),
        KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, txn_requires_abort=True),
        # Abortable wins over retriable: repeating a commit that must abort cannot succeed.
        KafkaError(KafkaError._TIMED_OUT, retriable=True, txn_requires_abort=True),
    ],
    ids=lambda err: err.name(),
)
def test_abortable_transaction_errors_abort(err: KafkaError) -> None:
    assert classify(err) is Outcome.ABORT


def test_describe_adds_the_operator_hint() -> None:
    text = describe(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large"))
    assert text.startswith("Broker: Message size too large (MSG_SIZE_TOO_LARGE): ")
    assert "max.message.bytes" in text


def test_describe_finds_the_hint_of_a_cause_wrapped_in_a_fatal_error() -> None:
    err = KafkaError(
        KafkaError._GAPLESS_GUARANTEE,
        "ProduceRequest failed: Broker: Message size too large: gapless guarantee broken",
        fatal=True,
    )
    assert "max.message.bytes" in describe(err)


def test_describe_without_a_known_hint_is_the_brokers_words_and_the_code() -> None:
    err = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "Broker: Not leader for partition")
    assert describe(err) == "Broker: Not leader for partition (NOT_LEADER_FOR_PARTITION)"


def test_kafka_error_of_unwraps_a_system_error_raised_from_a_callback() -> None:
    err = KafkaError(KafkaError._FENCED, fatal=True)
    try:
        try:
            raise KafkaException(err)
        except KafkaException as inner:
            raise SystemError("error return without exception set") from inner
    except SystemError as exc:
        assert kafka_error_of(exc) is err
    assert kafka_error_of(ValueError("not Kafka")) is None


def test_cluster_error_names_the_cluster_and_the_setting_to_check() -> None:
    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
    error = cluster_error(exc, "source", "src:9092", "listing topics")
    assert str(error).startswith("source cluster unreachable at src:9092 while listing topics")
    assert "source.kafka.common.bootstrap.servers" in str(error)
    auth = KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED, "Invalid username or password")
    error = cluster_error(exc, "target", "tgt:9092", "listing topics", cause=auth)
    assert "authentication failed" in str(error)
    assert "Invalid username or password" in str(error)
    tls = KafkaError(
        KafkaError._SSL,
        "ssl://tgt:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
        "certificate verify failed",
    )
    error = cluster_error(exc, "target", "tgt:9093", "listing topics", cause=tls)
    assert str(error).startswith("target cluster at tgt:9093: TLS handshake failed")
    assert "certificate verify failed" in str(error) and "ssl.truststore.location" in str(error)
    assert "\n" not in str(error)


def test_a_failed_abort_is_returned_and_logged_as_one_line_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real client refuses locally (``_STATE``) to abort before ``init_transactions``, with no
    broker involved; INVALID_TXN_STATE from a real coordinator is provoked in
    tests/integration/test_abort_failure.py."""
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "k2k-g-m-0.a"})
    caplog.set_level(logging.WARNING, logger="k2k.transactions")
    err = abort_transaction(producer, 5.0, "k2k-g-m-0.a")
    assert err is not None and err.code() == KafkaError._STATE
    lines = [r.getMessage() for r in caplog.records if r.name == "k2k.transactions"]
    assert lines == [
        "could not abort the transaction of transactional id k2k-g-m-0.a: Operation not valid "
        "in state Init (_STATE); the producer is discarded, and the id is fenced (initialised "
        "again) before anything is written under it again"
    ]


def test_a_broker_refusing_the_client_certificate_is_a_tls_failure_not_an_outage() -> None:
    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
    refused = KafkaError(
        KafkaError._TRANSPORT,
        "ssl://tgt:9093/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert "
        "bad certificate: SSL alert number 42 (after 0ms in state APIVERSION_QUERY)",
    )
    error = cluster_error(exc, "target", "tgt:9093", "listing topics", cause=refused)
    assert not isinstance(error, Unavailable)
    assert str(error).startswith("target cluster at tgt:9093: TLS handshake failed")
    assert "refused this client's certificate" in str(error) and "ssl.keystore" in str(error)
    eof = KafkaError(
        KafkaError._TRANSPORT,
        "ssl://tgt:9093/1: Receive failed: error:0A000126:SSL routines::unexpected eof while reading",
    )
    assert tls_failure_hint(eof) is None
    assert isinstance(
        cluster_error(exc, "target", "tgt:9093", "listing topics", cause=eof), Unavailable
    )
