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

:class:`LocalCluster` puts together the parts that live beside it: the settings it writes
(:mod:`~k2k.local.settings`), the JVM's command line (:mod:`~k2k.local.launch`), the process
(:mod:`~k2k.local.process`), the storage (:mod:`~k2k.local.storage`) and the wait until the
broker is ready (:mod:`~k2k.local.readiness`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from k2k.errors import LocalClusterError
from k2k.local.install import ensure_kafka_installed, find_java
from k2k.local.launch import DEFAULT_JVM_OPTIONS, KafkaJvm, RunTool, publish_class_data
from k2k.local.ports import HOST, free_port, port_is_free
from k2k.local.process import LOG_TAIL_LINES, BrokerProcess, tail
from k2k.local.readiness import unregister_stale_broker, wait_ready
from k2k.local.settings import listener_ports, read_properties, write_config
from k2k.local.storage import check_storage, prepare_storage

__all__ = ["ClusterPair", "LocalCluster", "start_clusters", "start_pair", "stop_clusters"]

Announce = Callable[[str], None]
"""Where :meth:`LocalCluster.start` reports what it recovered from (the CLI prints to stderr)."""


def _silent(_message: str) -> None:
    pass


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

    The JVM runs in its own session, so it outlives the process that started it (the ``k2k
    local up`` command). Start-up maps the broker's class-data archive once one exists (see
    :mod:`k2k.local.launch`).
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
        self._broker = BrokerProcess(name, self.pid_file, self.server_properties)

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
            ports = listener_ports(read_properties(path))
        except FileNotFoundError:
            return None
        if "PLAINTEXT" not in ports:
            return None
        return cls(name, ports["PLAINTEXT"], path.parent, controller_port=ports.get("CONTROLLER"))

    # -- state ---------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Pid of this cluster's running JVM, or None (no pid file, dead, or not ours)."""
        return self._broker.pid

    def is_running(self) -> bool:
        """Return True if this cluster's JVM is alive (it may still be starting up)."""
        return self.pid is not None

    def wait_while_exiting(self, timeout: float = 30.0) -> None:
        """Wait while the process named in ``broker.pid`` is exiting (at most ``timeout`` s).

        A JVM killed a moment ago does not exit at once: for a while it no longer looks like
        our broker (its command line is gone) but still holds the listener port. ``k2k local
        up`` right after a ``kill -9`` must wait for that instead of reporting the port as
        taken by another program.
        """
        self._broker.wait_while_exiting(timeout)

    def recover_pid_file(self) -> int | None:
        """Rewrite a missing or stale ``broker.pid`` when this cluster's JVM still runs.

        Finds the JVM by its command line (``kafka.Kafka`` with our ``server.properties``,
        Linux ``/proc`` only), e.g. after ``broker.pid`` was deleted by hand. Returns the pid
        it wrote, or None when the pid file was right or no such JVM runs.
        """
        return self._broker.recover_pid_file()

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
          ``broker.session.timeout.ms`` and refuses the new one; the wait for readiness
          removes that stale registration (see :func:`~k2k.local.readiness.unregister_stale_broker`).

        :param announce: called with one line for each such recovery.
        :raises LocalClusterError: the port is taken, Java or the jars are missing, the storage
            is damaged, or the broker did not become ready within ``timeout`` seconds (the
            message quotes the last lines of ``broker.log``).
        """
        deadline = time.monotonic() + timeout
        announce = announce or _silent
        if self._ready_already(deadline, announce):
            return
        stale = self._broker.recorded_pid()
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
        jvm = self._jvm(find_java(), libs)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_config(
            self.data_dir, self.port, self.controller_port, self.log_dirs, self.broker_overrides
        )
        prepare_storage(
            self.name, self.log_dirs, self.server_properties, jvm.run_tool, deadline, announce
        )
        self._broker.launch(
            jvm.broker_command(self.server_properties), self.data_dir, self.log_file, self.owner_pid
        )
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

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the JVM: SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds.

        Does nothing if the cluster is not running; a stale pid file is removed either way.
        After a clean shutdown, the class data the JVM recorded becomes the shared archive.

        :raises LocalClusterError: the process survived SIGKILL (should not happen).
        """
        publish_class_data(self.data_dir, complete=self._broker.stop(timeout))

    def check_storage(self) -> None:
        """Refuse storage that holds data but has no valid ``meta.properties``.

        Storage without a valid ``meta.properties`` is formatted again by :meth:`start` only
        when it holds no data (see :mod:`k2k.local.storage`). Cheap (no JVM): ``k2k local up``
        checks both clusters before starting either.

        :raises LocalClusterError: one line naming the file and the two ways out.
        """
        check_storage(self.name, self.log_dirs)

    # -- helpers -------------------------------------------------------------------------
    def _jvm(self, java: str, libs: Path) -> KafkaJvm:
        return KafkaJvm(java, libs, self.heap, tuple(self.jvm_options), self.data_dir)

    def _wait_ready(self, deadline: float, announce: Announce = _silent) -> None:
        """Poll until the broker is ready (see :func:`~k2k.local.readiness.wait_ready`)."""

        def tools() -> RunTool:
            libs = ensure_kafka_installed()
            return self._jvm(find_java(), libs).run_tool

        def unregister() -> None:
            started = self._broker.started_at
            unregister_stale_broker(
                self.name, self.server_properties, started, tools, deadline, announce
            )

        wait_ready(
            self._broker, self.port, self.log_file, deadline, self._start_failure, unregister
        )

    def _start_failure(self, reason: str) -> LocalClusterError:
        return LocalClusterError(
            f"the {self.name} cluster on {self.bootstrap} did not start: {reason}. "
            f"{self.log_tail()}"
        )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of ``broker.log``, indented under a heading: what to show
        when the broker failed to start or died."""
        lines_seen = tail(self.log_file, lines)
        shown = "\n".join(f"  {line}" for line in lines_seen) if lines_seen else "  (empty)"
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
