"""The ``k2k`` command line, and the error boundary of the whole program.

Every deliberate failure is a :class:`k2k.errors.K2KError`: it is printed as one line
(``error: ...``; configuration problems one line each) with a non-zero exit and no
traceback, unless ``--debug`` asks for one.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from k2k import __version__
from k2k.cli.errorboundary import one_line_errors
from k2k.cli.package import DEFAULT_ARCHIVE
from k2k.cli.termination import TEMPLATE_ENGINE, termination_log
from k2k.spark.session import LOG_LEVEL_KEY, LOG_LEVELS

if TYPE_CHECKING:
    from k2k.admin.offsets import Destination
    from k2k.config import PipelineConfig

__all__ = ["main"]


_FILES_HELP = "Pipeline YAML file (K2K layout). Repeat to deep-merge several files in order."
_FILES = click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help=_FILES_HELP,
)
#: ``-f`` where ``--mm2`` may replace it (start, validate).
_FILES_OR_MM2 = click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help=_FILES_HELP + " Required unless --mm2 is given.",
)
_MM2 = click.option(
    "--mm2",
    "mm2_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="A MirrorMaker 2 dedicated-mode properties file instead of -f: one pipeline per "
    "enabled flow A->B (docs/mm2.md#k2k-start---mm2).",
)
_CLUSTERS = click.option(
    "--clusters",
    metavar="A,B",
    help="With --mm2: only the flows whose target is one of these aliases (MM2's --clusters).",
)


def _clusters_list(clusters: str | None) -> list[str] | None:
    return None if clusters is None else [c for c in clusters.replace(",", " ").split() if c]


def _one_source(files: Sequence[str], mm2_file: str | None) -> None:
    """Exactly one of ``-f`` and ``--mm2``."""
    if files and mm2_file is not None:
        raise click.UsageError("give either -f/--file or --mm2, not both")
    if not files and mm2_file is None:
        raise click.UsageError("missing option '-f' / '--file' (or --mm2 FILE)")


_TELEMETRY = click.option(
    "-t",
    "--telemetry",
    is_flag=True,
    help="Export metrics through OpenTelemetry; exporters from OTEL_METRICS_EXPORTER "
    "(prometheus, the default, on OTEL_EXPORTER_PROMETHEUS_HOST:PORT = 127.0.0.1:9464; otlp; "
    "console; kafka; none). See docs/metrics.md.",
)


def _check_telemetry_environment() -> None:
    """Bad ``OTEL_*`` values fail before anything connects."""
    from k2k.metrics.telemetry import check_environment

    check_environment(os.environ)


#: Marks the handler :func:`_setup_logging` installed, so a second call replaces only it.
_HANDLER_NAME = "k2k"


def _setup_logging(verbosity: int, quiet: int = logging.WARNING) -> None:
    """Log to stderr: on a terminal through rich, above the live panel; else plain lines.

    ``quiet`` is k2k's level without ``-v``; each ``-v`` lowers it a step (to INFO, then
    DEBUG); one ``-v`` more than DEBUG needs adds librdkafka's own lines (every connection
    failure among them), kept at WARNING otherwise. Other libraries log their warnings.
    Spark's lines (``k2k.spark``) pass as they come: Spark filters them by its own level
    (``--spark-log-level``).
    """
    level = quiet - 10 * verbosity
    if sys.stderr.isatty():
        from k2k.observability.display import terminal_log_handler

        handler = terminal_log_handler()
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("k2k").setLevel(max(level, logging.DEBUG))
    logging.getLogger("k2k.librdkafka").setLevel(
        logging.DEBUG if level < logging.DEBUG else logging.WARNING
    )
    logging.getLogger("k2k.spark").setLevel(logging.DEBUG)
    logging.getLogger("py4j").setLevel(logging.ERROR)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="k2k")
def main() -> None:
    """k2k replicates Kafka topics from a source cluster to a target cluster on Spark."""


@main.command()
@_FILES_OR_MM2
@_MM2
@_CLUSTERS
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
@_TELEMETRY
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
    mm2_flow: str | None,
    until_caught_up: bool,
    instance: str | None,
    standby: bool,
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

    With --mm2, runs every enabled flow of a MirrorMaker 2 properties file: one flow in this
    process, several in one child process each (the MM2 properties k2k does not take are
    logged as warnings first).
    """
    from k2k.config import load_pipeline

    _one_source(files, mm2_file)
    _setup_logging(verbose, quiet=logging.INFO)
    options = _StartOptions(until_caught_up, instance, standby, telemetry, spark_log_level)
    if mm2_file is None:
        cfg = load_pipeline(list(files), templates=template_engine)
    else:
        engine = "enabled" if template_engine else "disabled"
        passthrough = [*options.passthrough(), *["-v"] * verbose, "-g", engine]
        picked = _mm2_pipeline(mm2_file, clusters, mm2_flow, template_engine, passthrough)
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

    def passthrough(self) -> list[str]:
        """These options again, for a flow's child process."""
        args = ["--until-caught-up"] if self.until_caught_up else []
        args += ["--instance", self.instance] if self.instance is not None else []
        args += ["--standby"] if self.standby else []
        args += ["--telemetry"] if self.telemetry else []
        level = self.spark_log_level
        return args + (["--spark-log-level", level] if level is not None else [])


def _mm2_pipeline(
    mm2_file: str,
    clusters: str | None,
    mm2_flow: str | None,
    template_engine: bool,
    passthrough: list[str],
) -> PipelineConfig | None:
    """The one flow's pipeline to run here, or None once several flows ran as children."""
    from pathlib import Path

    from k2k.cli.mm2flows import run_flow_processes
    from k2k.config.mm2 import all_notes, flow_config, read_mm2

    mm2 = read_mm2(Path(mm2_file), _clusters_list(clusters))
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

    until_caught_up, instance, standby = options.until_caught_up, options.instance, options.standby
    telemetry, spark_log_level = options.telemetry, options.spark_log_level
    if spark_log_level is not None:
        cfg = _with_spark_conf(cfg, LOG_LEVEL_KEY, spark_log_level.upper())
    problem = None if instance is None else member_name_problem(instance)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="'--instance'")
    display = make_display(cfg.name, tty=sys.stderr.isatty())
    replicator = Replicator(
        cfg, instance=instance, standby=standby, telemetry=telemetry, on_progress=display
    )
    signals_seen: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signals_seen.append(signum)
        if len(signals_seen) > 1:
            click.echo("error: second signal, exiting without waiting", err=True)
            sys.exit(130)
        replicator.stop()  # signal-safe; the replicator keeps this handler when Spark starts

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, on_signal)
    try:
        stats = replicator.run(until_caught_up=until_caught_up)
    finally:
        display.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo(final_summary(cfg.name, stats), err=True)


def _with_spark_conf(cfg: PipelineConfig, key: str, value: str) -> PipelineConfig:
    """``cfg`` with ``spark.conf[key] = value`` (the model is frozen: a changed copy)."""
    spark = cfg.spark.model_copy(update={"conf": {**cfg.spark.conf, key: value}})
    return cfg.model_copy(update={"spark": spark})


@main.command()
@_FILES_OR_MM2
@_MM2
@_CLUSTERS
@click.option(
    "--check",
    is_flag=True,
    help="Instead of printing the configuration, check the connections to both clusters "
    "step by step (DNS, TCP, TLS, SASL, metadata, topics and ACLs; one line each, writing "
    "nothing): what features.checkKafkaConnectionOnStartup runs when k2k start cannot connect.",
)
@TEMPLATE_ENGINE
@one_line_errors
def validate(
    files: Sequence[str],
    mm2_file: str | None,
    clusters: str | None,
    check: bool,
    template_engine: bool,
) -> None:
    """Load, merge and validate the pipeline; print the effective configuration.

    Secrets are masked. Exit 0 when valid; otherwise print every problem, one per line,
    and exit 2. With --check, a failed connection step exits 1 with a one-line summary.

    With --mm2, print the equivalent pipelines of a MirrorMaker 2 properties file in K2K's
    layout, one YAML document per enabled flow, each headed by comments listing the MM2
    properties k2k does not take and what to do instead.
    """
    from k2k.config import load_pipeline, render_effective

    _one_source(files, mm2_file)
    if mm2_file is not None:
        if check:
            raise click.UsageError("--check takes -f files: print them with --mm2 first")
        _print_mm2(mm2_file, clusters, template_engine)
        return
    cfg = load_pipeline(list(files), templates=template_engine)
    if not check:
        click.echo(render_effective(cfg), nl=False)
        return
    from k2k.errors import ClusterError
    from k2k.kafka.diagnose import diagnose, summary

    diagnoses = diagnose(cfg)
    for diagnosis in diagnoses:
        for step in diagnosis.steps:
            click.echo(step.line())
    failed = summary(diagnoses)
    if failed is not None:
        raise ClusterError(failed)


def _print_mm2(mm2_file: str, clusters: str | None, template_engine: bool) -> None:
    """Print the flows of an MM2 file as K2K-layout YAML, each validated first."""
    from pathlib import Path

    from k2k.config.mm2 import flow_config, read_mm2, render_flows

    mm2 = read_mm2(Path(mm2_file), _clusters_list(clusters))
    for flow in mm2.flows:
        flow_config(mm2, flow, templates=template_engine)
    click.echo(render_flows(mm2), nl=False)


@main.command()
@_FILES
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (for scripts).")
@one_line_errors
def status(files: Sequence[str], as_json: bool) -> None:
    """Show the pipeline's members, partition owners, committed positions and lag.

    Works whether or not the pipeline runs, and never writes to either cluster. The JSON
    fields are described in docs/operations.md.
    """
    from k2k.admin.status import read_status
    from k2k.config import load_pipeline

    report = read_status(load_pipeline(list(files)))
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else report.render())


@main.command()
@_FILES
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="T",
    help="Verify only this source topic (repeat for several). Default: every topic the "
    "pipeline replicates.",
)
@click.option(
    "--all",
    "whole_topics",
    is_flag=True,
    help="Compare whole source topics up to their end, not only up to the committed "
    "progress (after the pipeline has stopped and caught up).",
)
@click.option(
    "--from-timestamp",
    metavar="MS|ISO8601",
    help="Start each partition's range at its first record at or after this time.",
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    metavar="N",
    help="Compare only the last N offsets of each partition's range (a quick check).",
)
@click.option(
    "--slice-records",
    type=click.IntRange(min=0),
    metavar="N",
    help="Verify a partition whose range spans more than N offsets in several tasks of about "
    "N (cut where both sides agree, see docs/operations.md); 0 never slices. "
    "Default: 1,000,000.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (for scripts).")
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log more: -v k2k's DEBUG lines, -vv also librdkafka's own.",
)
@one_line_errors
def verify(
    files: Sequence[str],
    topics: Sequence[str],
    whole_topics: bool,
    from_timestamp: str | None,
    sample: int | None,
    slice_records: int | None,
    as_json: bool,
    verbose: int,
) -> None:
    """Compare the source with the target record for record, as a Spark job.

    For every partition of the selected source topics, the committed range (earliest to
    the pipeline's committed progress) is compared with the target records routed from
    it: counts, an order-sensitive digest of key, value, headers and timestamp, and the
    first differences by place. At-least-once duplicates are reported, not counted as
    differences. Exit 0 when everything matches, 1 otherwise. Never writes to either
    cluster. On a terminal (without --json) a live line shows the progress. See
    docs/operations.md.
    """
    from k2k.admin.offsets import parse_timestamp
    from k2k.config import load_pipeline
    from k2k.errors import VerifyMismatch
    from k2k.observability.display import ProgressLine
    from k2k.verify.job import DEFAULT_SLICE_RECORDS, run_verify

    _setup_logging(verbose, quiet=logging.INFO)
    from_ms = (
        None if from_timestamp is None else parse_timestamp(from_timestamp, "--from-timestamp")
    )
    cfg = load_pipeline(list(files))
    line = ProgressLine(f"verify {cfg.name}") if sys.stderr.isatty() and not as_json else None
    try:
        report = run_verify(
            cfg,
            list(topics),
            whole_topics=whole_topics,
            from_timestamp_ms=from_ms,
            sample=sample,
            slice_records=DEFAULT_SLICE_RECORDS if slice_records is None else slice_records,
            progress=None if line is None else lambda p: line.show(*p.snapshot()),
        )
    finally:
        if line is not None:
            line.close()
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else report.render())
    if not report.ok:
        raise VerifyMismatch(report.summary())


@main.group()
def offsets() -> None:
    """A pipeline's committed positions (progress records): describe them, or move them."""


@offsets.command("describe")
@_FILES
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (for scripts).")
@one_line_errors
def offsets_describe(files: Sequence[str], as_json: bool) -> None:
    """Show every committed position: topic, partition, offset, when and by which member."""
    from k2k.admin.offsets import describe, describe_json, render_describe
    from k2k.config import load_pipeline

    cfg = load_pipeline(list(files))
    records = describe(cfg)
    click.echo(
        json.dumps(describe_json(cfg, records), indent=2) if as_json else render_describe(records)
    )


def _move_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``offsets set`` and ``offsets reset`` share: selection and safety."""
    for option in reversed(
        [
            _FILES,
            click.option("--topic", metavar="T", help="One source topic (all its partitions)."),
            click.option(
                "--partition", type=int, metavar="P", help="Only this partition of --topic."
            ),
            click.option("--all-topics", is_flag=True, help="Every selected source topic."),
            click.option(
                "--force",
                is_flag=True,
                help="Go ahead although members look alive (only for members that are gone, "
                "e.g. killed less than graceWindow ago).",
            ),
            click.option("--yes", is_flag=True, help="Write without asking."),
            click.option(
                "-v",
                "--verbose",
                count=True,
                help="Log claims and fencing (INFO); -vv k2k's DEBUG lines, -vvv also "
                "librdkafka's own.",
            ),
        ]
    ):
        command = option(command)
    return command


@offsets.command("set")
@_move_options
@click.option("--offset", type=int, metavar="O", help="Move to this offset.")
@click.option(
    "--to-timestamp", metavar="MS|ISO8601", help="Move to the first record at or after this time."
)
@click.option("--to-earliest", is_flag=True, help="Move to the earliest offset.")
@click.option("--to-latest", is_flag=True, help="Move to the latest offset (skip what is there).")
@one_line_errors
def offsets_set(
    files: Sequence[str],
    topic: str | None,
    partition: int | None,
    all_topics: bool,
    force: bool,
    yes: bool,
    verbose: int,
    offset: int | None,
    to_timestamp: str | None,
    to_earliest: bool,
    to_latest: bool,
) -> None:
    """Move committed positions; the pipeline replicates from there at its next start.

    Prints the change per partition (before -> after) and writes it only with --yes or
    after confirmation on a terminal. Refused while members of the pipeline are alive.
    """
    from k2k.admin.offsets import destination

    to = destination(offset, to_timestamp, to_earliest, to_latest)
    _move(files, topic, partition, all_topics, to, force, yes, verbose)


@offsets.command("reset")
@_move_options
@one_line_errors
def offsets_reset(
    files: Sequence[str],
    topic: str | None,
    partition: int | None,
    all_topics: bool,
    force: bool,
    yes: bool,
    verbose: int,
) -> None:
    """Move committed positions to the earliest offsets (replicate everything again)."""
    from k2k.admin.offsets import Destination

    _move(files, topic, partition, all_topics, Destination("earliest"), force, yes, verbose)


def _move(
    files: Sequence[str],
    topic: str | None,
    partition: int | None,
    all_topics: bool,
    to: Destination,
    force: bool,
    yes: bool,
    verbose: int,
) -> None:
    """Plan, print, confirm, write: the body of ``offsets set`` and ``offsets reset``."""
    from k2k.admin.offsets import NotConfirmed, apply_plan, plan_move
    from k2k.config import load_pipeline

    _setup_logging(verbose)
    cfg = load_pipeline(list(files))
    plan = plan_move(
        cfg, topic=topic, partition=partition, all_topics=all_topics, to=to, force=force
    )
    click.echo(plan.render())
    if not plan.moving():
        click.echo("nothing to change")
        return
    if not yes:
        if not sys.stdin.isatty():
            raise NotConfirmed("nothing written: add --yes")
        if not click.confirm("Write these positions?"):
            raise NotConfirmed("nothing written")
    written = apply_plan(cfg, plan, force=force)
    click.echo(f"wrote {len(written)} committed position{'' if len(written) == 1 else 's'}")


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
@_TELEMETRY
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
    files: Sequence[str], once: bool, telemetry: bool, verbose: int, template_engine: bool
) -> None:
    """Keep the target's consumer groups at the translated positions of the source's.

    Reads the app's configuration (K2K's Offset Mapping layout); a replicator pipeline file
    plus an overlay of the app's keys works too (-f pipeline.yaml -f offset-mapping.yaml),
    replicator-only keys are ignored. Never writes to the source cluster.
    """
    from k2k.config import load_offset_mapping_app
    from k2k.offsetmapping.app import OffsetMappingApp

    _setup_logging(verbose)
    cfg = load_offset_mapping_app(list(files), templates=template_engine)
    metrics = None
    if telemetry:
        _check_telemetry_environment()
        from k2k.coordination.assignment import default_member_name
        from k2k.metrics.app import app_metrics

        metrics = functools.partial(app_metrics, cfg, instance=default_member_name())
    app = OffsetMappingApp(cfg, metrics)

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
@TEMPLATE_ENGINE
@one_line_errors
def offset_mapping_validate(files: Sequence[str], template_engine: bool) -> None:
    """Load, merge and validate the app's configuration; print the effective one."""
    from k2k.config import load_offset_mapping_app, render_effective

    cfg = load_offset_mapping_app(list(files), templates=template_engine)
    click.echo(render_effective(cfg), nl=False)


@main.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=DEFAULT_ARCHIVE,
    show_default=True,
    help="The archive to write (.tar.gz).",
)
@click.option(
    "--python",
    metavar="PATH",
    help="The interpreter the environment is built with; executors need the same one at the "
    "same path (default: the one running k2k).",
)
@click.option("--force", is_flag=True, help="Replace the archive if it exists.")
@one_line_errors
def package(output: str, python: str | None, force: bool) -> None:
    """Pack k2k and its dependencies into one archive for Spark executors (venv-pack).

    Submit with: spark-submit --archives k2k-env.tar.gz#env --conf
    spark.pyspark.python=./env/bin/python ... (see docs/spark.md). pyspark is left out:
    executors use their cluster's own.
    """
    from pathlib import Path

    from k2k.cli.package import build_archive

    click.echo(f"building {output} ...", err=True)
    built = build_archive(Path(output), python, force=force)
    size_mb = built.stat().st_size / 1e6
    click.echo(f"wrote {built} ({size_mb:.0f} MB)", err=True)


def _register_local() -> None:
    from k2k.cli.local import local

    main.add_command(local)


_register_local()
