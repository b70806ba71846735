"""Progress while ``k2k start`` runs: a live panel on a terminal, a log line otherwise.

Throughput is derived from committed progress (offsets move when a batch commits), so it is
what has durably reached the target, not what is in flight. Lag is the source's latest
(read-committed) offsets minus committed progress — or, with ``--until-caught-up``, the end
offsets captured at start minus committed progress.
"""

from __future__ import annotations

import logging
import time
from collections import deque

from rich.console import Console
from rich.live import Live
from rich.table import Table

from k2k.observability.stats import PipelineStats

__all__ = ["LiveDisplay", "LogDisplay", "final_summary", "make_display"]

log = logging.getLogger("k2k")

_WINDOW_S = 5.0


class _Rate:
    """Records per second over a sliding window of committed-offset totals."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()

    def update(self, total: int) -> float:
        now = time.monotonic()
        self.samples.append((now, total))
        while len(self.samples) > 2 and now - self.samples[0][0] > _WINDOW_S:
            self.samples.popleft()
        t0, v0 = self.samples[0]
        return (total - v0) / (now - t0) if now > t0 else 0.0


class LiveDisplay:
    """A rich panel refreshed on every planner tick (about twice a second)."""

    def __init__(self, pipeline: str, console: Console | None = None) -> None:
        self.pipeline = pipeline
        self.console = console or Console(stderr=True)
        self.rate = _Rate()
        self.base: int | None = None
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def __call__(self, stats: PipelineStats) -> None:
        total = stats.replicated_offsets
        if self.base is None:
            self.base = total
        rate = self.rate.update(total)
        table = Table.grid(padding=(0, 2))
        table.add_row("pipeline", f"[bold]{self.pipeline}[/bold]")
        table.add_row("elapsed", f"{time.monotonic() - stats.started:,.0f} s")
        table.add_row("topics / partitions", f"{stats.topics} / {len(stats.committed)}")
        table.add_row("committed since start", f"{total - self.base:,} records")
        table.add_row("throughput", f"{rate:,.0f} records/s")
        table.add_row("remaining lag", f"{stats.lag:,} records")
        table.add_row("lease", str(stats.leases))
        self.live.update(table)

    def close(self) -> None:
        self.live.stop()


class LogDisplay:
    """One concise log line every ``interval_s`` (for logs, pipes and CI)."""

    def __init__(self, pipeline: str, interval_s: float = 10.0) -> None:
        self.pipeline = pipeline
        self.interval_s = interval_s
        self.rate = _Rate()
        self.next_at = time.monotonic() + interval_s

    def __call__(self, stats: PipelineStats) -> None:
        rate = self.rate.update(stats.replicated_offsets)
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + self.interval_s
        log.info(
            "%s: %s records/s, lag %s records over %d partitions (lease %d)",
            self.pipeline,
            f"{rate:,.0f}",
            f"{stats.lag:,}",
            len(stats.committed),
            stats.leases,
        )

    def close(self) -> None:
        pass


def make_display(pipeline: str, tty: bool) -> LiveDisplay | LogDisplay:
    return LiveDisplay(pipeline) if tty else LogDisplay(pipeline)


def final_summary(pipeline: str, stats: PipelineStats) -> str:
    secs = max(time.monotonic() - stats.started, 1e-9)
    mb = stats.bytes / 1e6
    return (
        f"{pipeline}: replicated {stats.records:,} records ({mb:,.1f} MB of keys and values) "
        f"in {secs:,.1f} s over {stats.leases} lease(s); remaining lag {stats.lag:,} records"
    )
