"""Rounds of W1 copies, one per mode, in an order that rotates per round: each mode runs
first as often as the others, so a machine warming up or slowing down favours none.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

__all__ = ["rotated_rounds"]


def rotated_rounds(
    modes: list[str],
    rounds: int,
    warmups: int,
    copy_to: Callable[[str, str], float],
    prefix: str,
) -> dict[str, float]:
    """``warmups`` uncounted copies, then ``rounds`` copies per mode through
    ``copy_to(destination topic, mode)`` (records/s); prints every copy and returns each
    mode's median."""
    for i in range(warmups):
        mode = modes[i % len(modes)]
        rate = copy_to(f"{prefix}-warmup-{i}", mode)
        print(f"  warm-up {i + 1} ({mode}, not counted): {rate:,.0f} records/s", flush=True)
    results: dict[str, list[float]] = {m: [] for m in modes}
    for rnd in range(rounds):
        shift = rnd % len(modes)
        for mode in modes[shift:] + modes[:shift]:
            rate = copy_to(f"{prefix}-{mode}-{rnd}", mode)
            results[mode].append(rate)
            print(f"  round {rnd + 1} {mode:6}: {rate:,.0f} records/s", flush=True)
    return {mode: statistics.median(rates) for mode, rates in results.items()}
