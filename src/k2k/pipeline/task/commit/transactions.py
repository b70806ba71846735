"""Exactly-once writes through two transactional producers taken in turn.

Why two: with the transaction protocol librdkafka speaks (version 1), a producer cannot
send the records of its next transaction until the coordinator has finished the previous
one, and committing means waiting for every record of the batch first. With one producer
the copy loop stood still for that whole time, several times longer than copying the batch
took (docs/benchmarks.md#two-transactional-producers). With two, batch N commits on one
producer while batch N+1 fills the other.

What keeps this exactly-once and in order:

* **order** — the next producer starts only after every record of the previous batch is
  acknowledged (``ExactlyOnce.seal`` flushes first), so each target partition holds batch N
  before batch N+1;
* **no skipped batch** — batch N+1 commits only after batch N has committed; when N fails,
  N+1 is aborted. Progress, written inside each transaction, therefore only ever moves
  from one committed batch to the next;
* **fencing** — a successor initialises both producer ids
  (:func:`k2k.coordination.assignment.producer_ids`), which aborts whatever either left
  open; also a transaction whose abort failed (:func:`k2k.kafka.faults.abort_transaction`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from k2k.kafka.faults import abort_transaction

__all__ = ["TransactionPair"]

#: How long to wait for an in-flight commit when the runner gives up for another reason.
_ABANDON_WAIT_S = 30.0
#: How long the abort of the open transaction may take when the runner gives up: shorter
#: than a failed commit's abort (exactly_once), as it follows the wait for the in-flight commit.
_ABANDON_ABORT_S = 10.0


class TransactionPair:
    """Runs on: executor, inside one runner. Two transactional producers and at most one
    commit in flight, always on the producer that is not :attr:`current`.

    The caller fills ``current`` (``begin_transaction`` and ``produce``), then calls
    :meth:`hand_off` with a function that commits it; :meth:`wait` returns what the last
    committed hand-off carried, or raises its error. ``ids`` are the producers'
    transactional ids, for messages (by default they are called by their position).
    """

    def __init__(self, producers: list[Any], ids: Sequence[str] | None = None) -> None:
        if len(producers) != 2 or (ids is not None and len(ids) != 2):
            raise ValueError("a transaction pair needs exactly two producers")
        self._producers = producers
        self._ids = tuple(ids or ("<first>", "<second>"))
        self._turn = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="k2k-commit")
        self._inflight: Future[Any] | None = None
        self._carried: Any = None

    @property
    def current(self) -> Any:
        """The producer that takes the next transaction's records."""
        return self._producers[self._turn]

    @property
    def current_id(self) -> str:
        """The transactional id of :attr:`current`."""
        return self._ids[self._turn]

    def hand_off(self, commit: Callable[[], None], carried: Any) -> None:
        """Commit ``current`` in the background and switch producers.

        The previous commit must have been collected with :meth:`wait` first: a batch may
        only commit after the one before it did.
        """
        if self._inflight is not None:
            raise RuntimeError("the previous commit was not collected")
        self._inflight = self._pool.submit(commit)
        self._carried = carried
        self._turn = 1 - self._turn

    def wait(self) -> Any:
        """Block until the in-flight commit ends; return what its hand-off carried (None
        when nothing was in flight), or raise the commit's error."""
        inflight, self._inflight = self._inflight, None
        if inflight is None:
            return None
        inflight.result()
        return self._carried

    def serve_idle(self) -> None:
        """Serve what the producer that is not :attr:`current` queued for its poll, while no
        commit runs on it: a producer never polled keeps every statistics document it
        emits (k2k.metrics.clientstats). Its records were all acknowledged before the
        hand-off, so no delivery report is left to run here."""
        inflight = self._inflight
        if inflight is None or inflight.done():
            self._producers[1 - self._turn].poll(0)

    def abandon(self, abort_current: bool = True) -> Any:
        """The runner failed: let an in-flight commit end and abort the transaction open on
        ``current`` (``abort_current``: one is open), so it does not hold the target's last
        stable offset until it times out. Returns what the in-flight hand-off carried if
        that commit succeeded.

        Never raises: a commit that failed was reported by :meth:`wait` or ends with the
        runner, and an abort that fails is logged; the runner fails either way, and the next
        owner of its partitions fences both ids before writing them.
        """
        inflight, self._inflight = self._inflight, None
        carried = None
        if inflight is not None:
            with contextlib.suppress(Exception):
                inflight.result(_ABANDON_WAIT_S)
                carried = self._carried
        if abort_current:
            abort_transaction(self.current, _ABANDON_ABORT_S, self.current_id)
        return carried

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
