"""Admin requests about many topics or partitions: sent in chunks, together, and retried
while the cluster answers "not yet".

One request per topic makes a pipeline of many topics wait on as many round trips.
:func:`ask` splits the keys into *chunks* (at most a few hundred topics per request, so no
request grows without bound), sends every chunk before it waits for any answer, and then
sends again only the keys whose answer was retriable
(:func:`k2k.kafka.faults.classify` says ``RETRY``: no leader yet, a controller busy or
moving, a coordinator still loading), with a growing pause between rounds. The caller's
time counts from the last round that got an answer: a cluster that settles partition by
partition (a busy broker creating the logs of a large topic) is waited for as long as it
makes progress, one that answers nothing new for that long is not. Keys answered with an
error that is final (or still retriable when the time is up) come back in
:attr:`Answers.errors`; the caller decides what each means.

Invariants: every key asked is in exactly one of ``values`` and ``errors``; a key is sent
again only while its last answer was retriable and time is left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from confluent_kafka import KafkaError, KafkaException

from k2k.kafka.faults import Outcome, classify, kafka_error_of

__all__ = [
    "PARTITIONS_PER_REQUEST",
    "RECORDS_PER_CHANGE",
    "TOPICS_PER_REQUEST",
    "Answers",
    "Backoff",
    "ask",
    "chunked",
    "named",
]

log = logging.getLogger("k2k.kafka")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

#: Topics per admin request (create, describe, configs): large enough that many topics cost
#: a handful of round trips, small enough that no request or answer grows unbounded.
TOPICS_PER_REQUEST = 200
#: Partitions per offsets request (librdkafka splits each further by partition leader).
PARTITIONS_PER_REQUEST = 2000
#: Metadata records per topic creation (or growth) request: a topic, its partitions and its
#: configs are one record each, and the KRaft controller refuses a request of more records
#: than its ``MAX_RECORDS_PER_USER_OP``. As few requests as that allows: a broker shows the
#: topics of one request only once it created the partition logs of the requests before.
RECORDS_PER_CHANGE = 9000
#: The shortest request timeout a retry round is given, however little time is left.
_MIN_REQUEST_S = 1.0

#: Sends one chunk with the given request timeout; returns a future per key.
Send = Callable[[list[K], float], Mapping[K, "Future[Any]"]]


def chunked(
    items: Iterable[T],
    size: int,
    budget: int | None = None,
    weight: Callable[[T], int] = lambda _: 1,
) -> Iterator[list[T]]:
    """``items`` in lists of at most ``size`` items, in order; with ``budget``, also of at
    most that total ``weight`` (an item heavier than the budget goes alone).

    >>> [c for c in chunked(range(5), 2)]
    [[0, 1], [2, 3], [4]]
    >>> [c for c in chunked([3, 1, 1, 9, 2], 10, budget=4, weight=lambda n: n)]
    [[3, 1], [1], [9], [2]]
    >>> list(chunked([], 3))
    []
    """
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size!r}")
    chunk: list[T] = []
    total = 0
    for item in items:
        heavy = budget is not None and bool(chunk) and total + weight(item) > budget
        if len(chunk) == size or heavy:
            yield chunk
            chunk, total = [], 0
        chunk.append(item)
        total += weight(item)
    if chunk:
        yield chunk


class Backoff:
    """Pauses between retry rounds: doubling from ``first_s`` up to ``most_s``, so a cluster
    that settles at once is asked again at once and a busy one is not flooded.

    >>> b = Backoff(0.05, 0.3)
    >>> [b.next() for _ in range(5)]
    [0.05, 0.1, 0.2, 0.3, 0.3]
    """

    def __init__(self, first_s: float = 0.05, most_s: float = 1.0) -> None:
        self._next, self.most_s = first_s, most_s

    def next(self) -> float:
        pause = self._next
        self._next = min(self._next * 2, self.most_s)
        return pause


@dataclass
class Answers(Generic[K, V]):
    """What :func:`ask` got: the value of every key answered, the error of every other."""

    values: dict[K, V] = field(default_factory=dict)
    errors: dict[K, KafkaError] = field(default_factory=dict)
    #: True when some of ``errors`` were still retriable when the time was up.
    gave_up: bool = False


def ask(
    keys: Iterable[K],
    send: Send[K],
    *,
    chunk: int | Callable[[list[K]], Iterable[list[K]]],
    timeout_s: float,
    doing: str,
    answers: Collection[int] = (),
    settling: Collection[int] = (),
    retry: bool = True,
    backoff: Backoff | None = None,
) -> Answers[K, Any]:
    """Ask about every key of ``keys`` in chunks of ``chunk`` keys (or as ``chunk`` splits
    them), all chunks sent before any answer is awaited; retry the retriable answers until
    ``timeout_s`` passed without a round that answered one more key.

    ``answers``: error codes that are an answer (e.g. "already exists"), never retried;
    ``settling``: codes retried besides the transient ones, because the caller knows the
    keys exist (e.g. unknown topic right after its creation); ``retry`` False asks once;
    ``backoff``: the pauses between rounds. ``doing`` names the request in the log lines
    (DEBUG: how many keys in how many requests, every round; INFO: the first retry); ""
    logs nothing."""
    deadline = time.monotonic() + timeout_s
    pending = list(dict.fromkeys(keys))
    out: Answers[K, Any] = Answers()
    backoff = backoff or Backoff()
    rounds = 0
    while pending:
        request_s = max(deadline - time.monotonic(), _MIN_REQUEST_S)
        again = _round(pending, send, chunk, request_s, out, answers, settling, doing)
        if len(again) < len(pending):
            deadline = time.monotonic() + timeout_s  # progress: settling, not stuck
        pause = backoff.next()
        if not again or not retry or time.monotonic() + pause >= deadline:
            out.errors.update(again)
            out.gave_up = bool(again)
            break
        rounds += 1
        if doing:
            _note_retry(again, doing, rounds, timeout_s)
        time.sleep(pause)  # the backoff between rounds: give the cluster time to settle
        pending = list(again)
    return out


def _round(
    keys: list[K],
    send: Send[K],
    chunk: int | Callable[[list[K]], Iterable[list[K]]],
    request_s: float,
    out: Answers[K, Any],
    answers: Collection[int],
    settling: Collection[int],
    doing: str,
) -> dict[K, KafkaError]:
    """One round: every chunk sent, then every answer collected into ``out``; returns the
    keys to ask again, with their last error."""
    futures: dict[K, Future[Any]] = {}
    requests = 0
    for part in chunked(keys, chunk) if isinstance(chunk, int) else chunk(keys):
        requests += 1
        try:
            futures.update(send(part, request_s))
        except KafkaException as exc:  # the whole chunk was refused before it was sent
            err = kafka_error_of(exc) or KafkaError(KafkaError._FAIL, str(exc))
            futures.update({key: _failed(err) for key in part})
    if doing:
        log.debug("%s: %d in %d request(s)", doing, len(keys), requests)
    again: dict[K, KafkaError] = {}
    for key, future in futures.items():
        try:
            out.values[key] = future.result()
        except KafkaException as exc:
            err = kafka_error_of(exc) or KafkaError(KafkaError._FAIL, str(exc))
            if err.code() not in answers and _retriable(err, settling):
                again[key] = err
            else:
                out.errors[key] = err
    return again


def _retriable(err: KafkaError, settling: Collection[int]) -> bool:
    return err.code() in settling or classify(err) is Outcome.RETRY


def _failed(err: KafkaError) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(KafkaException(err))
    return future


def _note_retry(again: Mapping[K, KafkaError], doing: str, rounds: int, timeout_s: float) -> None:
    """One line when a request first meets a cluster that is not ready; DEBUG after."""
    err = next(iter(again.values()))
    log.log(
        logging.INFO if rounds == 1 else logging.DEBUG,
        "%s: %d answered %s (%s); asking again until nothing new is answered for %g s",
        doing,
        len(again),
        err.str() or err.name(),
        named(again),
        timeout_s,
    )


def named(keys: Iterable[Any], most: int = 3) -> str:
    """Keys for a message: the first ``most`` (topics as names, partitions as ``t[p]``),
    then how many more.

    >>> named([("a", 0), ("a", 1)]), named(["x", "y", "z", "w"], most=2)
    ('a[0], a[1]', 'w, x and 2 more')
    """
    items = sorted(keys)
    shown = [f"{k[0]}[{k[1]}]" if isinstance(k, tuple) else str(k) for k in items[:most]]
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(shown) + more
