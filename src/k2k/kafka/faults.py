"""Classify every Kafka failure once, into a named outcome.

The data path and the planner never decide ad hoc what a ``KafkaError`` means: they ask
:func:`classify`. The outcomes are

* ``RETRY`` — transient: librdkafka recovers by itself (reconnects, leader moves), or the
  failed call may be repeated as it is; keep going.
* ``FAIL`` — the lease stops, its uncommitted work is abandoned (replayed from the last
  progress record on the next start) and the pipeline reports the reason (:func:`describe`).
* ``FENCED`` — another owner took the transactional id over: stand down without error; the
  new owner continues from the committed progress.
* ``ABORT`` — the open transaction cannot commit but the producer is still usable: abort
  it; its batch is replayed from the last committed progress.

Rules, in order: fenced wins (a fenced producer is also fatal), then fatal fails, then
abortable aborts, then transient retries; everything else fails, so an error nobody
expected is never silent loss.

An abort that fails has one outcome whatever the error, *fence and recreate*
(:func:`abort_transaction`): the producer is discarded, and its transactional id is
initialised again on a fresh producer, which ends whatever the broker still holds open,
before anything is written under it again. librdkafka's abort fails e.g. with a fatal
``INVALID_TXN_STATE`` when the transaction's partitions were never registered with the
coordinator (confluentinc/librdkafka#4849; docs/exactly-once.md#when-an-abort-fails).
"""

from __future__ import annotations

import enum
import logging
import re
import time
from collections.abc import Iterable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from k2k.errors import ClusterError, K2KError, Unavailable

__all__ = [
    "AUTH_FAILURES",
    "Outcome",
    "abort_transaction",
    "classify",
    "cluster_error",
    "describe",
    "failure_kind",
    "fatal_cause",
    "is_transient",
    "is_unreachable",
    "kafka_error_of",
    "tls_failure_hint",
]


E = TypeVar("E", bound=K2KError)

log = logging.getLogger("k2k.transactions")

#: How long :func:`fatal_cause` waits for a fatal producer to raise its cause.
FATAL_CAUSE_WAIT_S = 5.0
#: Each producer's poll blocks this long waiting for an event, so the wait is not a spin.
_FATAL_CAUSE_POLL_S = 0.05


class Outcome(enum.Enum):
    """What the caller does about one client error (see the module docstring)."""

    RETRY = "retry"
    FAIL = "fail"
    FENCED = "fenced"
    ABORT = "abort"


#: A newer producer with the same transactional id exists: librdkafka's own code when it
#: noticed, and the broker's two answers to a stale epoch.
_FENCED = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)


#: Transient conditions librdkafka retries internally; surfacing them is informational.
_TRANSIENT = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        # A cluster settling: a controller moving or busy, a leader being elected or its
        # followers catching up, quotas on topic changes; the same request works soon.
        KafkaError.NOT_CONTROLLER,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.THROTTLING_QUOTA_EXCEEDED,
    }
)

#: Errors that only say a cluster (or one of its brokers) cannot be reached right now. They
#: arrive several times a second per client during an outage; librdkafka reconnects by
#: itself, and ``k2k start`` reports the outage once per cluster instead
#: (:mod:`k2k.observability.reachability`).
_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE})

_HINTS = {
    KafkaError.MSG_SIZE_TOO_LARGE: (
        "the record is larger than the target allows; raise the target topic's "
        "max.message.bytes (topicCreation.replicated.configs) and the producer's "
        "message.max.bytes"
    ),
    KafkaError._MSG_TIMED_OUT: (
        "the target did not acknowledge within message.timeout.ms; check the target cluster"
    ),
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "grant the principal access to the topic",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "grant the principal the needed cluster ACLs",
    KafkaError.SASL_AUTHENTICATION_FAILED: "check the SASL mechanism, username and password",
    KafkaError._AUTHENTICATION: "check the SASL/TLS settings and credentials",
    KafkaError._SSL: (
        "check ssl.truststore.location (the CA certificates that signed the brokers' "
        "certificates), ssl.endpoint.identification.algorithm and, with client certificates, "
        "ssl.keystore.*"
    ),
    KafkaError.UNKNOWN_TOPIC_OR_PART: "the topic or partition does not exist (was it deleted?)",
    KafkaError._UNKNOWN_PARTITION: "the partition does not exist on the target topic",
    KafkaError._AUTO_OFFSET_RESET: (
        "source records after the committed progress were deleted (retention) before they "
        "were replicated; k2k does not skip them silently: to continue from the earliest "
        "offset still there, stop the pipeline and run k2k offsets reset -f <pipeline file> "
        "--topic T --partition P (k2k status shows which partitions)"
    ),
    KafkaError.OFFSET_OUT_OF_RANGE: (
        "the committed progress points outside the source partition (records deleted by "
        "retention, or the topic recreated?); see k2k status, then move it with k2k offsets "
        "set or reset"
    ),
}


def classify(err: KafkaError) -> Outcome:
    """Map one client error to its outcome. Fatal and unknown errors fail: never silent loss.

    A bare ``_FATAL`` (a call on a producer that is already fatal) fails; pass it through
    :func:`fatal_cause` first to learn whether the producer was fenced.
    """
    if err.code() in _FENCED:
        return Outcome.FENCED
    if err.fatal():
        return Outcome.FAIL
    if err.txn_requires_abort():
        return Outcome.ABORT
    if err.retriable() or err.code() in _TRANSIENT:
        return Outcome.RETRY
    return Outcome.FAIL


def is_unreachable(err: KafkaError) -> bool:
    """True for a non-fatal "cannot reach the broker(s)" error (connection refused or lost,
    name not resolved, all brokers down): transient, and not worth a line of its own.

    >>> is_unreachable(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
    True
    >>> is_unreachable(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    False
    """
    return err.code() in _UNREACHABLE and not err.fatal()


def is_transient(err: KafkaError) -> bool:
    """True for a non-fatal error that says a cluster did not answer in time (down,
    restarting, no leader) rather than refused: what an outage looks like to a client.

    >>> is_transient(KafkaError(KafkaError._MSG_TIMED_OUT))
    True
    >>> is_transient(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    False
    """
    if err.fatal() or err.code() in _FENCED:
        return False
    return err.code() in _TRANSIENT or err.code() == KafkaError._MSG_TIMED_OUT or err.retriable()


def failure_kind(err: KafkaError | None, otherwise: type[E]) -> type[E] | type[Unavailable]:
    """The error to raise for a failure caused by ``err``: :class:`~k2k.errors.Unavailable`
    for an outage's (:func:`is_transient`, waited out by a running pipeline), else
    ``otherwise``.

    >>> failure_kind(KafkaError(KafkaError._MSG_TIMED_OUT), ClusterError).__name__
    'Unavailable'
    """
    return Unavailable if err is not None and is_transient(err) else otherwise


#: A fatal producer error (gapless guarantee) wraps the broker's error in its text only.
_WRAPPED_CAUSES = (("Message size too large", KafkaError.MSG_SIZE_TOO_LARGE),)


def describe(err: KafkaError) -> str:
    """One line: the broker's words plus, where we know one, what the operator can do."""
    text = err.str() or err.name()
    hint = _HINTS.get(err.code())
    if hint is None and err.fatal():
        hint = next((_HINTS[code] for phrase, code in _WRAPPED_CAUSES if phrase in text), None)
    return f"{text} ({err.name()}): {hint}" if hint else f"{text} ({err.name()})"


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    """The KafkaError behind ``exc``, also when the client re-raised it as a SystemError.

    confluent-kafka raises a fatal producer error from ``poll``/``flush``; if a delivery
    callback runs in the same call, the error surfaces as a SystemError whose cause is the
    original KafkaException.
    """
    for e in (exc, exc.__cause__, exc.__context__):
        if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
            return e.args[0]
    return None


def fatal_cause(
    err: KafkaError, producers: Iterable[Producer], wait_s: float = FATAL_CAUSE_WAIT_S
) -> KafkaError:
    """The error that made a producer fatal, when ``err`` only says that it is.

    Once a producer is fatal, ``produce`` fails with the bare ``_FATAL`` code; the cause
    (e.g. ``_FENCED``: a newer owner took the transactional id over) is raised once, by a
    later ``poll`` of that producer, and a callback run by the same call can swallow it
    (the call then fails with a SystemError and no cause). A fatal *transactional* producer
    also answers every transactional call with its cause, however often asked: that is
    the second source. librdkafka marks the client fatal *before* it queues the raised
    cause, so the producers are asked until one answers, for at most ``wait_s``. A caller
    that does not know which of its producers failed passes them all; with no answer,
    ``err`` is returned as it is once ``wait_s`` is over.
    """
    candidates = list(producers)
    if err.code() != KafkaError._FATAL or not candidates:
        return err  # nothing to learn, and nothing to poll (no spinning for wait_s)
    deadline = time.monotonic() + wait_s
    while True:
        for producer in candidates:
            cause = _raised_cause(producer) or _transactional_cause(producer)
            if cause is not None:
                return cause
        if time.monotonic() >= deadline:
            return err


def abort_transaction(
    producer: Producer, timeout_s: float, transactional_id: str
) -> KafkaError | None:
    """Abort the transaction open on ``producer``; None when it is aborted.

    Never raises for a client error. A failed abort (fatal ``INVALID_TXN_STATE`` of
    librdkafka#4849, a producer already fatal, a timeout, ``_STATE``) is logged as one line
    and returned, and the caller must discard ``producer``: its transaction's outcome is the
    broker's now, and ``transactional_id`` is fenced (``init_transactions`` on a fresh
    producer of that id) before anything is written under it again. k2k's callers fail what
    they were doing, so the claims their writes depended on are not released and the next
    owner fences the id first (:mod:`k2k.coordination.assignment`). Call it only with a
    transaction begun: without one the client refuses with ``_STATE``, which logs too.

    The line is a warning, except for an outage's error (:func:`is_transient`, e.g. the
    abort timed out): at INFO then, since the outage is reported once per cluster.
    """
    try:
        producer.abort_transaction(timeout_s)
        return None
    except (KafkaException, SystemError) as exc:
        err = kafka_error_of(exc) or KafkaError(KafkaError._FAIL, f"abort failed: {exc}")
    log.log(
        logging.INFO if is_transient(err) else logging.WARNING,
        "could not abort the transaction of transactional id %s: %s; the producer is "
        "discarded, and the id is fenced (initialised again) before anything is written "
        "under it again",
        transactional_id,
        describe(err),
    )
    return err


def _raised_cause(producer: Producer) -> KafkaError | None:
    try:
        producer.poll(_FATAL_CAUSE_POLL_S)
    except (KafkaException, SystemError) as exc:
        return kafka_error_of(exc)
    return None


def _transactional_cause(producer: Producer) -> KafkaError | None:
    """Ask with ``begin_transaction``: a fatal producer answers with its cause; a healthy
    one begins a local transaction (no request; the caller abandons this producer's work
    anyway) or refuses for its state; a non-transactional one is not configured for it."""
    try:
        producer.begin_transaction()
    except KafkaException as exc:
        cause = kafka_error_of(exc)
        if cause is not None and cause.fatal() and cause.code() != KafkaError._FATAL:
            return cause
    return None


#: The codes of a refused login: settings to fix, never an outage to wait out.
AUTH_FAILURES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})

#: OpenSSL's words for a broker that ended the handshake over this client's certificate
#: (none given, or one the broker's truststore does not trust). Under TLS 1.3 that alert
#: arrives after the handshake, so librdkafka reports it as ``_TRANSPORT``, not ``_SSL``.
_CERTIFICATE_ALERT = re.compile(
    r"alert (bad certificate|certificate required|unknown ca|certificate (expired|revoked|unknown))"
)
_REFUSED_CERTIFICATE = (
    "the broker refused this client's certificate (it requires one, or does not trust the one "
    "given): check ssl.keystore.* (or ssl.certificate.location and ssl.key.location)"
)


def tls_failure_hint(err: KafkaError) -> str | None:
    """What to check when ``err`` says a TLS handshake failed over a certificate, else None.

    ``_SSL`` is this client refusing the broker's certificate; a ``_TRANSPORT`` error quoting
    a certificate alert is the broker refusing this client's. Other transport errors (also
    TLS ones such as an unexpected end of file) are what an outage looks like: None.

    >>> tls_failure_hint(KafkaError(KafkaError._TRANSPORT, "Connection refused")) is None
    True
    """
    if err.code() == KafkaError._SSL:
        return _HINTS[KafkaError._SSL]
    if err.code() == KafkaError._TRANSPORT and _CERTIFICATE_ALERT.search(err.str() or ""):
        return _REFUSED_CERTIFICATE
    return None


def cluster_error(
    exc: KafkaException | KafkaError,
    cluster: str,
    bootstrap: str,
    doing: str,
    cause: KafkaError | None = None,
) -> ClusterError:
    """Wrap a failed driver-side request to ``cluster`` into a ClusterError that names it.

    ``cause`` is the client's last background error: an authentication or TLS failure shows
    up there while the request itself only reports a transport failure. A TLS handshake
    that failed over a certificate (:func:`tls_failure_hint`) is said to be one, apart from
    SASL failures: it does not heal by waiting, so it is no :class:`~k2k.errors.Unavailable`.
    """
    tls_hint = tls_failure_hint(cause) if cause is not None else None
    if cause is not None and tls_hint is not None:
        return ClusterError(
            f"{cluster} cluster at {bootstrap}: TLS handshake failed while {doing}: "
            f"{cause.str()}; {tls_hint} ({cluster}.kafka.common)"
        )
    if cause is not None and cause.code() in AUTH_FAILURES:
        return ClusterError(
            f"{cluster} cluster at {bootstrap}: authentication failed while {doing}: "
            f"{cause.str()}; check {cluster}.kafka.common security.protocol, sasl.mechanism, "
            f"sasl.jaas.config and ssl.* settings"
        )
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(err, KafkaError):
        if err.code() in (
            KafkaError._TRANSPORT,
            KafkaError._TIMED_OUT,
            KafkaError._ALL_BROKERS_DOWN,
        ):
            return Unavailable(
                f"{cluster} cluster unreachable at {bootstrap} while {doing}: {err.str()}; "
                f"check {cluster}.kafka.common.bootstrap.servers and that the brokers run "
                f"(wait bounded by {cluster}.connectTimeout)"
            )
        return failure_kind(err, ClusterError)(
            f"{cluster} cluster at {bootstrap} failed while {doing}: {describe(err)}"
        )
    return ClusterError(f"{cluster} cluster at {bootstrap} failed while {doing}: {exc}")
