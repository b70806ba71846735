"""When a broker that starts is ready, and getting it there after an unclean stop.

Ready means it serves metadata that lists *this* broker *and* accepts a topic creation:
metadata answers as soon as the listener is up, but topics can only be created once the
controller is active, and the broker is listed once it has registered and been unfenced (in a
cluster of several brokers, metadata lists the others long before). After a ``kill -9`` the controller still holds the dead broker's
registration and refuses the new one as a duplicate; :func:`unregister_stale_broker` removes it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from k2k.errors import LocalClusterError
from k2k.kafka.factory import build_admin
from k2k.local.launch import RunTool
from k2k.local.ports import HOST, accepts_connections
from k2k.local.process import BrokerProcess, NodeName
from k2k.local.settings import controller_addresses, read_properties

__all__ = ["unregister_stale_broker", "wait_ready"]

_PROBE_TOPIC = "__k2k_local_ready_probe"
_DUPLICATE_REGISTRATION = "because the controller returned error DUPLICATE_BROKER_REGISTRATION"
_REGISTERED = "Successfully registered broker"


def wait_ready(
    broker: BrokerProcess,
    port: int,
    node_id: int,
    log_file: Path,
    deadline: float,
    fail: Callable[[str], LocalClusterError],
    on_refused: Callable[[], None],
) -> None:
    """Poll until the broker on ``port`` lists itself (``node_id``) in its metadata and
    validates a topic creation.

    ``validate_only`` runs the controller's full check without leaving a probe topic behind
    (pipelines that replicate by regex would otherwise see it). While a JVM that ``broker``
    launched waits, ``log_file`` is watched for the controller refusing its registration as a
    duplicate; ``on_refused`` is then called once.

    :raises LocalClusterError: from ``fail``: the broker exited, or ``deadline`` passed.
    """
    probe = _ReadyProbe(port, node_id)
    log_offset = 0
    refused = False
    while True:
        if not refused and broker.launched:
            log_offset, refused = _registration_refused(log_file, log_offset)
            if refused:
                on_refused()
        if broker.pid is None:
            code = broker.exit_code()
            status = "" if code is None else f" with code {code}"
            raise fail(f"the broker process exited{status} during start-up")
        last_problem = probe.problem()
        if last_problem is None:
            return
        if time.monotonic() >= deadline:
            raise fail(f"not ready in time (last problem: {last_problem})")
        time.sleep(0.1)


class _ReadyProbe:
    """One admin client, created once something listens on the port."""

    def __init__(self, port: int, node_id: int) -> None:
        self._port = port
        self._node_id = node_id
        self._admin: AdminClient | None = None

    def problem(self) -> str | None:
        """What the broker lacks to be ready; None once it is."""
        if self._admin is None:
            if not accepts_connections(self._port):
                return "no answer yet"
            self._admin = build_admin(
                {
                    "bootstrap.servers": f"{HOST}:{self._port}",
                    "reconnect.backoff.ms": "50",
                    "reconnect.backoff.max.ms": "200",
                    "log_level": "0",
                }
            )
        try:
            if self._node_id not in self._admin.list_topics(timeout=1.0).brokers:
                return f"metadata does not list broker {self._node_id} yet"
            futures = self._admin.create_topics(
                [NewTopic(_PROBE_TOPIC, 1, 1)], validate_only=True, request_timeout=2.0
            )
            futures[_PROBE_TOPIC].result()
            return None
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            if getattr(error, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                return None  # someone created the probe topic for real: creation works
            return str(error)


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


def unregister_stale_broker(
    name: NodeName,
    server_properties: Path,
    started_at: float | None,
    tools: Callable[[], RunTool],
    deadline: float,
    announce: Callable[[str], None],
    unclean: bool = True,
) -> None:
    """Remove the registration that a killed (or just stopped) broker left in the controller.

    Why this is safe: a KRaft controller that starts keeps each broker that was unfenced
    in its metadata for ``broker.session.timeout.ms`` (60 s here), and refuses a new
    incarnation of that node id until then. We get here only when our new JVM (launched at
    ``started_at``) was refused as such a duplicate, i.e. it is not registered, so the only
    registration of its node id is the dead process's. ``kafka-cluster unregister`` (through
    the quorum's controller listeners) removes it; the broker's next registration attempt, within two
    seconds, succeeds. Past half the session we leave it alone: the session expires soon by
    itself, and a late unregister could hit the new broker's registration.

    A broker that shut down cleanly leaves its registration too, fenced, until its session
    expires: a broker of a larger cluster restarted at once (a rolling restart) meets the
    same refusal, and removing the registration brings it back a few seconds sooner. Its
    replicas stay assigned to it; they rejoin the ISRs once it has caught up.

    :param unclean: whether the previous JVM was killed (only said in the announcement).
    :param tools: gives what runs Kafka's tools, asked only when they are needed.
    """
    settings = read_properties(server_properties)
    session_s = int(settings["broker.session.timeout.ms"]) / 1000
    if started_at is None or time.monotonic() - started_at > session_s / 2:
        return
    controllers = controller_addresses(server_properties)
    tool = tools()
    previous = "the broker that did not stop cleanly" if unclean else "the broker's last run"
    held = f"{name.label}: the controller still held the registration of {previous}"
    try:
        done = tool(
            "org.apache.kafka.tools.ClusterTool",
            "unregister",
            "--bootstrap-controller",
            controllers,
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
