"""The driver -> runner signal channel: "keep going" or "end this lease now".

Spark has no way to tell a running Python task to finish gracefully; cancelling a job kills
the worker and abandons its uncommitted batch. So the planner serves a one-line TCP answer
(``run`` or ``stop``) on the driver, and every runner polls it in a background thread. A
runner that sees ``stop`` commits what it has and returns, which makes SIGTERM, topic
discovery and lease re-planning clean. Executors can always reach the driver in Spark, so
this works in local mode and on clusters alike. A runner that cannot reach the driver keeps
going until its lease deadline (the driver may be briefly busy; a dead driver makes Spark
kill the task anyway).

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

from k2k.errors import ConfigError

__all__ = ["LeaseControl", "StopSignal"]

_POLL_INTERVAL_S = 0.25
#: How often a runner sends its metrics frame.
_FRAME_INTERVAL_S = 1.0
#: A frame longer than this is dropped (about 40,000 partitions in one runner).
_MAX_FRAME_BYTES = 8 << 20


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
                answer = b"stop\n" if (not ok or control._stop.is_set()) else b"run\n"
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
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
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
    """Runs on: executor, one per runner task. ``is_set()`` is cheap (an Event check).
    ``frames`` (telemetry) gives the runner's metrics frame to send, once a second."""

    def __init__(
        self,
        address: tuple[str, int, str] | None,
        frames: Callable[[], bytes] | None = None,
    ) -> None:
        self._event = threading.Event()
        self._closed = threading.Event()
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
        while not self._closed.wait(_POLL_INTERVAL_S):
            frame = b""
            if self._frames is not None and time.monotonic() >= next_frame:
                next_frame = time.monotonic() + _FRAME_INTERVAL_S
                frame = self._frames()
            if self._send(frame):
                self._event.set()
                return

    def _send(self, frame: bytes) -> bool:
        """One request with ``frame``; whether the answer was ``stop``."""
        assert self._address is not None
        host, port, token = self._address
        try:
            with socket.create_connection((host, port), timeout=2.0) as sock:
                sock.sendall(token.encode() + b"\n" + frame + b"\n")
                answer = sock.makefile("rb").readline(16)
        except OSError:
            return False  # a lost frame is made good by the next one (running totals)
        return answer.startswith(b"stop")
