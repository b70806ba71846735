"""``k2k status``: a read-only look at a pipeline's members, owners, positions and lag."""

from __future__ import annotations

from collections.abc import Sequence

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.cli.options import AS_JSON, FILES, echo_report

__all__ = ["status"]


@click.command()
@FILES
@AS_JSON
@one_line_errors
def status(files: Sequence[str], as_json: bool) -> None:
    """Show the pipeline's members, partition owners, committed positions and lag.

    Works whether or not the pipeline runs, and never writes to either cluster. The JSON
    fields are described in docs/operations.md.
    """
    from k2k.admin.status import read_status
    from k2k.config import load_pipeline

    echo_report(read_status(load_pipeline(list(files))), as_json)
