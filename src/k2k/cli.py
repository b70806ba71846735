"""The ``k2k`` command line, and the error boundary of the whole program.

Every deliberate failure is a :class:`k2k.errors.K2KError`: it is printed as one line
(``error: ...``; configuration problems one line each) with a non-zero exit and no
traceback, unless ``--debug`` asks for one.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import threading
from collections.abc import Sequence

import click

from k2k import __version__
from k2k.errorboundary import one_line_errors

__all__ = ["main"]


_FILES = click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help="Pipeline YAML file (K2K layout). Repeat to deep-merge several files in order.",
)


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("k2k").setLevel(logging.INFO)
    logging.getLogger("py4j").setLevel(logging.ERROR)


_INSTANCE_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="k2k")
def main() -> None:
    """k2k replicates Kafka topics from a source cluster to a target cluster on Spark."""


@main.command()
@_FILES
@click.option(
    "--until-caught-up",
    is_flag=True,
    help="Exit 0 once every selected source partition is replicated up to the end offsets "
    "seen at start (migrations, scripts, tests). Without it, run until SIGINT/SIGTERM.",
)
@click.option(
    "--instance",
    metavar="NAME",
    envvar="K2K_INSTANCE",
    help="This process's member name in the assignment topic (default: host-pid, unique per "
    "process). A restart under the same name takes its partitions back at once instead of "
    "after coordination.assignment.graceWindow; never give two running processes one name.",
)
@click.option(
    "--standby",
    is_flag=True,
    help="Take no partitions while another (non-standby) instance of the pipeline is alive; "
    "take them all over when none is (active/standby pairs).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log planner decisions (INFO level).")
@one_line_errors
def start(
    files: Sequence[str],
    until_caught_up: bool,
    instance: str | None,
    standby: bool,
    verbose: bool,
) -> None:
    """Run the replication pipeline described by the YAML file(s).

    Stops cleanly on SIGINT/SIGTERM: runners commit what the target has acknowledged,
    release their partitions, and the process exits 0. A second signal exits at once
    (uncommitted work is replayed on the next start; with exactly-once it is aborted, so
    nothing is duplicated). Several processes of one pipeline share its partitions.
    """
    from k2k.config import load_pipeline
    from k2k.observability.display import final_summary, make_display
    from k2k.pipeline.planner import Planner

    _setup_logging(verbose)
    cfg = load_pipeline(list(files))
    display = make_display(cfg.name, tty=sys.stderr.isatty())
    signals_seen: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signals_seen.append(signum)
        if len(signals_seen) > 1:
            click.echo("error: second signal, exiting without waiting", err=True)
            sys.exit(130)
        # From another thread: Event.set() takes a lock the interrupted main thread may hold.
        threading.Thread(target=planner.request_stop, daemon=True).start()

    def install_handlers() -> None:
        # Again after Spark starts: PySpark's SparkContext installs its own SIGINT handler
        # (KeyboardInterrupt), which would abort instead of stopping cleanly.
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, on_signal)

    if instance is not None and not _INSTANCE_NAME.fullmatch(instance):
        raise click.BadParameter(
            f"{instance!r} is not usable in transactional ids; expected letters, digits, "
            "'.', '_' and '-' (at most 100)",
            param_hint="'--instance'",
        )
    planner = Planner(
        cfg,
        until_caught_up=until_caught_up,
        on_tick=display,
        after_spark_start=install_handlers,
        member=instance,
        standby=standby,
    )
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    install_handlers()
    try:
        stats = planner.run()
    finally:
        display.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo(final_summary(cfg.name, stats), err=True)


@main.command()
@_FILES
@one_line_errors
def validate(files: Sequence[str]) -> None:
    """Load, merge and validate the pipeline; print the effective configuration.

    Secrets are masked. Exit 0 when valid; otherwise print every problem, one per line,
    and exit 2.
    """
    from k2k.config import load_pipeline, render_effective

    cfg = load_pipeline(list(files))
    click.echo(render_effective(cfg), nl=False)


@main.group("offset-mapping")
def offset_mapping() -> None:
    """The Offset Mapping app: translates source consumer-group offsets to the target."""


@offset_mapping.command("start")
@_FILES
@click.option(
    "--once",
    is_flag=True,
    help="Do one full pass (read mappings, translate, commit) and exit 0 (scripts, "
    "cut-overs, tests). Without it, pass every groups.pollInterval until SIGINT/SIGTERM.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every pass (INFO level).")
@one_line_errors
def offset_mapping_start(files: Sequence[str], once: bool, verbose: bool) -> None:
    """Keep the target's consumer groups at the translated positions of the source's.

    Reads the app's configuration (K2K's Offset Mapping layout); a replicator pipeline file
    plus an overlay of the app's keys works too (-f pipeline.yaml -f offset-mapping.yaml),
    replicator-only keys are ignored. Never writes to the source cluster.
    """
    from k2k.config import load_offset_mapping_app
    from k2k.offsetmapping.app import OffsetMappingApp

    _setup_logging(verbose)
    cfg = load_offset_mapping_app(list(files))
    app = OffsetMappingApp(cfg)

    def on_signal(signum: int, _frame: object) -> None:
        app.request_stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        report = app.run(once=once)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo(f"offset-mapping {cfg.name}: {report.line()}", err=True)


@offset_mapping.command("validate")
@_FILES
@one_line_errors
def offset_mapping_validate(files: Sequence[str]) -> None:
    """Load, merge and validate the app's configuration; print the effective one."""
    from k2k.config import load_offset_mapping_app, render_effective

    click.echo(render_effective(load_offset_mapping_app(list(files))), nl=False)


def _register_local() -> None:
    from k2k.local.cli import local

    main.add_command(local)


_register_local()

if __name__ == "__main__":  # pragma: no cover
    main()
