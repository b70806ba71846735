"""``k2k validate``: the effective configuration, its MM2 translation, or a connection check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.cli.notices import echo_inert
from k2k.cli.options import (
    CLUSTERS,
    FILES_OR_MM2,
    MM2,
    SKIP_TRANSFORMS,
    clusters_list,
    one_source,
)
from k2k.cli.termination import TEMPLATE_ENGINE

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

__all__ = ["validate"]


@click.command()
@FILES_OR_MM2
@MM2
@CLUSTERS
@SKIP_TRANSFORMS
@click.option(
    "--check",
    is_flag=True,
    help="Instead of printing the configuration, check the connections to both clusters "
    "step by step (DNS, TCP, TLS, SASL, metadata, topics and ACLs; one line each, writing "
    "nothing): what features.checkKafkaConnectionOnStartup runs when k2k start cannot connect.",
)
@click.option(
    "--reverse",
    is_flag=True,
    help="Print the reversed pipeline k2k start --reverse runs (reads the topic names on "
    "the target, and the fork point, shown as a comment; writes nothing).",
)
@TEMPLATE_ENGINE
@one_line_errors
def validate(
    files: Sequence[str],
    mm2_file: str | None,
    clusters: str | None,
    skip_transforms: bool,
    check: bool,
    reverse: bool,
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

    one_source(files, mm2_file)
    if mm2_file is not None:
        if check:
            raise click.UsageError("--check takes -f files: print them with --mm2 first")
        _print_mm2(mm2_file, clusters, template_engine, skip_transforms)
        return
    cfg = load_pipeline(list(files), templates=template_engine)
    if reverse:
        if check:
            raise click.UsageError("--check and --reverse: check the reversed pipeline's file")
        _print_reverse(cfg)
        return
    if not check:
        echo_inert(cfg)
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


def _print_mm2(
    mm2_file: str, clusters: str | None, template_engine: bool, skip_transforms: bool
) -> None:
    """Print the flows of an MM2 file as K2K-layout YAML, each validated first."""
    from pathlib import Path

    from k2k.config.mm2 import flow_config, read_mm2, render_flows

    mm2 = read_mm2(Path(mm2_file), clusters_list(clusters), skip_transforms=skip_transforms)
    for flow in mm2.flows:
        flow_config(mm2, flow, templates=template_engine)
    click.echo(render_flows(mm2), nl=False)


def _print_reverse(cfg: PipelineConfig) -> None:
    """The reversed pipeline, headed by the fork point it would start from."""
    from k2k.config import render_effective
    from k2k.migration.reverse import prepare_reverse

    reversed_cfg, fork = prepare_reverse(cfg, need_fork=False)
    where = f"{fork!r}" if fork is not None else "none recorded: k2k start --reverse refuses"
    click.echo(f"# reverse of {cfg.name}; fork point: {where}")
    click.echo(render_effective(reversed_cfg), nl=False)
