"""``k2k failover``: the source cluster is lost; stop and fence the pipeline, report the
recovery point, move the groups to their last known exact positions."""

from __future__ import annotations

from collections.abc import Sequence

import click

from k2k.cli.cutover import GROUPS, finish, open_migration
from k2k.cli.errorboundary import one_line_errors
from k2k.cli.logsetup import setup_logging
from k2k.cli.options import AS_JSON, FILES
from k2k.cli.termination import TEMPLATE_ENGINE

__all__ = ["failover"]


@click.command()
@FILES
@GROUPS
@click.option("--yes", is_flag=True, help="Fail over (without it, the plan is printed).")
@AS_JSON
@click.option("-v", "--verbose", count=True, help="Log each step (INFO); -vv DEBUG.")
@TEMPLATE_ENGINE
@one_line_errors
def failover(
    files: Sequence[str],
    groups: str | None,
    yes: bool,
    as_json: bool,
    verbose: int,
    template_engine: bool,
) -> None:
    """Stop and fence the pipeline on the target when its source is lost; report what was
    not replicated; move the groups to their last known exact positions.

    Never contacts the source. Recorded like a cut-over, so a second run resumes, and the
    recorded fork point is where a reverse pipeline (k2k start --reverse) starts.
    Exit 0 once done (the report says which groups could not be moved and why).
    docs/operations.md#disaster-recovery.
    """
    from k2k.migration.cutover import CutoverRefused
    from k2k.migration.failover import Failover

    setup_logging(verbose)
    job = open_migration(files, groups, "0s", "10m", False, template_engine, Failover)
    assert isinstance(job, Failover)
    try:
        if not yes:
            plan = job.preview()
            click.echo(
                f"pipeline {job.cfg.name}: failover plan: stop and fence every member, take "
                f"{len(plan.cut)} partitions' claims, move the groups from their guards"
            )
            raise CutoverRefused("nothing written: add --yes to fail over")
        finish(job.run(), as_json, allow_lower_bounds=True, strict=False)
    finally:
        job.close()
