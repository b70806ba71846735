"""The driver -> runner signal channel: "keep going", "take this assignment" or "end this
lease now".

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
the token line, a command line and a frame line, empty or a metrics frame
(:mod:`k2k.metrics.frames`, at most one a second), so metrics add no connection and no thread.

A continuous lease changes without stopping (docs/architecture.md#leases-that-do-not-stop):
each runner slot has an assignment *version*. A poll says the version the runner applied
(``poll <slot> <version>``) and the answer the version the driver wants (``run <version>``);
a runner behind fetches its slot's whole assignment (``fetch <slot>``, a pickled
:class:`~k2k.pipeline.plan.SlotAssignment`, trusted as Spark's own task data is), applies it
between two consumed batches and acknowledges it with the partitions it let go
(``applied <slot> <version>``, JSON). A runner that returns says so (``ended <slot>``), so
the driver ends the lease instead of running on with a slot that copies nothing.
"""

from __future__ import annotations

import hmac
import json
import pickle
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

    from k2k.pipeline.plan import PartitionOutcome, SlotAssignment

__all__ = ["Dropped", "LeaseControl", "StopSignal", "open_channel"]

#: What a runner let go when it applied an assignment: one dict per partition
#: (``topic``, ``partition``, ``start``, ``committed``, ``progress_written``, ``lost``).
Dropped = list[dict[str, object]]

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
#: The largest assignment a runner fetches (every topic plan of a whole cluster).
_MAX_ASSIGNMENT_BYTES = 256 << 20


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
        self._lock = threading.Lock()
        #: Per runner slot: the version it should run, and that assignment pickled.
        self._wanted: dict[int, tuple[int, bytes]] = {}
        #: Per runner slot: the newest version it applied, and what it let go then.
        self._applied: dict[int, int] = {}
        self._dropped: list[Dropped] = []
        #: Runner slots whose task returned while the lease ran.
        self._ended: set[int] = set()
        control = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(2.0)
                try:
                    line = self.rfile.readline(200).strip().decode("ascii", "replace")
                    ok = hmac.compare_digest(line, control.token)
                    command = self.rfile.readline(200).strip().decode("ascii", "replace")
                    payload = self.rfile.readline(_MAX_FRAME_BYTES).strip() if ok else b""
                except OSError:
                    return
                if not ok:
                    self.wfile.write(b"foreign\n")  # a runner of an earlier driver on this port
                    return
                self.wfile.write(control._answer(command.split(), payload))
                if payload and command.startswith("poll") and control.on_frame is not None:
                    control.on_frame(payload)

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
        """A new lease: no stop, and every slot starts at version 0 (its task's group)."""
        with self._lock:
            self._wanted.clear()
            self._applied.clear()
            self._dropped.clear()
            self._ended.clear()
        self._stop.clear()

    def assign(self, slot: int, assignment: SlotAssignment) -> None:
        """Make ``assignment`` the one runner ``slot`` applies next (its version must grow)."""
        data = pickle.dumps(assignment, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._wanted[slot] = (assignment.version, data)

    def applied(self, slot: int) -> int:
        """The newest assignment version runner ``slot`` applied (0: its task's group)."""
        with self._lock:
            return self._applied.get(slot, 0)

    def take_dropped(self) -> list[Dropped]:
        """What runners let go since the last call (their acknowledgements' partitions)."""
        with self._lock:
            dropped, self._dropped = self._dropped, []
        return dropped

    @property
    def ended(self) -> frozenset[int]:
        """Runner slots whose task returned during this lease."""
        with self._lock:
            return frozenset(self._ended)

    def _answer(self, words: list[str], payload: bytes) -> bytes:
        """The answer to one runner request (see the module doc for the commands)."""
        verb = words[0] if words else "poll"
        slot = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
        if verb == "fetch" and slot is not None:
            with self._lock:
                data = self._wanted.get(slot, (0, b""))[1]
            return b"assignment %d\n" % len(data) + data
        if verb == "applied" and slot is not None and len(words) > 2:
            with self._lock:
                version = int(words[2])
                self._applied[slot] = max(version, self._applied.get(slot, 0))
                self._dropped.append(json.loads(payload or b"[]"))
            return b"ok\n"
        if verb == "ended" and slot is not None:
            with self._lock:
                self._ended.add(slot)
            return b"ok\n"
        if self._stop.is_set():
            return b"stop\n"
        with self._lock:
            version = self._wanted.get(slot, (0, b""))[0] if slot is not None else 0
        return b"run %d\n" % version

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class StopSignal:
    """Runs on: executor, one per runner task. ``is_set()`` is cheap (an Event check); it
    is also set when the driver is gone, and then ``driver_gone`` says why.
    ``frames`` (telemetry) gives the runner's metrics frame to send, once a second.

    With a ``slot`` (a continuous lease's runner) it also follows the slot's assignment:
    :meth:`wants_attention` turns true when the driver wants the runner to stop *or* to
    apply a new assignment (one Event check for both in the copy loop), and
    :meth:`take_assignment` hands the new one over."""

    def __init__(
        self,
        address: tuple[str, int, str] | None,
        frames: Callable[[], bytes] | None = None,
        slot: int | None = None,
    ) -> None:
        self._event = threading.Event()
        self._attention = threading.Event()
        self._closed = threading.Event()
        #: Why the driver that started this runner is taken for gone (see the module doc).
        self.driver_gone: str | None = None
        self._address = address
        self._frames = frames
        self._slot = slot
        #: The assignment version applied (0: the task's own group) and one fetched since.
        self.version = 0
        self._lock = threading.Lock()
        self._fetched: SlotAssignment | None = None
        if address is not None:
            threading.Thread(target=self._poll, daemon=True, name="k2k-stop-signal").start()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wants_attention(self) -> bool:
        """True when the runner must stop or apply a new assignment (one Event check)."""
        return self._attention.is_set()

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` for a stop or a new assignment (an empty slot's idle)."""
        self._attention.wait(seconds)

    def take_assignment(self) -> SlotAssignment | None:
        """The assignment fetched since the last call, if any (the attention is cleared
        unless the runner must stop)."""
        with self._lock:
            fetched, self._fetched = self._fetched, None
            if not self._event.is_set():
                self._attention.clear()
        return fetched

    def applied(self, version: int, dropped: list[PartitionOutcome]) -> None:
        """Tell the driver the runner applied ``version`` and let ``dropped`` go (from the
        runner's thread: the driver waits for it before it releases them)."""
        self.version = version
        payload = json.dumps(
            [
                {
                    "topic": o.topic,
                    "partition": o.partition,
                    "start": o.start,
                    "committed": o.committed,
                    "progress_written": o.progress_written,
                    "lost": o.lost,
                }
                for o in dropped
            ]
        ).encode()
        self._request(f"applied {self._slot} {version}", payload, 16)

    def ended(self) -> None:
        """Tell the driver this runner returned (best effort: the job's end says it too)."""
        if self._slot is not None:
            self._request(f"ended {self._slot}", b"", 16)

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
                self._stop()
                return
            if answer.startswith("run"):
                answered, rejected = now, None
                self._follow(answer)
                continue
            if answer == "rejected" and rejected is None:
                rejected = now
            if answer == "silent":
                rejected = None
            gone = self._gone(rejected, answered, now)
            if gone:
                self.driver_gone = gone
                self._stop()
                return

    def _stop(self) -> None:
        with self._lock:
            self._event.set()
            self._attention.set()

    def _follow(self, answer: str) -> None:
        """``run <version>``: fetch the slot's assignment when the driver wants a newer one
        than the runner applied (and has not fetched yet)."""
        words = answer.split()
        wanted = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
        with self._lock:
            fetched = self._fetched.version if self._fetched is not None else self.version
        if self._slot is None or wanted <= fetched:
            return
        data = self._request(f"fetch {self._slot}", b"", _MAX_ASSIGNMENT_BYTES)
        if not data.startswith(b"assignment "):
            return  # asked again at the next poll
        head, _, body = data.partition(b"\n")
        if len(body) != int(head.split()[1]) or not body:
            return
        assignment: SlotAssignment = pickle.loads(body)
        with self._lock:
            self._fetched = assignment
            self._attention.set()

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
        """One poll with ``frame``. Returns ``run <version>`` or ``stop`` (the driver's
        answer), ``rejected`` (nothing listens, or another driver does) or ``silent`` (no
        answer: a lost frame is made good by the next one, which carries running totals)."""
        slot = "-" if self._slot is None else str(self._slot)
        try:
            answer = self._exchange(f"poll {slot} {self.version}", frame, 32, timeout=2.0)
        except ConnectionRefusedError:
            return "rejected"
        except OSError:
            return "silent"
        if answer.startswith(b"run"):
            return answer.strip().decode("ascii", "replace")
        if answer.startswith(b"stop"):
            return "stop"
        return "rejected" if answer.startswith(b"foreign") else "silent"

    def _request(self, command: str, payload: bytes, limit: int) -> bytes:
        """One request other than a poll; b"" when it got no answer."""
        try:
            return self._exchange(command, payload, limit)
        except OSError:
            return b""

    def _exchange(self, command: str, payload: bytes, limit: int, timeout: float = 10.0) -> bytes:
        assert self._address is not None
        host, port, token = self._address
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(token.encode() + b"\n" + command.encode() + b"\n" + payload + b"\n")
            reader = sock.makefile("rb")
            head = reader.readline(64)
            if not head.startswith(b"assignment "):
                return head
            size = int(head.split()[1])
            return head + reader.read(min(size, limit))


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
