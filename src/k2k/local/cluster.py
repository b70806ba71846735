"""Single-node Apache Kafka clusters (KRaft, broker and controller in one JVM) on loopback.

Why one JVM per cluster: a combined node is the smallest real Kafka that does everything k2k
needs (transactions, compaction, consumer groups), starts in a few seconds and fits in 512 MB.
The demo and the tests run two of them, *source* and *target*, from :func:`start_pair`.

A cluster lives entirely in its ``data_dir``::

    server.properties   written on every start from the constructor's arguments
    log4j2.yaml         quiet logging (warnings, errors, "started")
    broker.log          the JVM's stdout and stderr (the previous run's is broker.log.1)
    broker.pid          pid of the running JVM; how `k2k local down/status` find it
    kraft/              log.dirs: metadata log and topic data (formatted on first start)

The JVM runs in its own session (``setsid``), so it outlives the process that started it (the
``k2k local up`` command) and a Ctrl-C in that terminal does not reach it. Before signalling a
pid from ``broker.pid`` we check that the process really is a ``kafka.Kafka`` JVM started with
*this* ``server.properties``; a recycled pid is never killed.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from k2k.errors import LocalClusterError
from k2k.kafka.factory import build_admin
from k2k.local.install import ensure_kafka_installed, find_java, java_build_id

__all__ = [
    "ClusterPair",
    "LocalCluster",
    "free_port",
    "port_is_free",
    "start_clusters",
    "start_pair",
    "stop_clusters",
]

HOST = "127.0.0.1"
MAX_MESSAGE_BYTES = 10 * 1024 * 1024
"""Largest record batch the brokers accept (``message.max.bytes``): a 1 MB record fits easily."""

DEFAULT_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""JIT and GC flags for a fast start: the serial collector suits a small heap, and stopping at the
C1 compiler starts the broker sooner. C1 code is slower at peak throughput, so a
benchmark should pass its own ``jvm_options`` (e.g. ``()``) to measure the broker at full speed."""

_LOG_TAIL_LINES = 20
_PROBE_TOPIC = "__k2k_local_ready_probe"
_DUPLICATE_REGISTRATION = "because the controller returned error DUPLICATE_BROKER_REGISTRATION"
_REGISTERED = "Successfully registered broker"

Announce = Callable[[str], None]
"""Where :meth:`LocalCluster.start` reports what it recovered from (the CLI prints to stderr)."""


def _silent(_message: str) -> None:
    pass


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that the OS just reported free (bind to port 0).

    The port is released before returning, so another process could take it in between; for
    loopback test clusters that window is acceptable and far safer than random numbers.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Return True when a listener could bind ``127.0.0.1:port`` right now.

    Uses ``SO_REUSEADDR`` like the JVM does, so sockets lingering in TIME_WAIT after a broker
    stopped do not count as "in use", while any live listener (also on 0.0.0.0) does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


class LocalCluster:
    """One embedded Kafka cluster: a single KRaft node listening on ``127.0.0.1:<port>``.

    Broker settings favour fast start-up and single-node correctness: replication factor 1 for
    every internal topic, no group rebalance delay, ``auto.create.topics.enable=false`` (k2k must
    create what it needs, as on a production cluster) and ``message.max.bytes`` of 10 MiB.
    ``broker_overrides`` are written last and win.

    :param name: label used in messages and by the CLI ("source", "target").
    :param port: the PLAINTEXT listener port; 0 picks a free one now.
    :param data_dir: where this cluster keeps everything (see the module docstring).
    :param controller_port: the KRaft controller listener; None picks a free port at each start.
    :param heap: JVM maximum heap (``-Xmx``), e.g. "512m" or "1g".
    :param broker_overrides: extra or replacement ``server.properties`` entries.
    :param jvm_options: GC/JIT options; defaults to :data:`DEFAULT_JVM_OPTIONS`.
    :param owner_pid: stop the broker when this process ends, even if it is killed without a
        chance to clean up (test sessions pass their own pid). None: the broker runs until
        :meth:`stop`, as ``k2k local up`` wants.

    Start-up also uses a class-data-sharing archive of the broker's classes (a faster start):
    the first cluster that stops cleanly leaves one per JVM build next to the jars, and every
    later start maps it. A JVM that cannot use it loads classes the normal way (and says so in
    ``broker.log``).
    """

    def __init__(
        self,
        name: str,
        port: int,
        data_dir: str | os.PathLike[str],
        controller_port: int | None = None,
        heap: str = "512m",
        broker_overrides: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] | None = None,
        owner_pid: int | None = None,
    ) -> None:
        self.name = name
        self.port = port or free_port()
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.controller_port = controller_port
        self.heap = heap
        self.broker_overrides = dict(broker_overrides or {})
        self.jvm_options = list(DEFAULT_JVM_OPTIONS if jvm_options is None else jvm_options)
        self.owner_pid = owner_pid
        self._process: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._started_at: float | None = None  # monotonic time of our JVM's launch

    def __repr__(self) -> str:
        return (
            f"LocalCluster(name={self.name!r}, bootstrap={self.bootstrap!r}, "
            f"data_dir={str(self.data_dir)!r})"
        )

    # -- files ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients: ``127.0.0.1:<port>``."""
        return f"{HOST}:{self.port}"

    @property
    def server_properties(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def log_dirs(self) -> Path:
        return self.data_dir / "kraft"

    @classmethod
    def from_data_dir(cls, name: str, data_dir: str | os.PathLike[str]) -> LocalCluster | None:
        """Rebuild the cluster that last ran in ``data_dir`` (None if it never started there).

        Used by ``k2k local down/status`` in a later process than the one that started the
        cluster: the ports come from the ``server.properties`` that start wrote.
        """
        path = Path(data_dir).expanduser().resolve() / "server.properties"
        try:
            props = _read_properties(path)
        except FileNotFoundError:
            return None
        ports: dict[str, int] = {}
        for listener in props.get("listeners", "").split(","):
            label, _, address = listener.partition("://")
            if address.rpartition(":")[2].isdigit():
                ports[label.strip()] = int(address.rpartition(":")[2])
        if "PLAINTEXT" not in ports:
            return None
        return cls(name, ports["PLAINTEXT"], path.parent, controller_port=ports.get("CONTROLLER"))

    # -- state ---------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Pid of this cluster's running JVM, or None (no pid file, dead, or not ours)."""
        try:
            pid = int(self.pid_file.read_text(encoding="utf-8").strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if self._is_our_broker(pid) else None

    def is_running(self) -> bool:
        """Return True if this cluster's JVM is alive (it may still be starting up)."""
        return self.pid is not None

    def _pid_file_value(self) -> int | None:
        """The pid written in ``broker.pid``, whether or not that process still runs."""
        try:
            return int(self.pid_file.read_text(encoding="utf-8").strip())
        except (FileNotFoundError, ValueError):
            return None

    def wait_while_exiting(self, timeout: float = 30.0) -> None:
        """Wait while the process named in ``broker.pid`` is exiting (at most ``timeout`` s).

        A JVM killed a moment ago does not exit at once: for a while it no longer looks like
        our broker (its command line is gone) but still holds the listener port (see
        :func:`_exiting`). ``k2k local up`` right after a ``kill -9`` must wait for that
        instead of reporting the port as taken by another program.
        """
        pid = self._pid_file_value()
        deadline = time.monotonic() + timeout
        while pid is not None and _exiting(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def recover_pid_file(self) -> int | None:
        """Rewrite a missing or stale ``broker.pid`` when this cluster's JVM still runs.

        Finds the JVM by its command line (``kafka.Kafka`` with our ``server.properties``,
        Linux ``/proc`` only), e.g. after ``broker.pid`` was deleted by hand. Returns the pid
        it wrote, or None when the pid file was right or no such JVM runs.
        """
        if self.is_running():
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
            if entry.name.isdigit() and wanted <= argv and self._is_our_broker(int(entry.name)):
                self.pid_file.write_text(f"{entry.name}\n", encoding="utf-8")
                return int(entry.name)
        return None

    def _is_our_broker(self, pid: int) -> bool:
        """True if ``pid`` is alive and is ``kafka.Kafka`` run with our ``server.properties``."""
        if self._process is not None and self._process.pid == pid:
            return self._process.poll() is None
        argv = _process_argv(pid)
        return argv is not None and "kafka.Kafka" in argv and str(self.server_properties) in argv

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, timeout: float = 60.0, announce: Announce | None = None) -> None:
        """Start the cluster and return once it serves metadata and accepts topic creation.

        Formats the storage on the first start. Returns at once (after the same readiness
        check) if the cluster is already running.

        After an unclean stop (the JVM was killed, the machine crashed):

        * a stale ``broker.pid`` (a dead pid, or one reused by another program) is replaced;
          a leftover ``kraft/.lock`` is harmless (Kafka locks the file; that it exists means
          nothing);
        * storage whose ``meta.properties`` is missing or incomplete is formatted again if it
          holds no data (an interrupted first format), and refused with what to do otherwise;
        * the controller still holds the killed broker's registration for
          ``broker.session.timeout.ms`` and refuses the new one; :meth:`_wait_ready` removes
          that stale registration (see :meth:`_unregister_stale_broker`).

        :param announce: called with one line for each such recovery.
        :raises LocalClusterError: the port is taken, Java or the jars are missing, the storage
            is damaged, or the broker did not become ready within ``timeout`` seconds (the
            message quotes the last lines of ``broker.log``).
        """
        deadline = time.monotonic() + timeout
        announce = announce or _silent
        if self._ready_already(deadline, announce):
            return
        stale = self._pid_file_value()
        if stale is not None:
            announce(
                f"{self.name}: the previous broker (pid {stale}) did not stop cleanly; "
                "starting a new one on the same data"
            )
        if not port_is_free(self.port):
            raise LocalClusterError(
                f"cannot start the {self.name} cluster: port {self.port} on {HOST} is already "
                "in use by another process"
            )
        libs = ensure_kafka_installed()
        java = find_java()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._prepare_storage(java, libs, deadline, announce)
        self._launch(java, libs)
        try:
            self._wait_ready(deadline, announce)
        except BaseException:
            self.stop(timeout=10)  # never leave a half-started JVM behind
            raise

    def _ready_already(self, deadline: float, announce: Announce) -> bool:
        """Whether this cluster's broker runs already and became ready (``start`` is then
        done); False when none runs, or the one that ran exited while we waited."""
        self.wait_while_exiting()
        adopted = self.recover_pid_file()
        if adopted is not None:
            announce(f"{self.name}: running as pid {adopted} without a pid file; recorded it")
        running = self.pid
        if running is None:
            return False
        try:
            self._wait_ready(deadline)
            return True
        except LocalClusterError:
            if self.is_running():
                raise
            # It died while we waited (e.g. `up` right after a kill -9): start a new one.
            announce(f"{self.name}: the broker (pid {running}) exited; starting it again")
            self.wait_while_exiting()
            return False

    def _launch(self, java: str, libs: Path) -> None:
        """Start the broker's JVM (the previous log kept as ``broker.log.1``) and record its
        pid; with an owner, a watchdog stops it when the owner exits."""
        if self.log_file.exists():
            self.log_file.replace(self.log_file.with_name("broker.log.1"))
        class_data = self._class_data_options(java, libs)
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    *self._jvm_command(java, libs, class_data),
                    "kafka.Kafka",
                    str(self.server_properties),
                ],
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._started_at = time.monotonic()
        self.pid_file.write_text(f"{self._process.pid}\n", encoding="utf-8")
        if self.owner_pid is not None:
            self._watchdog = _start_watchdog(self.owner_pid, self._process.pid)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the JVM: SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds.

        Does nothing if the cluster is not running; a stale pid file is removed either way.

        :raises LocalClusterError: the process survived SIGKILL (should not happen).
        """
        pid = self.pid
        clean = True
        if pid is not None:
            _signal(pid, signal.SIGTERM)
            if not self._wait_exit(pid, timeout):
                clean = False
                # The JVM leads its own process group (start_new_session), so kill the group.
                _signal(-pid, signal.SIGKILL)
                if not self._wait_exit(pid, 10.0):
                    raise LocalClusterError(
                        f"the {self.name} cluster (pid {pid}) did not exit after SIGKILL"
                    )
        self.pid_file.unlink(missing_ok=True)
        self._process = None
        if self._watchdog is not None:  # it would notice within a second; no need to wait
            _signal(self._watchdog.pid, signal.SIGTERM)
            self._watchdog.wait()
            self._watchdog = None
        self._publish_class_data(complete=clean and pid is not None)

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        """Poll until ``pid`` has exited (reaping it if it is our child); False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if self._process is not None and self._process.pid == pid:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(timeout=0.05)
                if self._process.poll() is not None:
                    return True
            elif not _pid_alive(pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    # -- helpers -------------------------------------------------------------------------
    def _settings(self, controller_port: int) -> dict[str, str]:
        """The broker configuration; each choice is about a single node or a fast start."""
        settings: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{HOST}:{controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.log_dirs,
            # One node: every internal topic must be satisfiable with a single replica.
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            # The first group or transaction creates these topics; 50 partitions each (the
            # default) makes that first use take seconds on one node for no benefit.
            "offsets.topic.num.partitions": 5,
            "transaction.state.log.num.partitions": 5,
            # Consumer groups in tests join one by one; do not wait 3 s for more members.
            "group.initial.rebalance.delay.ms": 0,
            # Topics are created explicitly, as k2k must do on real clusters.
            "auto.create.topics.enable": "false",
            "num.partitions": 1,
            # Large records: the broker must accept what the demo and tests send (a 1 MB record);
            # replica fetches must be able to carry the largest batch too.
            "message.max.bytes": MAX_MESSAGE_BYTES,
            "replica.fetch.max.bytes": MAX_MESSAGE_BYTES,
            # The node's controller fences its own broker after missed heartbeats (9 s by
            # default): on a laptop starved of CPU that takes every leader away until the
            # broker registers again, and there is no other node to fail over to.
            "broker.session.timeout.ms": 60_000,
            # The compaction dedupe buffer defaults to 128 MiB; keep it small next to -Xmx512m.
            "log.cleaner.dedupe.buffer.size": 32 * 1024 * 1024,
            # Compact within a second of a segment becoming cleanable (15 s by default), so
            # compacted topics show their offset gaps while one tries things out.
            "log.cleaner.backoff.ms": 1000,
        }
        settings.update(self.broker_overrides)
        # After a kill -9 the controller keeps the dead broker's registration for a session
        # and refuses the new broker's (DUPLICATE_BROKER_REGISTRATION). The broker gives up
        # registering after 60 s by default, which races that 60 s session and usually loses
        # ("fatal error while waiting for the controller to acknowledge that we are caught
        # up"). Outlast the session, so the slow path (no unregister) still starts.
        session_ms = int(str(settings["broker.session.timeout.ms"]))
        settings.setdefault("initial.broker.registration.timeout.ms", session_ms + 30_000)
        return {key: str(value) for key, value in settings.items()}

    def _write_config(self) -> None:
        """Write ``server.properties`` and ``log4j2.yaml`` for this start."""
        controller_port = self.controller_port or free_port()
        if controller_port == self.port:  # the OS may hand back our own, still-free port
            controller_port = free_port()
        lines = [
            "# Written by k2k.local on every start; change LocalCluster(broker_overrides=...).",
            *(f"{key}={value}" for key, value in self._settings(controller_port).items()),
        ]
        self.server_properties.write_text("\n".join(lines) + "\n", encoding="utf-8")
        log4j = resources.files("k2k.local").joinpath("log4j2.yaml").read_text(encoding="utf-8")
        (self.data_dir / "log4j2.yaml").write_text(log4j, encoding="utf-8")

    def _jvm_command(self, java: str, libs: Path, class_data: Sequence[str] = ()) -> list[str]:
        """``java`` and its options, up to (not including) the main class."""
        return [
            java,
            f"-Xmx{self.heap}",
            f"-Xms{_min_heap(self.heap)}",
            *self.jvm_options,
            *class_data,
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
            "-cp",
            f"{libs}/*",
        ]

    def check_storage(self) -> None:
        """Refuse storage that holds data but has no valid ``meta.properties``.

        Storage without a valid ``meta.properties`` is formatted again by :meth:`start` only
        when it holds no data: everything a format writes sits at the top of ``kraft/``,
        while a broker that ran keeps its metadata log and topics in subdirectories. With
        data, a new format would put a new cluster id over old topics, so we stop and say what
        to do. Cheap (no JVM): ``k2k local up`` checks both clusters before starting either.

        :raises LocalClusterError: one line naming the file and the two ways out.
        """
        meta = self.log_dirs / "meta.properties"
        problem = _meta_properties_problem(meta)
        if problem is not None and _holds_data(self.log_dirs):
            raise LocalClusterError(
                f"the {self.name} cluster's storage {self.log_dirs} holds data but its "
                f"meta.properties {problem}; restore {meta}, or delete {self.log_dirs} to "
                "start this cluster empty (its topics are lost)"
            )

    def _prepare_storage(self, java: str, libs: Path, deadline: float, announce: Announce) -> None:
        """Format ``kraft/`` unless it holds a valid ``meta.properties`` (see
        :meth:`check_storage`); storage without data is cleared and formatted again."""
        self.check_storage()
        problem = _meta_properties_problem(self.log_dirs / "meta.properties")
        if problem is None:
            return
        if self.log_dirs.exists():
            announce(
                f"{self.name}: meta.properties in {self.log_dirs} {problem} and the storage holds "
                "no data (an interrupted format); formatting it again"
            )
            shutil.rmtree(self.log_dirs)
        self._format_storage(java, libs, deadline)

    def _format_storage(self, java: str, libs: Path, deadline: float) -> None:
        """Format ``kraft/`` with a fresh cluster id (KRaft refuses to start on raw storage)."""
        try:
            done = self._run_tool(
                java,
                libs,
                "kafka.tools.StorageTool",
                "format",
                "--cluster-id",
                _random_cluster_id(),
                "--config",
                str(self.server_properties),
                timeout_s=max(deadline - time.monotonic(), 1.0),
            )
        except subprocess.TimeoutExpired as exc:
            raise LocalClusterError(
                f"formatting the storage of the {self.name} cluster in {self.log_dirs} timed out"
            ) from exc
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip().splitlines()
            raise LocalClusterError(
                f"formatting the storage of the {self.name} cluster in {self.log_dirs} failed "
                f"(exit {done.returncode}): {' | '.join(output[-_LOG_TAIL_LINES:])}"
            )

    def _run_tool(
        self, java: str, libs: Path, *args: str, timeout_s: float
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's command-line tools (main class and arguments in ``args``) with
        the cluster's JVM settings and the shared class data; its output is captured."""
        archive = _class_data_archive(java, libs)
        class_data = [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else []
        return subprocess.run(
            [*self._jvm_command(java, libs, class_data), *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )

    def _class_data_options(self, java: str, libs: Path) -> list[str]:
        """JVM options that use the shared class-data archive, or record one at exit.

        Recording goes to a file in our own data dir (two clusters may stop at the same time);
        :meth:`_publish_class_data` moves it into place after a clean exit, in whichever
        process calls :meth:`stop`, which is why the destination is written down here.
        """
        archive = _class_data_archive(java, libs)
        dump, destination = self._class_data_files()
        dump.unlink(missing_ok=True)
        if archive.is_file():
            destination.unlink(missing_ok=True)
            return [f"-XX:SharedArchiveFile={archive}"]
        destination.write_text(f"{archive}\n", encoding="utf-8")
        return [f"-XX:ArchiveClassesAtExit={dump}"]

    def _publish_class_data(self, complete: bool) -> None:
        """Move an archive the JVM recorded at exit to its shared place (atomically)."""
        dump, destination = self._class_data_files()
        try:
            if complete and dump.is_file() and dump.stat().st_size and destination.is_file():
                archive = Path(destination.read_text(encoding="utf-8").strip())
                archive.parent.mkdir(parents=True, exist_ok=True)
                staging = archive.with_name(f".{archive.name}.{os.getpid()}")
                # Copy, then rename within the target directory: data dirs often live on
                # another file system (tmpfs) than ~/.cache, where a rename would fail.
                shutil.copyfile(dump, staging)
                os.replace(staging, archive)
        except OSError:
            pass  # only a start-up optimisation; the next clean stop tries again
        finally:
            dump.unlink(missing_ok=True)
            destination.unlink(missing_ok=True)

    def _class_data_files(self) -> tuple[Path, Path]:
        return self.data_dir / "classes.jsa.tmp", self.data_dir / "classes.jsa.destination"

    def _wait_ready(self, deadline: float, announce: Announce = _silent) -> None:
        """Poll until the broker answers metadata and validates a topic creation.

        Why topic creation: metadata answers as soon as the broker's listener is up, but topics
        can only be created once the controller is active and the broker has registered and
        been unfenced. ``validate_only`` runs the controller's full check without leaving a
        probe topic behind (pipelines that replicate by regex would otherwise see it).

        While a JVM that this object started waits, ``broker.log`` is watched for the
        controller refusing its registration as a duplicate (see
        :meth:`_unregister_stale_broker`).
        """
        admin: AdminClient | None = None
        last_problem = "no answer yet"
        log_offset = 0
        unregistered = False
        while True:
            if not unregistered and self._process is not None:
                log_offset, refused = _registration_refused(self.log_file, log_offset)
                if refused:
                    unregistered = True
                    self._unregister_stale_broker(deadline, announce)
            if self.pid is None:
                code = self._process.poll() if self._process is not None else None
                status = "" if code is None else f" with code {code}"
                raise self._start_failure(f"the broker process exited{status} during start-up")
            if admin is None and _accepts_connections(self.port):
                admin = build_admin(
                    {
                        "bootstrap.servers": self.bootstrap,
                        "reconnect.backoff.ms": "50",
                        "reconnect.backoff.max.ms": "200",
                        "log_level": "0",
                    }
                )
            if admin is not None:
                try:
                    metadata = admin.list_topics(timeout=1.0)
                    if metadata.brokers:
                        futures = admin.create_topics(
                            [NewTopic(_PROBE_TOPIC, 1, 1)],
                            validate_only=True,
                            request_timeout=2.0,
                        )
                        futures[_PROBE_TOPIC].result()
                        return
                    last_problem = "metadata lists no broker yet"
                except KafkaException as exc:
                    error = exc.args[0] if exc.args else exc
                    if getattr(error, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                        return  # someone created the probe topic for real: creation works
                    last_problem = str(error)
            if time.monotonic() >= deadline:
                raise self._start_failure(f"not ready in time (last problem: {last_problem})")
            time.sleep(0.1)

    def _unregister_stale_broker(self, deadline: float, announce: Announce) -> None:
        """Remove the registration that a killed broker left in the controller.

        Why this is safe: a KRaft controller that starts keeps each broker that was unfenced
        in its metadata for ``broker.session.timeout.ms`` (60 s here), and refuses a new
        incarnation of that node id until then. We get here only when our new JVM was refused
        as such a duplicate, i.e. it is not registered, so the only registration of its node id
        is the dead process's. ``kafka-cluster unregister`` (through the controller listener)
        removes it; the broker's next registration attempt, within two seconds, succeeds.
        Past half the session we leave it alone: the session expires soon by itself, and a
        late unregister could hit the new broker's registration.
        """
        started = self._started_at
        settings = _read_properties(self.server_properties)
        session_s = int(settings["broker.session.timeout.ms"]) / 1000
        if started is None or time.monotonic() - started > session_s / 2:
            return
        controller = self._controller_address()
        libs = ensure_kafka_installed()
        java = find_java()
        held = (
            f"{self.name}: the controller still held the registration of the broker that did "
            "not stop cleanly"
        )
        try:
            done = self._run_tool(
                java,
                libs,
                "org.apache.kafka.tools.ClusterTool",
                "unregister",
                "--bootstrap-controller",
                controller,
                "--id",
                settings["node.id"],
                timeout_s=max(min(deadline - time.monotonic(), 30.0), 1.0),
            )
        except subprocess.TimeoutExpired:
            failure = "unregistering it timed out"
        else:
            if done.returncode == 0:
                announce(f"{held}; removed it")
                return
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            failure = f"unregistering it failed ({last[0]})"
        announce(f"{held}; {failure}, waiting up to {session_s:g} s for it to expire")

    def _controller_address(self) -> str:
        """``host:port`` of the CONTROLLER listener written for the running JVM."""
        listeners = _read_properties(self.server_properties)["listeners"]
        for listener in listeners.split(","):
            label, _, address = listener.partition("://")
            if label.strip() == "CONTROLLER":
                return address.strip()
        raise LocalClusterError(f"no CONTROLLER listener in {self.server_properties}")

    def _start_failure(self, reason: str) -> LocalClusterError:
        return LocalClusterError(
            f"the {self.name} cluster on {self.bootstrap} did not start: {reason}. "
            f"{self.log_tail()}"
        )

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of ``broker.log``, indented under a heading: what to show
        when the broker failed to start or died."""
        tail = _tail(self.log_file, lines)
        shown = "\n".join(f"  {line}" for line in tail) if tail else "  (empty)"
        return f"Last lines of {self.log_file}:\n{shown}"


class ClusterPair(NamedTuple):
    """The two clusters of the demo and the tests; unpacks as ``source, target``."""

    source: LocalCluster
    target: LocalCluster

    def stop(self, timeout: float = 30.0) -> None:
        """Stop both clusters (see :func:`stop_clusters`)."""
        stop_clusters(self, timeout)


def start_pair(
    data_root: str | os.PathLike[str],
    source_port: int,
    target_port: int,
    timeout: float = 60.0,
    **cluster_options: Any,
) -> ClusterPair:
    """Start a ``source`` and a ``target`` cluster under ``data_root/{source,target}``.

    :param source_port: listener port of the source cluster (0 picks a free one).
    :param target_port: listener port of the target cluster (0 picks a free one).
    :param cluster_options: passed to both :class:`LocalCluster` constructors (``heap``,
        ``broker_overrides``, ``jvm_options``).
    :raises LocalClusterError: see :func:`start_clusters`.
    """
    root = Path(data_root)
    pair = ClusterPair(
        LocalCluster("source", source_port, root / "source", **cluster_options),
        LocalCluster("target", target_port, root / "target", **cluster_options),
    )
    start_clusters(pair, timeout)
    return pair


def start_clusters(
    clusters: Sequence[LocalCluster], timeout: float = 60.0, announce: Announce | None = None
) -> None:
    """Start several clusters concurrently and return once all are ready.

    Concurrent start roughly halves the wait for a pair. If any cluster fails, the ones this
    call started are stopped again before the first error is raised, so nothing half-started
    lingers; clusters that were already running are left alone. ``announce``: see
    :meth:`LocalCluster.start`.
    """
    ensure_kafka_installed()  # once, before the threads would queue on the install lock
    was_running = [cluster.is_running() for cluster in clusters]
    with ThreadPoolExecutor(max(len(clusters), 1)) as pool:
        futures = [pool.submit(cluster.start, timeout, announce) for cluster in clusters]
        errors = [future.exception() for future in futures]
    if any(errors):
        for cluster, running_before in zip(clusters, was_running, strict=True):
            if not running_before:
                cluster.stop()
        raise next(error for error in errors if error is not None)


def stop_clusters(clusters: Sequence[LocalCluster], timeout: float = 30.0) -> None:
    """Stop several clusters concurrently (each clean shutdown takes a moment).

    Every cluster gets its stop attempt even if another one fails; the first error is raised.
    """
    with ThreadPoolExecutor(max(len(clusters), 1)) as pool:
        errors = [f.exception() for f in [pool.submit(c.stop, timeout) for c in clusters]]
    if any(errors):
        raise next(error for error in errors if error is not None)


# -- process and file helpers -------------------------------------------------------------
def _class_data_archive(java: str, libs: Path) -> Path:
    """Where the class-data archive for this JVM build and these jars lives (may not exist).

    A JDK upgrade changes the build id and so starts a fresh archive instead of a rejected one.
    """
    return libs.parent / "class-data" / f"kafka-{java_build_id(java)}.jsa"


_WATCHDOG_SCRIPT = """
while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
if ! kill -0 "$1" 2>/dev/null; then kill -TERM "$2" 2>/dev/null; fi
"""


def _start_watchdog(owner_pid: int, broker_pid: int) -> subprocess.Popen[bytes]:
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


def _random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid).

    Like Kafka's ``Uuid.randomUuid`` we avoid ids starting with "-", which a command line
    would read as an option.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _min_heap(heap: str) -> str:
    """Initial heap: 256m, or the maximum heap if that is smaller (the JVM refuses Xms > Xmx)."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = heap.strip().lower()
    try:
        size = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    except (ValueError, IndexError) as exc:
        raise LocalClusterError(
            f"invalid heap size {heap!r}: expected e.g. '512m' or '1g'"
        ) from exc
    return heap if size < 256 << 20 else "256m"


def _accepts_connections(port: int) -> bool:
    """Cheap TCP probe, so the Kafka client is only created once something listens."""
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


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


def _read_properties(path: Path) -> dict[str, str]:
    """Parse the simple ``key=value`` files we write ourselves (no escapes, no continuations)."""
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith(("#", "!")):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def _meta_properties_problem(path: Path) -> str | None:
    """What is wrong with a log dir's ``meta.properties`` ("is missing", ...), or None."""
    try:
        props = _read_properties(path)
    except FileNotFoundError:
        return "is missing"
    except (OSError, ValueError) as exc:
        return f"cannot be read ({exc})"
    absent = [key for key in ("version", "cluster.id", "node.id") if not props.get(key)]
    return f"is incomplete (no {', '.join(absent)})" if absent else None


def _holds_data(log_dirs: Path) -> bool:
    """True if any non-empty file sits in a subdirectory of ``log_dirs``.

    A format writes only top-level files (``meta.properties``, ``bootstrap.checkpoint``); the
    metadata log and every topic partition live in subdirectories once a broker has run.
    """
    if not log_dirs.is_dir():
        return False
    for child in log_dirs.iterdir():
        if child.is_dir() and any(f.is_file() and f.stat().st_size for f in child.rglob("*")):
            return True
    return False


def _registration_refused(log_file: Path, offset: int) -> tuple[int, bool]:
    """Read ``broker.log`` from ``offset``: (the new offset, whether a registration was refused
    as a duplicate and no registration succeeded since). Only whole lines are consumed."""
    try:
        with log_file.open("rb") as log:
            log.seek(offset)
            chunk = log.read()
    except FileNotFoundError:
        return offset, False
    complete = chunk[: chunk.rfind(b"\n") + 1]
    text = complete.decode(errors="replace")
    refused = text.rfind(_DUPLICATE_REGISTRATION)
    return offset + len(complete), refused >= 0 and text.rfind(_REGISTERED) < refused


def _tail(path: Path, lines: int) -> list[str]:
    """Last ``lines`` lines of a (small) log file; empty if it does not exist."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return []
