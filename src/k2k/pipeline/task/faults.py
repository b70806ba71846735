"""What a runner does when a Kafka client fails: the runner's side of fault classification.

Runs on: executor, one :class:`RunnerFaults` per runner task. Every error reaches one of
three ends, decided by :func:`k2k.kafka.faults.classify`:

* **fenced** — a newer owner took the partitions over: :class:`Fenced` is raised, the lease's
  uncommitted work is void, and the planner re-plans (not an error);
* **fail** — :class:`k2k.errors.ReplicationError` with the reason and, where known, the
  record's locator; committed progress stays valid. When the error says a cluster did not
  answer in time (:func:`~k2k.kafka.faults.is_transient`) it is
  :class:`k2k.errors.Unavailable` instead, and the planner waits the outage out;
* **retry** — transient errors are librdkafka's to retry: logged (connection failures only at
  DEBUG: the driver reports an unreachable cluster), the copy goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from k2k.errors import K2KError, ReplicationError, Unavailable
from k2k.kafka.faults import (
    Outcome,
    classify,
    describe,
    failure_kind,
    fatal_cause,
    is_transient,
    is_unreachable,
    kafka_error_of,
)

__all__ = ["DriverGone", "Fenced", "RunnerFaults", "record_error"]

log = logging.getLogger("k2k.runner")

#: Transient client errors logged per runner task; librdkafka retries them anyway.
_LOGGED_TRANSIENT = 20


class Fenced(K2KError):
    """Raised when another owner took this runner's partitions over (its transactional id
    was fenced, or a claim changed); the runner's uncommitted work is void.

    Internal: the runner catches it and reports it in its summary; the planner re-plans."""


class DriverGone(K2KError):
    """Raised when the driver that started this lease no longer answers the lease channel
    (k2k.pipeline.channel): a restarted run may be copying the same partitions, so this
    runner writes and commits nothing more.

    Internal: the runner catches it and returns it in its summary; no command prints it."""


class RunnerFaults:
    """Runs on: executor. Collects what librdkafka reports out of band (the error callback,
    progress deliveries) and turns failed calls into the exception the runner raises."""

    def __init__(self, transactional_id: str | None) -> None:
        self.transactional_id = transactional_id
        self.producers: Sequence[Producer] = ()  # polled for the cause of a fatal error
        self.fenced_by: KafkaError | None = None
        #: A failure noticed out of band (a fatal client error, a rejected progress record):
        #: the next commit point raises it, so nothing after it is committed.
        self.failure: K2KError | None = None
        self._transient_logged = 0

    def on_client_error(self, err: KafkaError) -> None:
        """librdkafka's error callback: remember fencing and fatal errors, log the rest."""
        outcome = classify(err)
        if outcome is Outcome.FENCED:
            self.fenced_by = err  # the failing call raises too (maybe only as _FATAL)
        elif outcome is Outcome.FAIL and err.fatal():
            self.fail(f"fatal client error: {describe(err)}")
        elif is_unreachable(err):
            # Several a second per client during an outage; the driver reports the outage
            # once per cluster (k2k.observability.reachability).
            log.debug("Kafka client: %s", describe(err))
        elif self._transient_logged < _LOGGED_TRANSIENT:
            self._transient_logged += 1
            log.warning("Kafka client: %s", describe(err))

    def fail(self, reason: str, err: KafkaError | None = None) -> None:
        """Remember the first out-of-band failure, caused by ``err`` where known (an
        outage's error makes it :class:`~k2k.errors.Unavailable`)."""
        if self.failure is None:
            self.failure = failure_kind(err, ReplicationError)(reason)

    def raise_failure(self) -> None:
        """Raise the remembered failure, if any (called at every commit point)."""
        if self.failure is not None:
            raise self.failure

    def fenced(self, err: KafkaError) -> Fenced:
        return Fenced(
            f"transactional id {self.transactional_id} was fenced by a newer owner "
            f"({describe(err)}); the open transaction was aborted, standing down"
        )

    def client_failed(self, err: KafkaError) -> K2KError:
        """A client failed as a whole: fenced (also when the call that noticed it only says
        ``_FATAL``), or fatally for another reason."""
        err = fatal_cause(err, self.producers)
        if classify(err) is Outcome.FENCED or self.fenced_by is not None:
            return self.fenced(self.fenced_by or err)
        if is_transient(err):  # e.g. init_transactions timed out: the target is down
            return Unavailable(
                f"the target did not answer in time: {describe(err)}; progress stays at the "
                "last committed batch"
            )
        return ReplicationError(
            f"a Kafka client failed: {describe(err)}; progress stays at the last committed batch"
        )

    def produce_failed(self, m: Message, exc: KafkaException) -> K2KError:
        """A produce call failed: the producer as a whole (fatal: fenced, or an earlier
        record broke its guarantees), or this record, which the target cannot take."""
        err = kafka_error_of(exc)
        if err is not None and (err.fatal() or err.code() == KafkaError._FATAL):
            return self.client_failed(err)
        if self.fenced_by is not None:
            return self.fenced(self.fenced_by)
        return record_error(m, exc)

    def from_client_exception(self, exc: BaseException) -> K2KError | None:
        """The k2k error for a KafkaException (or the SystemError confluent-kafka wraps one
        in) raised by poll/flush/produce; None when ``exc`` is neither.

        A SystemError with no KafkaError attached ("returned NULL without setting an
        exception") comes from a producer that turned fatal inside the call: its cause is
        polled for like a bare ``_FATAL`` (a fenced zombie stands down)."""
        err = kafka_error_of(exc)
        if err is None and isinstance(exc, SystemError):
            err = KafkaError(KafkaError._FATAL, f"client call failed: {exc}", fatal=True)
        return None if err is None else self.client_failed(err)


def record_error(m: Message, exc: KafkaException) -> ReplicationError:
    """The target refused one record: name it by its source locator and size."""
    err = kafka_error_of(exc)
    detail = describe(err) if err is not None else str(exc)
    size = len(m.value() or b"") + len(m.key() or b"")
    return ReplicationError(
        f"cannot replicate {m.topic()}[{m.partition()}]@{m.offset()} ({size} bytes): {detail}"
    )
