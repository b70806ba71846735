"""The driver -> runner signal channel: "keep going" or "end this lease now".

Spark has no way to tell a running Python task to finish gracefully; cancelling a job kills
the worker and abandons its uncommitted batch. So the planner serves a one-line TCP answer
(``run`` or ``stop``) on the driver, and every runner polls it in a background thread. A
runner that sees ``stop`` commits what it has and returns, which makes SIGTERM, topic
discovery and lease re-planning clean. Executors can always reach the driver in Spark, so
this works in local mode and on clusters alike.

A runner whose driver is gone stops writing at once and commits nothing: Spark does not
always kill a dead driver's Python workers (they run in a process group of their own), and
one left copying would interleave with the restarted run's writes. "Gone" is the channel
refusing connections or answering for another driver (a restart on a fixed port) for half a
second, or no answer at all for half a minute; a driver that is merely busy still answers
within that (docs/spark.md#when-the-driver-dies).

With telemetry the same connection carries the runner's metrics the other way: a request is
the token line and a frame line, empty or a metrics frame (:mod:`k2k.metrics.frames`, at
most one a second), so metrics add no connection and no thread.
"""

from __future__ import annotations

import hmac
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from k2k.errors import ConfigError

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["LeaseControl", "StopSignal", "open_channel"]

_POLL_INTERVAL_S = 0.25
#: How often a runner sends its metrics frame.
_FRAME_INTERVAL_S = 1.0
#: A frame longer than this is dropped (about 40,000 partitions in one runner).
_MAX_FRAME_BYTES = 8 << 20
#: Refused connections or a foreign driver's answer for this long: the driver is gone.
_GONE_AFTER_S = 0.5
#: No answer at all for this long (an unreachable driver host): the driver is gone.
_SILENT_AFTER_S = 30.0
#: How often the driver's server looks for its own shutdown (closing waits for it).
_SERVE_POLL_S = 0.1


class LeaseControl:
    """Runs on: driver. Answers runners' polls; ``end_lease()`` makes them wrap up."""

    def __init__(self, host: str, bind_host: str | None = None, port: int = 0) -> None:
        """``host`` is the address runners connect to; the server listens on ``bind_host``
        (default: the same), e.g. ``0.0.0.0`` when executors run on other machines, and on
        ``port`` (0: any free one). A port already taken raises
        :class:`~k2k.errors.ConfigError` naming ``spark.controlPort``."""
        self.token = secrets.token_hex(16)
        self._stop = threading.Event()
        #: Called with each runner's metrics frame (telemetry), in a server thread.
        self.on_frame: Callable[[bytes], None] | None = None
        control = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(2.0)
                try:
                    line = self.rfile.readline(200).strip().decode("ascii", "replace")
                    ok = hmac.compare_digest(line, control.token)
                    frame = self.rfile.readline(_MAX_FRAME_BYTES).strip() if ok else b""
                except OSError:
                    return
                if not ok:
                    answer = b"foreign\n"  # a runner of an earlier driver on this port
                else:
                    answer = b"stop\n" if control._stop.is_set() else b"run\n"
                self.wfile.write(answer)
                if frame and control.on_frame is not None:
                    control.on_frame(frame)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        try:
            self._server = Server((bind_host or host, port), Handler)
        except OSError as exc:
            raise ConfigError(
                f"spark.controlPort: cannot listen on {bind_host or host}:{port} for the "
                f"lease channel ({exc.strerror or exc}); expected a free port"
            ) from exc
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(_SERVE_POLL_S,), daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int, str]:
        return (self.host, self.port, self.token)

    def end_lease(self) -> None:
        """Ask every runner of the current lease to commit and return."""
        self._stop.set()

    def new_lease(self) -> None:
        self._stop.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class StopSignal:
    """Runs on: executor, one per runner task. ``is_set()`` is cheap (an Event check); it
    is also set when the driver is gone, and then ``driver_gone`` says why.
    ``frames`` (telemetry) gives the runner's metrics frame to send, once a second."""

    def __init__(
        self,
        address: tuple[str, int, str] | None,
        frames: Callable[[], bytes] | None = None,
    ) -> None:
        self._event = threading.Event()
        self._closed = threading.Event()
        #: Why the driver that started this runner is taken for gone (see the module doc).
        self.driver_gone: str | None = None
        self._address = address
        self._frames = frames
        if address is not None:
            threading.Thread(target=self._poll, daemon=True, name="k2k-stop-signal").start()

    def is_set(self) -> bool:
        return self._event.is_set()

    def close(self) -> None:
        self._closed.set()

    def send_now(self) -> None:
        """Send the current frame at once, from the calling thread (a task's last one)."""
        if self._address is not None and self._frames is not None:
            self._send(self._frames())

    def _poll(self) -> None:
        next_frame = time.monotonic() + _FRAME_INTERVAL_S
        answered = time.monotonic()  # the last "run" (or start-up)
        rejected: float | None = None  # since when every request was refused or foreign
        while not self._closed.wait(_POLL_INTERVAL_S):
            frame = b""
            now = time.monotonic()
            if self._frames is not None and now >= next_frame:
                next_frame = now + _FRAME_INTERVAL_S
                frame = self._frames()
            answer = self._send(frame)
            now = time.monotonic()
            if answer == "stop":
                self._event.set()
                return
            if answer == "run":
                answered, rejected = now, None
                continue
            if answer == "rejected" and rejected is None:
                rejected = now
            if answer == "silent":
                rejected = None
            gone = self._gone(rejected, answered, now)
            if gone:
                self.driver_gone = gone
                self._event.set()
                return

    def _gone(self, rejected: float | None, answered: float, now: float) -> str | None:
        """Why the driver counts as gone now, or None."""
        assert self._address is not None
        where = f"the lease channel at {self._address[0]}:{self._address[1]}"
        if rejected is not None and now - rejected >= _GONE_AFTER_S:
            return f"{where} refuses this runner: its driver is gone"
        if now - answered >= _SILENT_AFTER_S:
            return (
                f"no answer from {where} for {_SILENT_AFTER_S:g} s: the driver is gone or "
                "the port is closed to executors (spark.controlPort)"
            )
        return None

    def _send(self, frame: bytes) -> str:
        """One request with ``frame``. Returns ``run`` or ``stop`` (the driver's answer),
        ``rejected`` (nothing listens, or another driver does) or ``silent`` (no answer:
        a lost frame is made good by the next one, which carries running totals)."""
        assert self._address is not None
        host, port, token = self._address
        try:
            with socket.create_connection((host, port), timeout=2.0) as sock:
                sock.sendall(token.encode() + b"\n" + frame + b"\n")
                answer = sock.makefile("rb").readline(16)
        except ConnectionRefusedError:
            return "rejected"
        except OSError:
            return "silent"
        if answer.startswith(b"run"):
            return "run"
        if answer.startswith(b"stop"):
            return "stop"
        return "rejected" if answer.startswith(b"foreign") else "silent"


def open_channel(sc: SparkContext, host: str | None, port: int | None) -> LeaseControl:
    """Runs on: driver, once per start. The lease channel's endpoint, where runners reach
    it, decided by the session's real master (``sc.master``, whoever chose it): loopback
    for a local master, else every interface, advertised as ``host`` (default
    ``spark.driver.host``). ``port`` None: any free port."""
    from k2k.spark.session import is_local  # driver only: tasks import this module too

    if is_local(sc.master or ""):
        return LeaseControl(host or "127.0.0.1", port=port or 0)
    advertised = host or sc.getConf().get("spark.driver.host") or socket.gethostname()
    return LeaseControl(advertised, bind_host="0.0.0.0", port=port or 0)
