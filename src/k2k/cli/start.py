"""``k2k start``: run one pipeline in this process, or every flow of an MM2 properties file.

Several ``--mm2`` flows run in one child process each (:mod:`k2k.cli.mm2flows`); the child
is this same command with the hidden ``--mm2-flow A->B``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.cli.logsetup import setup_logging
from k2k.cli.notices import log_inert
from k2k.cli.options import (
    CLUSTERS,
    FILES_OR_MM2,
    MM2,
    SKIP_TRANSFORMS,
    TELEMETRY,
    clusters_list,
    one_source,
)
from k2k.cli.signals import on_stop_signals, stop_then_exit
from k2k.cli.termination import TEMPLATE_ENGINE, termination_log
from k2k.spark.session import LOG_LEVEL_KEY, LOG_LEVELS

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

__all__ = ["start"]


@click.command()
@FILES_OR_MM2
@MM2
@CLUSTERS
@SKIP_TRANSFORMS
@click.option("--mm2-flow", hidden=True, metavar="A->B")
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
@click.option(
    "--reverse",
    is_flag=True,
    help="Run the pipeline the other way (failback): the target topics it replicated are "
    "copied back to the source under their original names, from the fork point the last "
    "k2k cutover or k2k failover recorded; control topics on the source, commit group "
    "<group>-reverse. "
    "k2k validate --reverse prints the reversed pipeline (docs/operations.md#failback).",
)
@TELEMETRY
@click.option(
    "--spark-log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    envvar="K2K_SPARK_LOG_LEVEL",
    help="Spark's own log level, for debugging Spark (default: ERROR, or spark.log.level in "
    "spark.conf; this option wins). Spark's lines are logged as k2k.spark.",
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log more. Default: k2k's INFO lines (start-up steps, members, leases, cluster "
    "outages) and every warning; -v adds k2k's DEBUG lines, -vv also librdkafka's own lines "
    "(each connection attempt).",
)
@TEMPLATE_ENGINE
@one_line_errors
@termination_log
def start(
    files: Sequence[str],
    mm2_file: str | None,
    clusters: str | None,
    skip_transforms: bool,
    mm2_flow: str | None,
    until_caught_up: bool,
    instance: str | None,
    standby: bool,
    reverse: bool,
    telemetry: bool,
    spark_log_level: str | None,
    verbose: int,
    template_engine: bool,
) -> None:
    """Run the replication pipeline described by the YAML file(s).

    Stops cleanly on SIGINT/SIGTERM: runners commit what the target has acknowledged,
    release their partitions, and the process exits 0. A second signal exits at once
    (uncommitted work is replayed on the next start; with exactly-once it is aborted, so
    nothing is duplicated). Several processes of one pipeline share its partitions.

    Stops the same way, exit 0, once k2k cutover drained the pipeline; started after that,
    it exits 0 at once and copies nothing.

    With --mm2, runs every enabled flow of a MirrorMaker 2 properties file: one flow in this
    process, several in one child process each (the MM2 properties k2k does not take are
    logged as warnings first).
    """
    from k2k.config import load_pipeline

    one_source(files, mm2_file)
    if reverse and mm2_file is not None:
        raise click.UsageError("--reverse takes -f files, not --mm2")
    setup_logging(verbose, quiet=logging.INFO)
    options = _StartOptions(until_caught_up, instance, standby, telemetry, spark_log_level)
    if mm2_file is None:
        cfg = load_pipeline(list(files), templates=template_engine)
        log_inert(cfg)
        if reverse:
            cfg, options = _reversed(cfg, options)
    else:
        engine = "enabled" if template_engine else "disabled"
        passthrough = [*options.passthrough(), *["-v"] * verbose, "-g", engine]
        if skip_transforms:
            passthrough.append("--skip-unsupported-transforms")
        picked = _mm2_pipeline(
            mm2_file, clusters, mm2_flow, template_engine, passthrough, skip_transforms
        )
        if picked is None:
            return
        cfg = picked
    _run_pipeline(cfg, options)


@dataclass(frozen=True)
class _StartOptions:
    """The options of ``k2k start`` that shape how one pipeline runs."""

    until_caught_up: bool
    instance: str | None
    standby: bool
    telemetry: bool
    spark_log_level: str | None
    #: Start offsets of partitions without progress (--reverse: the fork point).
    start_at: dict[tuple[str, int], int] | None = None

    def passthrough(self) -> list[str]:
        """These options again, for a flow's child process."""
        args = ["--until-caught-up"] if self.until_caught_up else []
        args += ["--instance", self.instance] if self.instance is not None else []
        args += ["--standby"] if self.standby else []
        args += ["--telemetry"] if self.telemetry else []
        level = self.spark_log_level
        return args + (["--spark-log-level", level] if level is not None else [])


def _reversed(cfg: PipelineConfig, options: _StartOptions) -> tuple[PipelineConfig, _StartOptions]:
    """The reversed pipeline and the options that start it at the fork point."""
    import dataclasses

    from k2k.migration.reverse import prepare_reverse

    reversed_cfg, fork = prepare_reverse(cfg)
    assert fork is not None  # prepare_reverse refuses without one
    logging.getLogger("k2k.reverse").info(
        "reverse of %s (commit group %s): %d topics back from the fork of %r",
        cfg.name,
        reversed_cfg.commit_group,
        len(reversed_cfg.replication.source.topic),
        fork,
    )
    return reversed_cfg, dataclasses.replace(options, start_at=fork.offsets)


def _mm2_pipeline(
    mm2_file: str,
    clusters: str | None,
    mm2_flow: str | None,
    template_engine: bool,
    passthrough: list[str],
    skip_transforms: bool,
) -> PipelineConfig | None:
    """The one flow's pipeline to run here, or None once several flows ran as children."""
    from pathlib import Path

    from k2k.cli.mm2flows import run_flow_processes
    from k2k.config.mm2 import all_notes, flow_config, read_mm2

    mm2 = read_mm2(Path(mm2_file), clusters_list(clusters), skip_transforms=skip_transforms)
    flows = [f for f in mm2.flows if mm2_flow is None or f.label == mm2_flow]
    if not flows:
        raise click.BadParameter(f"no enabled flow {mm2_flow}", param_hint="'--mm2-flow'")
    configs = [flow_config(mm2, flow, templates=template_engine) for flow in flows]
    if mm2_flow is None:  # a child's parent has logged them already
        for line in all_notes(mm2):
            logging.getLogger("k2k.mm2").warning(line)
    if len(configs) == 1:
        return configs[0]
    code = run_flow_processes(mm2_file, [flow.label for flow in flows], passthrough)
    if code != 0:
        sys.exit(code)
    return None


def _run_pipeline(cfg: PipelineConfig, options: _StartOptions) -> None:
    """Run one pipeline in this process until it stops (the body of ``k2k start``)."""
    from k2k.api import Replicator
    from k2k.coordination.assignment import member_name_problem
    from k2k.observability.display import final_summary, make_display

    if options.spark_log_level is not None:
        cfg = _with_spark_conf(cfg, LOG_LEVEL_KEY, options.spark_log_level.upper())
    instance = options.instance
    problem = None if instance is None else member_name_problem(instance)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="'--instance'")
    display = make_display(cfg.name, tty=sys.stderr.isatty())
    replicator = Replicator(
        cfg,
        instance=instance,
        standby=options.standby,
        telemetry=options.telemetry,
        on_progress=display,
        start_at=options.start_at,
    )
    # replicator.stop is signal-safe; the replicator keeps this handler when Spark starts.
    with on_stop_signals(stop_then_exit(replicator.stop)):
        try:
            stats = replicator.run(until_caught_up=options.until_caught_up)
        finally:
            display.close()
    if stats.cutover is None or stats.leases:
        click.echo(final_summary(cfg.name, stats), err=True)
    if stats.cutover is not None:
        from k2k.pipeline.driver.cutover import describe

        click.echo(f"k2k start {cfg.name}: stopped: {describe(stats.cutover)}", err=True)


def _with_spark_conf(cfg: PipelineConfig, key: str, value: str) -> PipelineConfig:
    """``cfg`` with ``spark.conf[key] = value`` (the model is frozen: a changed copy)."""
    spark = cfg.spark.model_copy(update={"conf": {**cfg.spark.conf, key: value}})
    return cfg.model_copy(update={"spark": spark})
