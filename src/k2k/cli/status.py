"""``k2k status``: a read-only look at a pipeline's members, owners, positions and lag, as a
table, as JSON, or (``--serve``) as the live status page."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.cli.options import AS_JSON, FILES, echo_report

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

__all__ = ["DEFAULT_LISTEN", "status"]

#: ``--serve``'s address: beside the 9464 of a ``k2k start -t`` on the same host, not on it.
DEFAULT_LISTEN = "127.0.0.1:9465"


@click.command()
@FILES
@AS_JSON
@click.option(
    "--serve",
    is_flag=True,
    help="Serve the status page (/, /api/status, /readyz) from the control topics until "
    "Ctrl-C: for a stopped or remote pipeline. Still writes nothing to either cluster.",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    default=DEFAULT_LISTEN,
    show_default=True,
    help="With --serve: where the page listens ([::1]:PORT for IPv6).",
)
@one_line_errors
def status(files: Sequence[str], as_json: bool, serve: bool, listen: str) -> None:
    """Show the pipeline's members, partition owners, committed positions and lag.

    Works whether or not the pipeline runs, and never writes to either cluster. The JSON
    fields are described in docs/operations.md.
    """
    from k2k.admin.status import read_status
    from k2k.config import load_pipeline
    from k2k.observability.http.server import parse_listen

    if serve:
        host, port = parse_listen(listen)
        _serve(load_pipeline(list(files)), host, port)
        return
    echo_report(read_status(load_pipeline(list(files))), as_json)


def _serve(cfg: PipelineConfig, host: str, port: int) -> None:
    """Serve the page until SIGINT or SIGTERM; the status is read only while it is viewed."""
    from k2k.admin.status import read_status
    from k2k.cli.signals import on_stop_signals, stop_then_exit
    from k2k.errors import K2KError
    from k2k.observability.http.feed import StatusFeed
    from k2k.observability.http.server import StatusServer

    feed = StatusFeed(
        lambda: read_status(cfg).to_json(), source="control-topics", pipeline=cfg.name
    )
    try:
        server = StatusServer(host, port, metrics_app=None, health=feed.health, status=feed)
    except OSError as exc:
        raise K2KError(
            f"status: cannot serve on {host}:{port}: {exc.strerror or exc}; choose another "
            "address with --listen HOST:PORT"
        ) from None
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"serving the status page of pipeline {cfg.name} on "
        f"http://{shown}:{server.address[1]}/ (Ctrl-C to stop)",
        err=True,
    )
    stop = threading.Event()
    try:
        with on_stop_signals(stop_then_exit(stop.set)):
            while not stop.wait(3600):
                pass
    finally:
        feed.close()
        server.close()
