"""One KRaft node of an embedded cluster: one JVM on loopback, a broker and possibly a
controller too.

A node lives entirely in its ``data_dir``::

    server.properties   written on every start from the constructor's arguments
    log4j2.yaml         quiet logging (warnings, errors, "started")
    broker.log          the JVM's stdout and stderr (the previous run's is broker.log.1)
    broker.pid          pid of the running JVM; how `k2k local down/status` find it
    kraft/              log.dirs: metadata log and topic data (formatted on first start)

:class:`LocalNode` puts together the parts that live beside it: the settings it writes
(:mod:`~k2k.local.settings`), the JVM's command line (:mod:`~k2k.local.launch`), the process
(:mod:`~k2k.local.process`), the storage (:mod:`~k2k.local.storage`) and the wait until the
broker is ready (:mod:`~k2k.local.readiness`). A one-broker cluster is one node whose
``data_dir`` is the cluster's; :class:`~k2k.local.cluster.LocalCluster` holds the nodes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from k2k.errors import LocalClusterError
from k2k.local.install import ensure_kafka_installed, find_java
from k2k.local.launch import DEFAULT_JVM_OPTIONS, KafkaJvm, RunTool, publish_class_data
from k2k.local.ports import HOST, free_port, port_is_free
from k2k.local.process import LOG_TAIL_LINES, BrokerProcess, NodeName, tail
from k2k.local.readiness import unregister_stale_broker, wait_ready
from k2k.local.settings import Topology, single_node, write_config
from k2k.local.storage import check_storage, prepare_storage, stored_cluster_id

__all__ = ["Announce", "LocalNode"]

Announce = Callable[[str], None]
"""Where :meth:`LocalNode.start` reports what it recovered from (the CLI prints to stderr)."""


def _silent(_message: str) -> None:
    pass


class LocalNode:
    """One KRaft node listening on ``127.0.0.1:<port>``.

    :param name: the cluster's label, used in messages ("source", "target").
    :param port: the PLAINTEXT listener port; 0 picks a free one now.
    :param data_dir: where this node keeps everything (see the module docstring).
    :param controller_port: the KRaft controller listener of a one-node cluster; None picks a
        free port at each start. Ignored with a ``topology``, which names every voter's port.
    :param heap: JVM maximum heap (``-Xmx``), e.g. "512m" or "1g".
    :param broker_overrides: extra or replacement ``server.properties`` entries.
    :param jvm_options: GC/JIT options; defaults to :data:`DEFAULT_JVM_OPTIONS`.
    :param owner_pid: stop the broker when this process ends, even if it is killed without a
        chance to clean up (test sessions pass their own pid). None: the broker runs until
        :meth:`stop`, as ``k2k local up`` wants.
    :param topology: this node's place in a cluster of several brokers; None for the only
        node of a one-broker cluster.

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
        topology: Topology | None = None,
    ) -> None:
        self.name = NodeName(name, None if topology is None else topology.node_id)
        self.port = port or free_port()
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.controller_port = controller_port
        self.heap = heap
        self.broker_overrides = dict(broker_overrides or {})
        self.jvm_options = list(DEFAULT_JVM_OPTIONS if jvm_options is None else jvm_options)
        self.owner_pid = owner_pid
        self.topology = topology
        #: The id to format empty storage with (the other nodes'); None makes a new one.
        self.cluster_id: str | None = None
        self._broker = BrokerProcess(self.name, self.pid_file, self.server_properties)

    def __repr__(self) -> str:
        return f"LocalNode({self.name.label!r}, address={self.address!r})"

    # -- files ---------------------------------------------------------------------------
    @property
    def node_id(self) -> int:
        """This node's ``node.id`` (1 for the node of a one-broker cluster)."""
        return 1 if self.topology is None else self.topology.node_id

    @property
    def address(self) -> str:
        """This broker's ``host:port`` for clients: ``127.0.0.1:<port>``."""
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

    def stored_cluster_id(self) -> str | None:
        """The cluster id this node's storage was formatted with; None before the first start."""
        return stored_cluster_id(self.log_dirs)

    # -- state ---------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Pid of this node's running JVM, or None (no pid file, dead, or not ours)."""
        return self._broker.pid

    def is_running(self) -> bool:
        """Return True if this node's JVM is alive (it may still be starting up)."""
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
        """Rewrite a missing or stale ``broker.pid`` when this node's JVM still runs.

        Finds the JVM by its command line (``kafka.Kafka`` with our ``server.properties``,
        Linux ``/proc`` only), e.g. after ``broker.pid`` was deleted by hand. Returns the pid
        it wrote, or None when the pid file was right or no such JVM runs.
        """
        return self._broker.recover_pid_file()

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, timeout: float = 60.0, announce: Announce | None = None) -> None:
        """Start the node and return once it serves metadata listing itself and accepts
        topic creation.

        Formats the storage on the first start. Returns at once (after the same readiness
        check) if the node is already running.

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
                f"{self.name.label}: the previous broker (pid {stale}) did not stop cleanly; "
                "starting a new one on the same data"
            )
        if not port_is_free(self.port):
            raise LocalClusterError(
                f"cannot start the {self.name.noun}: port {self.port} on {HOST} is already "
                "in use by another process"
            )
        self._launch(deadline, announce)
        try:
            self._wait_ready(deadline, announce, unclean=stale is not None)
        except BaseException:
            self.stop(timeout=10)  # never leave a half-started JVM behind
            raise

    def _launch(self, deadline: float, announce: Announce) -> None:
        """Write this start's configuration, format the storage if it needs it, start the JVM."""
        libs = ensure_kafka_installed()
        jvm = self._jvm(find_java(), libs)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        topology = self.topology or single_node(self.port, self.controller_port)
        write_config(self.data_dir, self.port, topology, self.log_dirs, self.broker_overrides)
        prepare_storage(
            self.name,
            self.log_dirs,
            self.server_properties,
            jvm.run_tool,
            deadline,
            announce,
            self.cluster_id,
        )
        self._broker.launch(
            jvm.broker_command(self.server_properties), self.data_dir, self.log_file, self.owner_pid
        )

    def _ready_already(self, deadline: float, announce: Announce) -> bool:
        """Whether this node's broker runs already and became ready (``start`` is then
        done); False when none runs, or the one that ran exited while we waited."""
        self.wait_while_exiting()
        adopted = self.recover_pid_file()
        if adopted is not None:
            announce(f"{self.name.label}: running as pid {adopted} without a pid file; recorded it")
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
            announce(f"{self.name.label}: the broker (pid {running}) exited; starting it again")
            self.wait_while_exiting()
            return False

    def stop(self, timeout: float = 30.0, give_up: Callable[[], bool] | None = None) -> None:
        """Stop the JVM: SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds,
        or once ``give_up()`` says the clean shutdown cannot finish (see
        :meth:`LocalCluster.stop <k2k.local.cluster.LocalCluster.stop>`).

        Does nothing if the node is not running; a stale pid file is removed either way.
        After a clean shutdown, the class data the JVM recorded becomes the shared archive.

        :raises LocalClusterError: the process survived SIGKILL (should not happen).
        """
        publish_class_data(self.data_dir, complete=self._broker.stop(timeout, give_up))

    def check_storage(self) -> None:
        """Refuse storage that holds data but has no valid ``meta.properties``.

        Storage without a valid ``meta.properties`` is formatted again by :meth:`start` only
        when it holds no data (see :mod:`k2k.local.storage`). Cheap (no JVM): ``k2k local up``
        checks every node before starting any.

        :raises LocalClusterError: one line naming the file and the two ways out.
        """
        check_storage(self.name, self.log_dirs)

    # -- helpers -------------------------------------------------------------------------
    def _jvm(self, java: str, libs: Path) -> KafkaJvm:
        return KafkaJvm(java, libs, self.heap, tuple(self.jvm_options), self.data_dir)

    def _wait_ready(
        self, deadline: float, announce: Announce = _silent, unclean: bool = True
    ) -> None:
        """Poll until the broker is ready (see :func:`~k2k.local.readiness.wait_ready`);
        ``unclean``: the JVM before it was killed (a pid file was left)."""

        def tools() -> RunTool:
            libs = ensure_kafka_installed()
            return self._jvm(find_java(), libs).run_tool

        def unregister() -> None:
            started = self._broker.started_at
            unregister_stale_broker(
                self.name, self.server_properties, started, tools, deadline, announce, unclean
            )

        wait_ready(
            self._broker,
            self.port,
            self.node_id,
            self.log_file,
            deadline,
            self._start_failure,
            unregister,
        )

    def _start_failure(self, reason: str) -> LocalClusterError:
        return LocalClusterError(
            f"the {self.name.noun} on {self.address} did not start: {reason}. {self.log_tail()}"
        )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of ``broker.log``, indented under a heading: what to show
        when the broker failed to start or died."""
        lines_seen = tail(self.log_file, lines)
        shown = "\n".join(f"  {line}" for line in lines_seen) if lines_seen else "  (empty)"
        return f"Last lines of {self.log_file}:\n{shown}"
