"""Progress while ``k2k start`` runs: a live panel on a terminal, a log line otherwise.

Throughput is derived from committed progress (offsets move when a batch commits), so it is
what has durably reached the target, not what is in flight. Lag is the source's latest
(read-committed) offsets minus committed progress — or, with ``--until-caught-up``, the end
offsets captured at start minus committed progress; then both also show how much of that is
done and, at the current throughput, how long the rest takes.

On a terminal the panel and k2k's log lines share one rich :class:`~rich.console.Console`
(:func:`stderr_console`, :func:`terminal_log_handler`), so a log line printed while the
panel is shown goes above it instead of tearing it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque

from rich.console import Console
from rich.live import Live
from rich.table import Table

from k2k.observability.stats import PipelineStats
from k2k.observability.units import duration_text

__all__ = [
    "LiveDisplay",
    "LogDisplay",
    "ProgressLine",
    "final_summary",
    "make_display",
    "progress_text",
    "stderr_console",
    "terminal_log_handler",
]

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


@functools.cache
def stderr_console() -> Console:
    """The one rich console on stderr, shared by the live panel and the log handler."""
    return Console(stderr=True)


def terminal_log_handler() -> logging.Handler:
    """k2k's log lines on a terminal: rich's handler on :func:`stderr_console`."""
    from rich.logging import RichHandler

    return RichHandler(
        console=stderr_console(),
        show_path=False,
        markup=False,
        rich_tracebacks=False,
        omit_repeated_times=False,
        log_time_format="%H:%M:%S",
    )


class _Progress:
    """With ``--until-caught-up``: the lag at the first tick is the whole job (it only
    falls: the end offsets are fixed at start and committed progress only grows)."""

    def __init__(self) -> None:
        self.total = 0

    def text(self, stats: PipelineStats, lag: int, rate: float) -> str | None:
        """``lag``: ``stats.lag`` now (a sum over every partition: the caller's, once)."""
        if stats.ends is None:
            return None
        self.total = max(self.total, lag)
        return progress_text(self.total, lag, rate)


def progress_text(total: int, lag: int, rate: float) -> str:
    """How much of ``total`` records is done and how long the ``lag`` left takes at ``rate``
    records per second.

    >>> progress_text(273_000, 150_000, 1_500.0)
    '45.1 % of 273,000 records, about 100 s left'
    >>> progress_text(1_000, 1_000, 0.0), progress_text(0, 0, 0.0)
    ('0.0 % of 1,000 records, time left unknown (no recent progress)', '100.0 % of 0 records, done')
    """
    done = 100.0 if total == 0 else 100.0 * (total - lag) / total
    if lag == 0:
        left = "done"
    elif rate <= 0:
        left = "time left unknown (no recent progress)"
    else:
        left = f"about {duration_text(lag / rate)} left"
    return f"{done:.1f} % of {total:,} records, {left}"


class LiveDisplay:
    """A rich panel refreshed on every planner tick (about twice a second). It appears at
    the first tick (the first lease): until then the start-up steps are log lines."""

    def __init__(self, pipeline: str, console: Console | None = None) -> None:
        self.pipeline = pipeline
        self.console = console or stderr_console()
        self.rate = _Rate()
        self.progress = _Progress()
        self.base: int | None = None
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)

    def __call__(self, stats: PipelineStats) -> None:
        total = stats.replicated_offsets
        if self.base is None:
            self.base = total
            self.live.start()
        rate = self.rate.update(total)
        table = Table.grid(padding=(0, 2))
        table.add_row("pipeline", f"[bold]{self.pipeline}[/bold]")
        table.add_row("elapsed", f"{time.monotonic() - stats.started:,.0f} s")
        table.add_row("topics / partitions", f"{stats.topics} / {len(stats.committed)}")
        table.add_row("committed since start", f"{total - self.base:,} records")
        table.add_row("throughput", f"{rate:,.0f} records/s")
        lag = stats.lag
        table.add_row("remaining lag", f"{lag:,} records")
        progress = self.progress.text(stats, lag, rate)
        if progress is not None:
            table.add_row("until caught up", progress)
        table.add_row("lease", str(stats.leases))
        self.live.update(table)

    def close(self) -> None:
        self.live.stop()  # also when it never started


class LogDisplay:
    """One concise log line every ``interval_s`` (for logs, pipes and CI)."""

    def __init__(self, pipeline: str, interval_s: float = 10.0) -> None:
        self.pipeline = pipeline
        self.interval_s = interval_s
        self.rate = _Rate()
        self.progress = _Progress()
        self.next_at = time.monotonic() + interval_s
        self._first = True

    def __call__(self, stats: PipelineStats) -> None:
        rate = self.rate.update(stats.replicated_offsets)
        now = time.monotonic()
        if self._first:  # the first lag is the total; the lag is summed only when shown
            self._first = False
            self.progress.text(stats, stats.lag, rate)
        if now < self.next_at:
            return
        self.next_at = now + self.interval_s
        lag = stats.lag
        progress = self.progress.text(stats, lag, rate)
        log.info(
            "%s: %s records/s, lag %s records over %d partitions (lease %d)%s",
            self.pipeline,
            f"{rate:,.0f}",
            f"{lag:,}",
            len(stats.committed),
            stats.leases,
            "" if progress is None else f"; until caught up: {progress}",
        )

    def close(self) -> None:
        pass


class ProgressLine:
    """One live line on the terminal for a job of known size (``k2k verify``): the share of
    the records done, parts (partitions) done, throughput over the last seconds and the
    time left at that rate. Transient: it goes once the job ends, the report follows."""

    def __init__(self, what: str, console: Console | None = None) -> None:
        self.what = what
        self.rate = _Rate()
        self.live = Live(console=console or stderr_console(), refresh_per_second=4, transient=True)
        self.live.start()

    def show(self, done: int, total: int, parts_done: int, parts: int) -> None:
        rate = self.rate.update(done)
        self.live.update(
            f"{self.what}: {progress_text(total, total - done, rate)}; "
            f"{parts_done}/{parts} partitions done; {rate:,.0f} records/s"
        )

    def close(self) -> None:
        self.live.stop()


def make_display(pipeline: str, tty: bool) -> LiveDisplay | LogDisplay:
    return LiveDisplay(pipeline) if tty else LogDisplay(pipeline)


def final_summary(pipeline: str, stats: PipelineStats) -> str:
    secs = max(time.monotonic() - stats.started, 1e-9)
    mb = stats.bytes / 1e6
    extras = ""
    if stats.skipped:
        extras += f"; {stats.skipped:,} records of the other direction not copied back"
    if stats.filtered:
        extras += f"; {stats.filtered:,} records dropped by filters"
    if stats.transform_failed:
        extras += f"; {stats.transform_failed:,} records left out by failing steps (onError: skip)"
    if stats.schemas_registered:
        extras += f"; {stats.schemas_registered:,} schemas resolved on the target registry"
    return (
        f"{pipeline}: replicated {stats.records:,} records ({mb:,.1f} MB of keys and values) "
        f"in {secs:,.1f} s over {stats.leases} lease(s); remaining lag {stats.lag:,} records"
        f"{extras}"
    )
