"""The broker's JVM as a process: its pid file, whether a pid is really our broker, starting
it in a session of its own, stopping it, and the watchdog that stops it with its owner.

Before signalling a pid from ``broker.pid`` we check that the process is a ``kafka.Kafka`` JVM
started with *this* ``server.properties``: a recycled pid is never killed. Linux's ``/proc``
answers most questions; elsewhere ``ps`` and ``kill -0`` do what they can.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from k2k.errors import LocalClusterError

__all__ = ["LOG_TAIL_LINES", "BrokerProcess", "NodeName", "start_watchdog", "tail"]

LOG_TAIL_LINES = 20
"""How many lines of a JVM's output a failure quotes."""


class NodeName(NamedTuple):
    """How messages name one node. The node of a one-broker cluster is the cluster itself
    (``NodeName("target")``: "target", "the target cluster"); in a larger cluster each node
    is one of its brokers (``NodeName("target", 2)``: "target broker 2").

    :param cluster: the cluster's name ("source", "target").
    :param broker: the node id when the cluster has several brokers, else None.
    """

    cluster: str
    broker: int | None = None

    @property
    def label(self) -> str:
        """What starts the lines that say what start-up recovered from ("target: ...")."""
        return self.cluster if self.broker is None else f"{self.cluster} broker {self.broker}"

    @property
    def noun(self) -> str:
        """What a sentence calls it ("the target cluster on ... did not start")."""
        return f"{self.cluster} cluster" if self.broker is None else self.label


class BrokerProcess:
    """The broker JVM of one data dir, found through ``pid_file`` and recognised by its
    command line (``kafka.Kafka`` with ``server_properties``).

    :param name: the node's name, for messages.
    """

    def __init__(self, name: NodeName, pid_file: Path, server_properties: Path) -> None:
        self.name = name
        self.pid_file = pid_file
        self.server_properties = server_properties
        self._child: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        #: Monotonic time at which this object launched its JVM; None before.
        self.started_at: float | None = None

    @property
    def pid(self) -> int | None:
        """Pid of the running JVM, or None (no pid file, dead, or not ours)."""
        pid = self.recorded_pid()
        return pid if pid is not None and self.is_ours(pid) else None

    @property
    def launched(self) -> bool:
        """Whether this object started the JVM that runs (or ran) since the last stop."""
        return self._child is not None

    def exit_code(self) -> int | None:
        """The exit status of the JVM this object launched, None while it runs (or if none)."""
        return self._child.poll() if self._child is not None else None

    def recorded_pid(self) -> int | None:
        """The pid written in ``broker.pid``, whether or not that process still runs."""
        try:
            return int(self.pid_file.read_text(encoding="utf-8").strip())
        except (FileNotFoundError, ValueError):
            return None

    def is_ours(self, pid: int) -> bool:
        """True if ``pid`` is alive and is ``kafka.Kafka`` run with our ``server.properties``."""
        if self._child is not None and self._child.pid == pid:
            return self._child.poll() is None
        argv = _process_argv(pid)
        return argv is not None and "kafka.Kafka" in argv and str(self.server_properties) in argv

    def wait_while_exiting(self, timeout: float) -> None:
        """Wait while the process named in the pid file is exiting (see :func:`_exiting`)."""
        pid = self.recorded_pid()
        deadline = time.monotonic() + timeout
        while pid is not None and _exiting(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def recover_pid_file(self) -> int | None:
        """Rewrite a missing or stale pid file when our JVM still runs, found by its command
        line (Linux ``/proc`` only); the pid written, or None."""
        if self.pid is not None:
            return None
        proc = Path("/proc")
        if not proc.is_dir():
            return None
        wanted = {b"kafka.Kafka", str(self.server_properties).encode()}
        for entry in proc.iterdir():
            try:  # read the command line directly: no waitpid on other programs' children
                argv = set((entry / "cmdline").read_bytes().split(b"\0"))
            except OSError:  # not a process, or it exited just now
                continue
            if entry.name.isdigit() and wanted <= argv and self.is_ours(int(entry.name)):
                self.pid_file.write_text(f"{entry.name}\n", encoding="utf-8")
                return int(entry.name)
        return None

    def launch(
        self, command: Sequence[str], cwd: Path, log_file: Path, owner_pid: int | None
    ) -> None:
        """Start ``command`` in its own session (it outlives us; a Ctrl-C does not reach it)
        with its output in ``log_file`` (the previous one kept as ``<log_file>.1``), and record
        its pid; with an owner, a watchdog stops it when the owner exits."""
        if log_file.exists():
            log_file.replace(log_file.with_name(f"{log_file.name}.1"))
        with log_file.open("wb") as log:
            self._child = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started_at = time.monotonic()
        self.pid_file.write_text(f"{self._child.pid}\n", encoding="utf-8")
        if owner_pid is not None:
            self._watchdog = start_watchdog(owner_pid, self._child.pid)

    def stop(self, timeout: float, give_up: Callable[[], bool] | None = None) -> bool:
        """SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds, or as soon as
        ``give_up()`` says the clean shutdown cannot finish; the pid file goes either way.
        True when a running JVM exited on SIGTERM.

        :raises LocalClusterError: the process survived SIGKILL (should not happen).
        """
        pid = self.pid
        clean = True
        if pid is not None:
            _signal(pid, signal.SIGTERM)
            if not self._wait_exit(pid, timeout, give_up):
                clean = False
                # The JVM leads its own process group (start_new_session), so kill the group.
                _signal(-pid, signal.SIGKILL)
                if not self._wait_exit(pid, 10.0):
                    raise LocalClusterError(
                        f"the {self.name.noun} (pid {pid}) did not exit after SIGKILL"
                    )
        self.pid_file.unlink(missing_ok=True)
        self._child = None
        if self._watchdog is not None:  # it would notice within a second; no need to wait
            _signal(self._watchdog.pid, signal.SIGTERM)
            self._watchdog.wait()
            self._watchdog = None
        return clean and pid is not None

    def _wait_exit(
        self, pid: int, timeout: float, give_up: Callable[[], bool] | None = None
    ) -> bool:
        """Poll until ``pid`` has exited (reaping it if it is our child); False on timeout or
        once ``give_up()`` is true."""
        deadline = time.monotonic() + timeout
        while True:
            if self._child is not None and self._child.pid == pid:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._child.wait(timeout=0.05)
                if self._child.poll() is not None:
                    return True
            elif not _pid_alive(pid):
                return True
            if time.monotonic() >= deadline or (give_up is not None and give_up()):
                return False
            time.sleep(0.05)


_WATCHDOG_SCRIPT = """
while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
if ! kill -0 "$1" 2>/dev/null; then kill -TERM "$2" 2>/dev/null; fi
"""


def start_watchdog(owner_pid: int, broker_pid: int) -> subprocess.Popen[bytes]:
    """A tiny ``sh`` loop that SIGTERMs the broker once ``owner_pid`` is gone.

    Why a separate process: when a test session is killed (SIGKILL, a CI step timeout) no
    Python code runs any more, and the broker, in its own session, would live on holding
    memory and ports. The loop ends by itself when the broker stops first.
    """
    return subprocess.Popen(
        ["/bin/sh", "-c", _WATCHDOG_SCRIPT, "k2k-broker-watchdog", str(owner_pid), str(broker_pid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def tail(path: Path, lines: int) -> list[str]:
    """Last ``lines`` lines of a (small) log file; empty if it does not exist."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return []


def _process_argv(pid: int) -> list[str] | None:
    """The command line of a live process, or None if there is no such process."""
    if not _pid_alive(pid):
        return None
    cmdline = Path("/proc") / str(pid) / "cmdline"
    if cmdline.parent.is_dir():
        try:
            raw = cmdline.read_bytes()
        except OSError:  # it exited just now
            return None
        return [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    done = subprocess.run(  # no /proc (macOS): ask ps
        ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False
    )
    return done.stdout.split() or None


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and has not fully exited.

    An exited child of ours is reaped here (it would otherwise linger as a zombie that
    ``kill -0`` still finds). A zombie of another parent counts as exited, but only once all
    its threads are gone: the JVM's main thread exits (state Z) while its other threads still
    shut down and hold the ports.
    """
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        status = (Path("/proc") / str(pid) / "status").read_text(encoding="utf-8")
    except FileNotFoundError:
        return not Path("/proc/self").is_dir()  # no /proc (macOS): kill -0 is all we know
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    zombie = fields.get("State", "").split()[:1] in (["Z"], ["X"])
    return not (zombie and int(fields.get("Threads", "1").strip() or 1) <= 1)


def _exiting(pid: int) -> bool:
    """True while ``pid`` is being killed but may still hold its files and sockets (Linux).

    The stages of a ``kill -9``: SIGKILL pending (the process still looks normal), then the
    kernel's exit path (the memory, and with it the command line, is gone before the files
    and sockets are closed), then a zombie main thread while the other threads finish. False
    for a process that is gone, a fully exited zombie, or any process not in those stages.
    """
    proc = Path("/proc") / str(pid)
    try:
        status = (proc / "status").read_text(encoding="utf-8")
        cmdline = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    fields = {
        key: value.strip() for key, _, value in (x.partition(":") for x in status.splitlines())
    }
    threads = int(fields.get("Threads") or 1)
    if fields.get("State", "")[:1] in ("Z", "X"):
        return threads > 1
    sigkill = 1 << (signal.SIGKILL - 1)
    pending = any(int(fields.get(key) or "0", 16) & sigkill for key in ("SigPnd", "ShdPnd"))
    return pending or not cmdline


def _signal(pid: int, signum: signal.Signals) -> None:
    """Send a signal, ignoring a process that has just gone away."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
