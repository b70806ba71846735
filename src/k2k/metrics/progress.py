"""How close lag is to data loss, and when it will be gone: the share of retention a
partition's lag uses, the time to catch up at the current rate, and the recovery point.

Runs on: driver, when an exporter collects. Pure arithmetic over what the planner and the
lag-age reader know; the topics' retention comes from :class:`~k2k.metrics.retention.TopicRetention`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from k2k.kafka import TP

__all__ = ["CatchUp", "Retention", "lag_share_of_retention", "recovery_point"]


@dataclass(frozen=True, slots=True)
class Retention:
    """What deletes a topic's records: ``ms`` and ``bytes`` per partition (None: no limit,
    or a topic that is only compacted)."""

    ms: int | None
    bytes: int | None

    @classmethod
    def of(cls, config: Mapping[str, str]) -> Retention:
        """From a topic's effective config.

        >>> Retention.of({"cleanup.policy": "delete", "retention.ms": "3600000", "retention.bytes": "-1"})
        Retention(ms=3600000, bytes=None)
        >>> Retention.of({"cleanup.policy": "compact", "retention.ms": "3600000"})
        Retention(ms=None, bytes=None)
        """
        if "delete" not in config.get("cleanup.policy", "delete"):
            return cls(None, None)
        return cls(_limit(config.get("retention.ms")), _limit(config.get("retention.bytes")))


def _limit(raw: str | None) -> int | None:
    try:
        value = int(raw) if raw is not None else -1
    except ValueError:
        return None
    return value if value > 0 else None


def lag_share_of_retention(
    lag_seconds: float | None, lag_bytes: float | None, retention: Retention
) -> float:
    """The larger of the lag's age over ``retention.ms`` and its size over
    ``retention.bytes``: 1.0 means the oldest record not yet replicated is due for deletion.
    An unknown side, or no limit, counts nothing.

    >>> lag_share_of_retention(1800.0, 10.0, Retention(3_600_000, 1000))
    0.5
    >>> lag_share_of_retention(None, 900.0, Retention(3_600_000, 1000))
    0.9
    >>> lag_share_of_retention(1e9, 1e9, Retention(None, None))
    0.0
    """
    by_time = lag_seconds * 1000 / retention.ms if lag_seconds and retention.ms else 0.0
    by_size = lag_bytes / retention.bytes if lag_bytes and retention.bytes else 0.0
    return max(by_time, by_size)


def recovery_point(ages: Mapping[TP, float], lags: Mapping[TP, int]) -> float | None:
    """Seconds of source data not yet committed on the target: the oldest unreplicated
    record's age over the partitions; 0 when nothing lags, None when a partition lags and
    its age is not known yet (a maximum of the others would understate it).

    >>> recovery_point({("t", 0): 12.5}, {("t", 0): 4, ("t", 1): 0})
    12.5
    >>> recovery_point({}, {("t", 0): 4}) is None
    True
    """
    behind = [tp for tp, lag in lags.items() if lag > 0]
    if any(tp not in ages for tp in behind):
        return None
    return max((ages[tp] for tp in behind), default=0.0)


class CatchUp:
    """The time to close the lag at the rate it shrank over the last :attr:`window_s`
    seconds; None when it is not shrinking (not catching up), or not yet known.

    >>> c = CatchUp(window_s=60)
    >>> c.observe(0.0, 1000) is None
    True
    >>> c.observe(10.0, 800)   # 20 records/s less: 800 left
    40.0
    >>> c.observe(20.0, 1100) is None  # grew over the window: not catching up
    True
    """

    def __init__(self, window_s: float = 60.0, least_s: float = 5.0) -> None:
        self.window_s = window_s
        self.least_s = least_s
        self._samples: deque[tuple[float, int]] = deque()

    def observe(self, now: float, lag: int) -> float | None:
        samples = self._samples
        samples.append((now, lag))
        while len(samples) > 2 and now - samples[1][0] >= self.window_s:
            samples.popleft()
        then, before = samples[0]
        if lag <= 0 or now - then < self.least_s:
            return None
        rate = (before - lag) / (now - then)
        return lag / rate if rate > 0 else None
