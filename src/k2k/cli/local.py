"""``k2k local up | down | status``: a source and a target Kafka cluster on this machine.

For the demo and for running the tests against long-lived brokers (``k2k local up`` prints the
``K2K_SOURCE_BOOTSTRAP``/``K2K_TARGET_BOOTSTRAP`` values the test fixtures accept). The main CLI
registers this group with ``main.add_command(local)``. Like every k2k command, a deliberate
failure (:class:`~k2k.errors.K2KError`) prints one line, ``error: ...``, and exits 1 without a
traceback unless ``--debug`` is given; the boundary is applied here because the main CLI's is
per command.

State lives in the data directory only (``<data-dir>/source`` and ``<data-dir>/target``, each
with its ``server.properties`` and ``broker.pid``), so ``down`` and ``status`` work from any
later shell and never touch brokers that ``up`` did not start.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.errors import LocalClusterError
from k2k.local.cluster import LocalCluster, start_clusters, stop_clusters
from k2k.local.install import KAFKA_VERSION, ensure_kafka_installed, k2k_home
from k2k.local.ports import port_is_free

__all__ = ["default_data_dir", "local"]

CLUSTER_NAMES = ("source", "target")


def _announce(message: str) -> None:
    click.echo(message, err=True)


def _find_cluster(name: str, root: Path) -> LocalCluster | None:
    """The cluster that last ran in ``root/name``: a broker that is still exiting (killed a
    moment ago) has exited, and its pid file is repaired if the JVM runs without one (see
    :meth:`LocalCluster.wait_while_exiting`, :meth:`LocalCluster.recover_pid_file`)."""
    cluster = LocalCluster.from_data_dir(name, root / name)
    if cluster is not None:
        cluster.wait_while_exiting()
        adopted = cluster.recover_pid_file()
        if adopted is not None:
            _announce(f"{name}: running as pid {adopted} without a pid file; recorded it")
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

    Real single-node KRaft brokers for the demo and the tests; the jars come from Maven
    Central on first use. Needs Java 17+ and Maven.
    """


@local.command("up", short_help="Start both clusters (installs Kafka once).")
@click.option(
    "--source-port",
    type=click.IntRange(1, 65535),
    default=19092,
    show_default=True,
    help="Port of the source cluster's listener on 127.0.0.1.",
)
@click.option(
    "--target-port",
    type=click.IntRange(1, 65535),
    default=29092,
    show_default=True,
    help="Port of the target cluster's listener on 127.0.0.1.",
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
def up(source_port: int, target_port: int, data_dir: Path | None, timeout: float) -> None:
    """Start the source and target clusters; return once both accept requests.

    Installs Apache Kafka on first use. Clusters that are already running are left as they
    are. Data is kept between `down` and `up`.

    After an unclean stop (a killed broker, a crash) `up` recovers by itself: a stale pid file
    is replaced, the killed broker's registration is removed from the controller, and storage
    whose format was interrupted is formatted again. Storage that holds data but lost its
    meta.properties is refused with what to do. Each recovery is reported on stderr.
    """
    root = data_dir or default_data_dir()
    if source_port == target_port:
        raise LocalClusterError(
            f"--source-port and --target-port must differ (both are {source_port})"
        )
    clusters: list[LocalCluster] = []
    already_running: set[str] = set()
    # Step 1. Decide per cluster, before starting anything, so a taken port fails fast.
    for name, port, flag in (
        ("source", source_port, "--source-port"),
        ("target", target_port, "--target-port"),
    ):
        existing = _find_cluster(name, root)
        if existing is not None and existing.is_running():
            if existing.port != port:
                click.echo(
                    f"{name}: already running on port {existing.port}, not the requested "
                    f"{flag} {port}; run `k2k local down` first to move it",
                    err=True,
                )
            clusters.append(existing)
            already_running.add(name)
        elif not port_is_free(port):
            raise LocalClusterError(
                f"port {port} on 127.0.0.1 is already in use by another process; "
                f"choose a free port with {flag}"
            )
        else:
            cluster = LocalCluster(name, port, root / name)
            cluster.check_storage()
            clusters.append(cluster)

    # Step 2. Install (one time), then start or wait for both together.
    ensure_kafka_installed(announce=lambda message: click.echo(message, err=True))
    pids_before = {cluster.name: cluster.pid for cluster in clusters}
    start_clusters(clusters, timeout, announce=_announce)

    states = []
    for cluster in clusters:
        # A broker that was running may have died meanwhile and been started again.
        kept = cluster.name in already_running and pids_before[cluster.name] == cluster.pid
        states.append("already running" if kept else "started")
        click.echo(f"{cluster.name}  {cluster.bootstrap}  {states[-1]} (pid {cluster.pid})")
    if "already running" not in states:
        click.echo(
            f"Apache Kafka {KAFKA_VERSION}, data in {root}; stop with `k2k local down`.", err=True
        )


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
    """Stop the clusters that `k2k local up` started in the data directory.

    Brokers are found through their pid files and only stopped after checking that the
    process really is that cluster's Kafka JVM. Other Kafka processes are never touched.
    """
    root = data_dir or default_data_dir()
    running: list[tuple[LocalCluster, int]] = []
    for name in CLUSTER_NAMES:
        cluster = _find_cluster(name, root)
        pid = cluster.pid if cluster is not None else None
        if cluster is not None and pid is not None:
            running.append((cluster, pid))
            continue
        stale = cluster is not None and cluster.pid_file.exists()
        if cluster is not None:
            cluster.stop()  # not running: this only removes a stale pid file
        note = " (removed a stale pid file; that process was not this broker)" if stale else ""
        click.echo(f"{name}: not running{note}")

    stop_clusters([cluster for cluster, _ in running], timeout)
    for cluster, pid in running:
        click.echo(f"{cluster.name}: stopped (pid {pid})")
    if delete_data:
        for name in CLUSTER_NAMES:
            if (root / name).is_dir():
                shutil.rmtree(root / name)
                click.echo(f"{name}: deleted {root / name}")


@local.command("status", short_help="Show state, address and pid of each cluster.")
@_data_dir_option
@one_line_errors
def status(data_dir: Path | None) -> None:
    """Show whether each cluster runs, with its bootstrap address, pid and data directory."""
    root = data_dir or default_data_dir()
    rows = [("CLUSTER", "STATE", "BOOTSTRAP", "PID", "DATA DIR")]
    for name in CLUSTER_NAMES:
        cluster = _find_cluster(name, root)
        pid = cluster.pid if cluster is not None else None
        rows.append(
            (
                name,
                "running" if pid is not None else "stopped",
                cluster.bootstrap if cluster is not None else "-",
                str(pid) if pid is not None else "-",
                str(root / name),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[-1]]))
