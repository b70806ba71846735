"""Stopping what a benchmark run started, however the run ends.

A run starts brokers (in sessions of their own, so a Ctrl-C does not reach them), contenders
(each a process tree: k2k's driver has a Spark JVM and Python workers, MirrorMaker 2 a JVM) and
probes. A normal end, an error, Ctrl-C, SIGTERM (``timeout``, a CI step) and SIGHUP (a closed
terminal) all go through the same ``finally`` blocks: :func:`install_handlers` turns the
signals into :class:`Interrupted`, raised on the main thread, and the processes go with their
whole tree (:func:`stop_processes`). A run killed with SIGKILL runs no code at all: its brokers
then go through :class:`k2k.local.LocalCluster`'s owner watchdog.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from types import FrameType

import psutil

__all__ = ["STOPPING", "Interrupted", "install_handlers", "stop_processes", "stop_strays"]

#: Set once a signal asked the run to end: stops then wait less, and say what they stopped.
STOPPING = threading.Event()
#: How long an interrupted run lets each contender shut down before killing it.
INTERRUPTED_GRACE_S = 10.0


class Interrupted(BaseException):
    """A signal ended the run (a BaseException, like KeyboardInterrupt: no ``except
    Exception`` in a contender's code may swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def install_handlers() -> None:
    """Main thread only: SIGTERM, SIGINT and SIGHUP raise :class:`Interrupted` once; later
    ones are ignored while the run cleans up (a second Ctrl-C must not cut a broker stop
    short and leave it running)."""

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        if STOPPING.is_set():
            return
        STOPPING.set()
        print(
            f"\nbench: {signal.Signals(signum).name} received; stopping what this run started",
            flush=True,
        )
        raise Interrupted(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, interrupt)


def stop_processes(procs: list[subprocess.Popen], label: str = "", grace_s: float = 60) -> bool:
    """SIGTERM every process, SIGKILL what is left after ``grace_s``, then the same for every
    descendant still running (one that outlives its parent would otherwise be orphaned: a
    Spark JVM whose driver was killed); True if all ended within the grace."""
    if STOPPING.is_set():
        grace_s = min(grace_s, INTERRUPTED_GRACE_S)
    tree = _descendants(procs)
    running = [p for p in procs if p.poll() is None]
    for p in running:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    clean = True
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            clean = False
    strays = _end(tree, grace_s=5)
    if STOPPING.is_set() and (running or strays):
        pids = ", ".join(str(p.pid) for p in running)
        more = f" and {len(strays)} of their child processes" if strays else ""
        print(f"  stopped {label or 'processes'} (pid {pids}){more}", flush=True)
    return clean and not strays


def stop_strays() -> list[str]:
    """End every descendant of this process; returns what was ended, as "name (pid N)".
    The last sweep of a run that did not end normally."""
    tree = psutil.Process().children(recursive=True)
    names = {}
    for p in tree:
        with contextlib.suppress(psutil.Error):
            names[p.pid] = f"{p.name()} (pid {p.pid})"
    return [names.get(p.pid, f"pid {p.pid}") for p in _end(tree, grace_s=5)]


def _descendants(procs: list[subprocess.Popen]) -> list[psutil.Process]:
    out: list[psutil.Process] = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            out.extend(psutil.Process(p.pid).children(recursive=True))
    return out


def _end(tree: list[psutil.Process], grace_s: float) -> list[psutil.Process]:
    """SIGTERM the processes of ``tree`` still running, SIGKILL those left after
    ``grace_s``; returns the ones that were still running."""
    alive = [p for p in tree if _running(p)]
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, left = psutil.wait_procs(alive, timeout=grace_s)
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(left, timeout=5)
    return alive


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
