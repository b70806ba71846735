"""SIGINT and SIGTERM for the long-running commands: both ask for a clean stop.

The handlers live only as long as the command's run; the ones that were there before come
back afterwards, so an embedding program (or a test calling the command) keeps its own.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

__all__ = ["STOP_SIGNALS", "on_stop_signals", "stop_then_exit"]

#: The signals that mean "stop": Ctrl-C, and what process managers and Kubernetes send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Handler = Callable[[int, object], None]


@contextmanager
def on_stop_signals(handler: Handler) -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM call ``handler``; the previous handlers after."""
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in previous:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, before in previous.items():
            signal.signal(s, before)


def stop_then_exit(stop: Callable[[], None]) -> Handler:
    """A handler whose first signal calls ``stop`` (which must be signal-safe) and whose
    second exits at once with 130, for an operator who will not wait for the clean stop."""
    seen: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        seen.append(signum)
        if len(seen) > 1:
            click.echo("error: second signal, exiting without waiting", err=True)
            sys.exit(130)
        stop()

    return on_signal
