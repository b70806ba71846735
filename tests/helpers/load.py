"""A live load on a source topic: keyed records with headers written at a steady rate from a
background thread while a drill runs, until the test stops it."""

from __future__ import annotations

import threading

from tests.helpers.eos import mixed_workload

__all__ = ["LiveLoad"]

#: More than any drill writes at its rate: the load runs until stopped.
_UNBOUNDED = 100_000_000


class LiveLoad:
    """:func:`~tests.helpers.eos.mixed_workload` at ``rate`` records/s in a thread: plain
    records and source transactions (one in three aborted), in chunks of ``chunk``.

    :meth:`stop` ends it, re-raises what failed in the thread (a load that died silently
    would make a drill prove nothing) and returns the counts written.
    """

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, rate: float, seed: int, chunk: int = 250
    ) -> None:
        self._stop = threading.Event()
        self._counts: dict[str, int] = {}
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run,
            args=(bootstrap, topic, partitions, rate, seed, chunk),
            name=f"load-{topic}",
            daemon=True,
        )
        self._thread.start()

    def _run(
        self, bootstrap: str, topic: str, partitions: int, rate: float, seed: int, chunk: int
    ) -> None:
        try:
            self._counts.update(
                mixed_workload(
                    bootstrap,
                    topic,
                    _UNBOUNDED,
                    partitions,
                    seed=seed,
                    chunk=chunk,
                    stop=self._stop,
                    rate=rate,
                )
            )
        except BaseException as exc:  # reported by stop(), in the test's thread
            self._error = exc

    def running(self) -> bool:
        """Whether the load still writes (False once it failed)."""
        return self._thread.is_alive()

    def stop(self, timeout: float = 120.0) -> dict[str, int]:
        """Stop writing, wait for the last chunk to be delivered; the counts written
        (``plain``, ``committed``, ``aborted``)."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the load did not stop"
        if self._error is not None:
            raise AssertionError(f"the load failed: {self._error!r}") from self._error
        return dict(self._counts)
