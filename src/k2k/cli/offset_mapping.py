"""``k2k offset-mapping start | validate``: the Offset Mapping app, which keeps the target's
consumer groups at the translated positions of the source's."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import click

from k2k.cli.cutover import offset_mapping_report
from k2k.cli.errorboundary import one_line_errors
from k2k.cli.logsetup import setup_logging
from k2k.cli.notices import echo_inert, log_inert
from k2k.cli.options import (
    CLUSTERS,
    FILES,
    FILES_OR_MM2,
    MM2,
    TELEMETRY,
    check_telemetry_environment,
    clusters_list,
    one_source,
)
from k2k.cli.signals import on_stop_signals
from k2k.cli.termination import TEMPLATE_ENGINE, termination_log

__all__ = ["offset_mapping"]


@click.group("offset-mapping")
def offset_mapping() -> None:
    """The Offset Mapping app: translates source consumer-group offsets to the target."""


@offset_mapping.command("start")
@FILES_OR_MM2
@MM2
@CLUSTERS
@click.option(
    "--once",
    is_flag=True,
    help="Do one full pass (read mappings, translate, commit) and exit 0 (scripts, "
    "cut-overs, tests). Without it, pass every groups.pollInterval until SIGINT/SIGTERM.",
)
@TELEMETRY
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log every pass (INFO); -vv k2k's DEBUG lines, -vvv also librdkafka's own.",
)
@TEMPLATE_ENGINE
@one_line_errors
@termination_log
def offset_mapping_start(
    files: Sequence[str],
    mm2_file: str | None,
    clusters: str | None,
    once: bool,
    telemetry: bool,
    verbose: int,
    template_engine: bool,
) -> None:
    """Keep the target's consumer groups at the translated positions of the source's.

    Reads the app's configuration (K2K's Offset Mapping layout); a replicator pipeline file
    plus an overlay of the app's keys works too (-f pipeline.yaml -f offset-mapping.yaml),
    replicator-only keys are ignored. With --mm2, the groups of each enabled flow of a
    MirrorMaker 2 file, as its sync.group.offsets would move them (one app per flow). Never
    writes to the source cluster.
    """
    from k2k.config import load_offset_mapping_app
    from k2k.offsetmapping.app import OffsetMappingApp

    one_source(files, mm2_file)
    setup_logging(verbose)
    if mm2_file is not None:
        if telemetry:
            raise click.UsageError("-t takes -f files: print the flows with k2k validate --mm2")
        _run_mm2_apps(mm2_file, clusters, once, template_engine)
        return
    cfg = load_offset_mapping_app(list(files), templates=template_engine)
    log_inert(cfg)
    metrics = None
    if telemetry:
        check_telemetry_environment()
        from k2k.coordination.assignment import default_member_name
        from k2k.metrics.app import app_metrics

        metrics = functools.partial(app_metrics, cfg, instance=default_member_name())
    app = OffsetMappingApp(cfg, metrics)

    with on_stop_signals(lambda _signum, _frame: app.request_stop()):
        report = app.run(once=once)
    click.echo(f"offset-mapping {cfg.name}: {report.line()}", err=True)


def _run_mm2_apps(mm2_file: str, clusters: str | None, once: bool, templates: bool) -> None:
    """One app per flow of the MM2 file, each in a thread, until stopped (or one pass each)."""
    import threading
    from pathlib import Path

    from k2k.config.mm2 import flow_config, read_mm2
    from k2k.config.offset_mapping import group_sync_app
    from k2k.errors import ConfigError, K2KError
    from k2k.offsetmapping.app import OffsetMappingApp

    mm2 = read_mm2(Path(mm2_file), clusters_list(clusters))
    apps = []
    for flow in mm2.flows:
        cfg = flow_config(mm2, flow, templates=templates)
        if not cfg.features.offset_mapping:
            raise ConfigError(
                f"{mm2_file}: flow {flow.label}: emit.offset-syncs.enabled = false: no offset "
                "mappings to translate groups with; expected offset syncs on"
            )
        apps.append(OffsetMappingApp(group_sync_app(cfg)))
    reports: dict[str, str] = {}
    errors: list[K2KError] = []

    def run(app: OffsetMappingApp) -> None:
        try:
            reports[app.cfg.name] = app.run(once=once).line()
        except K2KError as exc:  # raised below, in the command's own thread
            errors.append(exc)
            for other in apps:
                other.request_stop()

    def stop_all(_signum: int, _frame: object) -> None:
        for app in apps:
            app.request_stop()

    threads = [threading.Thread(target=run, args=(app,), daemon=True) for app in apps]
    with on_stop_signals(stop_all):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    for name, line in sorted(reports.items()):
        click.echo(f"offset-mapping {name}: {line}", err=True)


@offset_mapping.command("validate")
@FILES
@TEMPLATE_ENGINE
@one_line_errors
def offset_mapping_validate(files: Sequence[str], template_engine: bool) -> None:
    """Load, merge and validate the app's configuration; print the effective one."""
    from k2k.config import load_offset_mapping_app, render_effective

    cfg = load_offset_mapping_app(list(files), templates=template_engine)
    echo_inert(cfg)
    click.echo(render_effective(cfg), nl=False)


@offset_mapping.command("translate-checkpoint")
@FILES
@click.option(
    "--spark",
    "checkpoint",
    required=True,
    metavar="PATH",
    type=click.Path(file_okay=False),
    help="The checkpoint directory of a Structured Streaming query that read the source "
    "(a local path: copy one from HDFS or object storage first).",
)
@click.option(
    "--to",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Write the translated checkpoint here (a new or empty directory).",
)
@click.option(
    "--yes",
    "in_place",
    is_flag=True,
    help="Translate PATH in place (the replaced files are kept in PATH/k2k-original-offsets).",
)
@click.option("-v", "--verbose", count=True, help="-v k2k's INFO lines, -vv DEBUG.")
@TEMPLATE_ENGINE
@one_line_errors
def offset_mapping_translate_checkpoint(
    files: Sequence[str],
    checkpoint: str,
    to: str | None,
    in_place: bool,
    verbose: int,
    template_engine: bool,
) -> None:
    """Make a Structured Streaming checkpoint read the target where it left the source.

    Translates the Kafka positions a restarted query reads (the newest batch's offsets, and
    the batch before when the newest did not commit): unchanged on partitions copied with
    offsets: identical, through the pipeline's offset mappings elsewhere, topics renamed as
    the pipeline routes them. Reads only the target cluster. Without --to or --yes, prints
    the translation and writes nothing (docs/offset-mapping.md#structured-streaming).
    """
    from pathlib import Path

    from k2k.config import load_pipeline
    from k2k.errors import ConfigError
    from k2k.migration.spark_failover import translate_checkpoint

    setup_logging(verbose)
    if to is not None and in_place:
        raise ConfigError("--to and --yes: both given; expected one (a copy, or in place)")
    cfg = load_pipeline(list(files), templates=template_engine)
    report = translate_checkpoint(cfg, Path(checkpoint), Path(to) if to else None, in_place)
    for line in report.lines():
        click.echo(line)
    if report.written is None:
        click.echo("nothing written: --to DIR writes a translated copy, --yes translates in place")
    else:
        click.echo(f"translated checkpoint written to {report.written}")


offset_mapping.add_command(offset_mapping_report)
