"""``k2k local up | down | status``: a source and a target Kafka cluster on this machine.

For the demo and for running the tests against long-lived brokers (``k2k local up`` prints the
``K2K_SOURCE_BOOTSTRAP``/``K2K_TARGET_BOOTSTRAP`` values the test fixtures accept). The main CLI
registers this group with ``main.add_command(local)``. Like every k2k command, a deliberate
failure (:class:`~k2k.errors.K2KError`) prints one line, ``error: ...``, and exits 1 without a
traceback unless ``--debug`` is given; the boundary is applied here because the main CLI's is
per command.

State lives in the data directory only (``<data-dir>/source`` and ``<data-dir>/target``, each
with its ``server.properties`` and ``broker.pid``, or one ``broker-<id>`` directory of them per
broker with ``--brokers N``), so ``down`` and ``status`` work from any later shell and never
touch brokers that ``up`` did not start.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.errors import LocalClusterError
from k2k.local.cluster import LocalCluster, start_clusters, stop_nodes
from k2k.local.install import KAFKA_VERSION, ensure_kafka_installed, k2k_home
from k2k.local.node import LocalNode
from k2k.local.ports import port_is_free

__all__ = ["default_data_dir", "local"]

CLUSTER_NAMES = ("source", "target")


def _announce(message: str) -> None:
    click.echo(message, err=True)


def _find_cluster(name: str, root: Path) -> LocalCluster | None:
    """The cluster that last ran in ``root/name``: a broker that is still exiting (killed a
    moment ago) has exited, and its pid file is repaired if the JVM runs without one (see
    :meth:`LocalNode.wait_while_exiting`, :meth:`LocalNode.recover_pid_file`)."""
    cluster = LocalCluster.from_data_dir(name, root / name)
    for node in cluster.nodes if cluster is not None else ():
        node.wait_while_exiting()
        adopted = node.recover_pid_file()
        if adopted is not None:
            _announce(
                f"{node.name.label}: running as pid {adopted} without a pid file; recorded it"
            )
    return cluster


def default_data_dir() -> Path:
    """``${K2K_HOME:-~/.cache/k2k}/local``, resolved when a command runs (not at import)."""
    return k2k_home() / "local"


_data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=(
        "Directory holding both clusters (data, logs, pid files). "
        "[default: ${K2K_HOME:-~/.cache/k2k}/local]"
    ),
)


@click.group("local")
def local() -> None:
    """Run two embedded Apache Kafka clusters (source and target) on 127.0.0.1.

    Real KRaft brokers for the demo and the tests, one per cluster unless `up --brokers N`
    says otherwise; the jars come from Maven Central on first use. Needs Java 17+ and Maven.
    """


@local.command("up", short_help="Start both clusters (installs Kafka once).")
@click.option(
    "--source-port",
    type=click.IntRange(1, 65535),
    default=19092,
    show_default=True,
    help="Port of the source cluster's listener on 127.0.0.1 (its first broker's; the others "
    "listen on the ports after it).",
)
@click.option(
    "--target-port",
    type=click.IntRange(1, 65535),
    default=29092,
    show_default=True,
    help="Port of the target cluster's listener on 127.0.0.1 (its first broker's; the others "
    "listen on the ports after it).",
)
@click.option(
    "--brokers",
    type=click.IntRange(1, 9),
    default=None,
    help="Brokers per cluster. From 3 up, brokers 1-3 are also the controller quorum (any one "
    "may restart) and internal topics have 3 replicas, 2 in sync; with 2, broker 1 is the "
    "only controller. [default: as many as the clusters in --data-dir have, else 1]",
)
@_data_dir_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=90.0,
    show_default=True,
    help="Seconds to wait for the clusters to accept requests (not counting the download).",
)
@one_line_errors
def up(
    source_port: int, target_port: int, brokers: int | None, data_dir: Path | None, timeout: float
) -> None:
    """Start the source and target clusters; return once every broker accepts requests.

    Installs Apache Kafka on first use. Brokers that are already running are left as they
    are, and the ones of a running cluster that are down are started. Data is kept between
    `down` and `up`.

    After an unclean stop (a killed broker, a crash) `up` recovers by itself: a stale pid file
    is replaced, the killed broker's registration is removed from the controller, and storage
    whose format was interrupted is formatted again. Storage that holds data but lost its
    meta.properties is refused with what to do. Each recovery is reported on stderr.
    """
    root = data_dir or default_data_dir()
    wanted = {"source": (source_port, "--source-port"), "target": (target_port, "--target-port")}
    found = {name: _find_cluster(name, root) for name in wanted}
    count = brokers or max((len(c.nodes) for c in found.values() if c is not None), default=1)
    _check_port_ranges(source_port, target_port, count)
    # Step 1. Decide per cluster, before starting anything, so a taken port fails fast.
    clusters: list[LocalCluster] = []
    for name, (port, flag) in wanted.items():
        existing = found[name]
        if existing is not None and existing.running_nodes():
            _note_differences(existing, port, flag, count)
            clusters.append(existing)
            continue
        _check_layout(existing, count)
        _check_ports_free(port, count, flag)
        cluster = LocalCluster(name, port, root / name, brokers=count)
        cluster.check_storage()
        clusters.append(cluster)

    # Step 2. Install (one time), then start or wait for both together.
    ensure_kafka_installed(announce=_announce)
    pids_before = {node.data_dir: node.pid for cluster in clusters for node in cluster.nodes}
    start_clusters(clusters, timeout, announce=_announce)

    fresh = True  # every broker started now: say where the data is and how to stop
    for cluster in clusters:
        for node in cluster.nodes:
            # A broker that was running may have died meanwhile and been started again.
            kept = pids_before[node.data_dir] == node.pid
            fresh = fresh and not kept
            state = "already running" if kept else "started"
            click.echo(f"{node.name.label}  {node.address}  {state} (pid {node.pid})")
    if fresh:
        click.echo(
            f"Apache Kafka {KAFKA_VERSION}, data in {root}; stop with `k2k local down`.", err=True
        )
    for cluster in clusters:
        if len(cluster.nodes) > 1:
            click.echo(f"{cluster.name} bootstrap.servers: {cluster.bootstrap}", err=True)


def _check_port_ranges(source_port: int, target_port: int, brokers: int) -> None:
    """The two clusters' listener ports (``brokers`` from each flag's port on) must not meet."""
    if source_port == target_port:
        raise LocalClusterError(
            f"--source-port and --target-port must differ (both are {source_port})"
        )
    if abs(source_port - target_port) < brokers:
        raise LocalClusterError(
            f"--source-port {source_port} and --target-port {target_port} are closer than "
            f"--brokers {brokers}: each cluster takes {brokers} ports from its own on; "
            f"choose ports at least {brokers} apart"
        )
    last = max(source_port, target_port) + brokers - 1
    if last > 65535:
        raise LocalClusterError(f"with --brokers {brokers} the ports would go up to {last}")


def _note_differences(existing: LocalCluster, port: int, flag: str, brokers: int) -> None:
    """Say on stderr where a running cluster differs from what this `up` asked for."""
    name = existing.name
    if existing.port != port:
        click.echo(
            f"{name}: already running on port {existing.port}, not the requested "
            f"{flag} {port}; run `k2k local down` first to move it",
            err=True,
        )
    if len(existing.nodes) != brokers:
        click.echo(
            f"{name}: already running with {_count(len(existing.nodes))}, not the requested "
            f"--brokers {brokers}; run `k2k local down --delete-data` first to change it",
            err=True,
        )


def _check_layout(existing: LocalCluster | None, brokers: int) -> None:
    """A stopped cluster restarts with the brokers it had: a new count is a new cluster."""
    if existing is None or len(existing.nodes) == brokers:
        return
    raise LocalClusterError(
        f"the {existing.name} cluster in {existing.data_dir} has {_count(len(existing.nodes))}, "
        f"not the requested --brokers {brokers}; run `k2k local up --brokers "
        f"{len(existing.nodes)}`, or `k2k local down --delete-data` to start both clusters "
        "empty with the new count"
    )


def _check_ports_free(port: int, brokers: int, flag: str) -> None:
    for taken in (p for p in range(port, port + brokers) if not port_is_free(p)):
        others = f" (its brokers use {port}-{port + brokers - 1})" if brokers > 1 else ""
        raise LocalClusterError(
            f"port {taken} on 127.0.0.1 is already in use by another process; "
            f"choose a free port with {flag}{others}"
        )


def _count(brokers: int) -> str:
    return "1 broker" if brokers == 1 else f"{brokers} brokers"


@local.command("down", short_help="Stop the clusters that `up` started.")
@_data_dir_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for a clean shutdown before killing a broker.",
)
@click.option(
    "--delete-data",
    is_flag=True,
    help="Also delete the clusters' data directories (topics, offsets, logs).",
)
@one_line_errors
def down(data_dir: Path | None, timeout: float, delete_data: bool) -> None:
    """Stop every broker that `k2k local up` started in the data directory.

    Brokers are found through their pid files and only stopped after checking that the
    process really is that cluster's Kafka JVM. Other Kafka processes are never touched.
    """
    root = data_dir or default_data_dir()
    running: list[tuple[LocalNode, int]] = []
    for name in CLUSTER_NAMES:
        cluster = _find_cluster(name, root)
        if cluster is None:
            click.echo(f"{name}: not running")
            continue
        for node in cluster.nodes:
            pid = node.pid
            if pid is not None:
                running.append((node, pid))
                continue
            stale = node.pid_file.exists()
            node.stop()  # not running: this only removes a stale pid file
            note = " (removed a stale pid file; that process was not this broker)" if stale else ""
            click.echo(f"{node.name.label}: not running{note}")

    stop_nodes([node for node, _ in running], timeout)
    for node, pid in running:
        click.echo(f"{node.name.label}: stopped (pid {pid})")
    if delete_data:
        for name in CLUSTER_NAMES:
            if (root / name).is_dir():
                shutil.rmtree(root / name)
                click.echo(f"{name}: deleted {root / name}")


@local.command("status", short_help="Show state, address and pid of each broker.")
@_data_dir_option
@one_line_errors
def status(data_dir: Path | None) -> None:
    """Show whether each broker of each cluster runs, with its address, pid and data
    directory."""
    root = data_dir or default_data_dir()
    rows = [("CLUSTER", "BROKER", "STATE", "ADDRESS", "PID", "DATA DIR")]
    for name in CLUSTER_NAMES:
        cluster = _find_cluster(name, root)
        if cluster is None:
            rows.append((name, "-", "stopped", "-", "-", str(root / name)))
            continue
        for node in cluster.nodes:
            pid = node.pid
            state = "running" if pid is not None else "stopped"
            pid_text = str(pid) if pid is not None else "-"
            row = (name, str(node.node_id), state, node.address, pid_text, str(node.data_dir))
            rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[-1]]))
