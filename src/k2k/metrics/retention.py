"""The source topics' retention, read now and then for the lag-share-of-retention gauge.

Runs on: driver, in a thread of its own, only with telemetry. Topic configs change rarely,
so they are read every :data:`REFRESH_S` (and at once for a topic not seen before); a
failed read keeps what was read before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from k2k.errors import K2KError
from k2k.metrics.progress import Retention

__all__ = ["REFRESH_S", "TopicRetention"]

log = logging.getLogger("k2k.metrics")

#: How often the configs of the topics are read again.
REFRESH_S = 300.0


class TopicRetention:
    """Runs on: driver. ``of()`` answers from what was read last and asks for the topics
    not read yet; ``configs`` is the source's describe-configs call."""

    def __init__(self, configs: Callable[[Iterable[str]], Mapping[str, Mapping[str, str]]]):
        self._configs = configs
        self._known: dict[str, Retention] = {}
        self._wanted: set[str] = set()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned = False

    def of(self, topics: Iterable[str]) -> dict[str, Retention]:
        """The retention of ``topics`` as read last; from now on only these are read (a
        deleted topic would fail every later read of them all)."""
        wanted = set(topics)
        known = self._known
        if wanted != self._wanted:
            self._wanted = wanted
            if not wanted <= known.keys():
                self._wake.set()
        self._start()
        return {t: known[t] for t in wanted if t in known}

    def close(self) -> None:
        self._closed.set()
        self._wake.set()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="k2k-retention", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.clear()
            self._read(sorted(self._wanted))
            self._wake.wait(REFRESH_S)

    def _read(self, topics: list[str]) -> None:
        if not topics:
            return
        try:
            configs = self._configs(topics)
        except K2KError as exc:
            # Without them the share-of-retention gauge is absent: say so once.
            level = logging.DEBUG if self._warned else logging.WARNING
            self._warned = True
            log.log(level, "metrics: cannot read the source topics' retention: %s", exc)
            return
        self._known = {**self._known, **{t: Retention.of(c) for t, c in configs.items()}}
