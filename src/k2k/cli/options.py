"""The flags several commands share, and the small checks that go with them.

One definition per flag keeps its spelling and help text the same in every command's
``--help``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Protocol

import click

__all__ = [
    "AS_JSON",
    "CLUSTERS",
    "FILES",
    "FILES_OR_MM2",
    "MM2",
    "SKIP_TRANSFORMS",
    "TELEMETRY",
    "check_telemetry_environment",
    "clusters_list",
    "echo_report",
    "one_source",
]

_FILES_HELP = "Pipeline YAML file (K2K layout). Repeat to deep-merge several files in order."
FILES = click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help=_FILES_HELP,
)
#: ``-f`` where ``--mm2`` may replace it (start, validate).
FILES_OR_MM2 = click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help=_FILES_HELP + " Required unless --mm2 is given.",
)
MM2 = click.option(
    "--mm2",
    "mm2_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="A MirrorMaker 2 dedicated-mode properties file instead of -f: one pipeline per "
    "enabled flow A->B (docs/mm2.md#k2k-start---mm2). Also a MirrorSourceConnector config "
    "(properties or Connect REST JSON) or a Strimzi KafkaMirrorMaker2 resource, recognised "
    "from the content; Strimzi's Secrets are read from $K2K_SECRETS_DIR/<secretName>/<key>.",
)
SKIP_TRANSFORMS = click.option(
    "--skip-unsupported-transforms",
    "skip_transforms",
    is_flag=True,
    help="With --mm2: run a file whose flows declare Connect transforms k2k does not map "
    "(docs/mm2.md#transforms-and-predicates): the ones it maps still apply, records pass the "
    "others unchanged (one warning each). Without it such a file is refused: a filter or "
    "mask left out copies what it was meant to stop.",
)
CLUSTERS = click.option(
    "--clusters",
    metavar="A,B",
    help="With --mm2: only the flows whose target is one of these aliases (MM2's --clusters).",
)
TELEMETRY = click.option(
    "-t",
    "--telemetry",
    is_flag=True,
    help="Export metrics through OpenTelemetry; exporters from OTEL_METRICS_EXPORTER "
    "(prometheus, the default, on OTEL_EXPORTER_PROMETHEUS_HOST:PORT = 127.0.0.1:9464; otlp; "
    "console; kafka; none). See docs/metrics.md.",
)
AS_JSON = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document (for scripts)."
)


def clusters_list(clusters: str | None) -> list[str] | None:
    """``--clusters A,B`` (commas or spaces) as a list of aliases; None when not given."""
    return None if clusters is None else [c for c in clusters.replace(",", " ").split() if c]


def one_source(files: Sequence[str], mm2_file: str | None) -> None:
    """Exactly one of ``-f`` and ``--mm2``."""
    if files and mm2_file is not None:
        raise click.UsageError("give either -f/--file or --mm2, not both")
    if not files and mm2_file is None:
        raise click.UsageError("missing option '-f' / '--file' (or --mm2 FILE)")


def check_telemetry_environment() -> None:
    """Bad ``OTEL_*`` values fail before anything connects."""
    from k2k.metrics.telemetry import check_environment

    check_environment(os.environ)


class Report(Protocol):
    """What ``status`` and ``verify`` print: a text rendering and a JSON one."""

    def render(self) -> str: ...

    def to_json(self) -> Any: ...


def echo_report(report: Report, as_json: bool) -> None:
    """Print ``report`` on stdout as text, or as one indented JSON document with ``--json``."""
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else report.render())
