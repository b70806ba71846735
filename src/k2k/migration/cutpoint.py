"""The cut point: the source end offsets once producers stopped.

k2k never writes to the source, so stopping the producers is the operator's step; the
command waits until every selected partition's end offset stood still for the quiet period,
with no transaction open (the last stable offset equals the high watermark), and says
which partitions still move while it waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from k2k.errors import K2KError
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView
from k2k.kafka.bulk import named

__all__ = ["SourceStillMoving", "wait_for_cut"]

#: How often the source end offsets are read while waiting.
POLL_S = 0.5


class SourceStillMoving(K2KError):
    """The source did not stand still within ``--timeout``."""


def wait_for_cut(
    source: ClusterView,
    tps: list[TP],
    quiet_s: float,
    timeout_s: float,
    say: Callable[[str], None],
) -> dict[TP, int]:
    """The end offsets of ``tps`` once they did not move for ``quiet_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    ends, moving = _ends(source, tps)
    last_moving = moving
    still_since, told = time.monotonic(), 0.0
    while True:
        now = time.monotonic()
        if not moving and now - still_since >= quiet_s:
            return ends
        if now >= deadline:
            raise SourceStillMoving(
                f"the source did not stand still within --timeout ({timeout_s:g} s): "
                f"{named(last_moving, most=8)} still moving or in an open transaction; expected its "
                "producers stopped (k2k never writes to the source: stopping them is your step)"
            )
        if moving and now - told >= 5:
            told = now
            say(
                f"waiting for the source to stand still: {named(moving, most=8)} moving; stop its producers"
            )
        time.sleep(POLL_S)
        new_ends, open_ = _ends(source, tps)
        moving = sorted(set(open_) | {tp for tp in tps if new_ends.get(tp) != ends.get(tp)})
        if moving:
            still_since, last_moving = time.monotonic(), moving
        ends = new_ends


def _ends(source: ClusterView, tps: list[TP]) -> tuple[dict[TP, int], list[TP]]:
    """Last stable offsets, and the partitions whose high watermark is beyond (a
    transaction is open there)."""
    stable = source.offsets(tps, "latest")
    high = source.offsets(tps, "latest", committed_only=False)
    return stable, sorted(tp for tp in tps if high.get(tp) != stable.get(tp))
