"""The ``k2k`` command line, and the error boundary of the whole program.

Every deliberate failure is a :class:`k2k.errors.K2KError`: it is printed as one line
(``error: ...``; configuration problems one line each) with a non-zero exit and no
traceback, unless ``--debug`` asks for one (:mod:`k2k.cli.errorboundary`).

Each command lives in its own module of this package; this one only gathers them under
``main``, the console entry point. Those modules import what only a run needs (the config
model, Spark, the pipeline) inside the command, so that ``--help`` and usage errors stay quick.
"""

from __future__ import annotations

import click

from k2k import __version__
from k2k.cli import (
    cutover,
    failover,
    local,
    offset_mapping,
    offsets,
    package,
    start,
    status,
    validate,
    verify,
)

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="k2k")
def main() -> None:
    """k2k replicates Kafka topics from a source cluster to a target cluster on Spark."""


for _command in (
    start.start,
    validate.validate,
    status.status,
    verify.verify,
    offsets.offsets,
    cutover.cutover,
    failover.failover,
    offset_mapping.offset_mapping,
    package.package,
    local.local,
):
    main.add_command(_command)
