"""``k2k cutover``: move a pipeline's consumer groups to the target and stop replicating; and
``k2k offset-mapping report``, the offset-confidence report on its own."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.cli.logsetup import setup_logging
from k2k.cli.options import AS_JSON, FILES, echo_report
from k2k.cli.termination import TEMPLATE_ENGINE
from k2k.errors import ConfigError

if TYPE_CHECKING:
    from k2k.migration.cutover import Cutover
    from k2k.migration.report import CutoverReport

__all__ = ["GROUPS", "cutover", "finish", "offset_mapping_report", "open_migration"]

#: Exit code when a group's position is not exact (the report says which).
EXIT_INEXACT = 1


def _duration(flag: str, text: str) -> float:
    from k2k.config.durations import parse_duration

    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        raise ConfigError(
            f"{flag}: {exc} ({text!r}); expected a duration such as 10s or 2m"
        ) from None


def open_migration(
    files: Sequence[str],
    groups: str | None,
    quiet: str,
    timeout: str,
    count: bool,
    template_engine: bool,
    kind: type[Cutover] | None = None,
    reverse: bool = False,
) -> Cutover:
    """The cut-over (or ``kind``) of the pipeline in ``files``; flags checked first."""
    from k2k.config import load_migration
    from k2k.migration.cutover import Cutover, CutoverOptions

    if groups is not None:
        try:
            re.compile(groups)
        except re.error as exc:
            raise ConfigError(f"--groups: not a regular expression ({exc}): {groups!r}") from None
    options = CutoverOptions(
        groups, _duration("--quiet-period", quiet), _duration("--timeout", timeout), count
    )
    cfg, app = load_migration(list(files), templates=template_engine)
    if kind is None and not cfg.features.offset_mapping:
        raise ConfigError(
            "features.offsetMapping: disabled; expected enabled (a cut-over moves groups "
            "through the offset mappings the pipeline writes)"
        )
    start_at = None
    if reverse:
        from k2k.migration.reverse import prepare_reverse, reverse_app

        # The cut-over of the reversed pipeline: its drain copies from the fork when no
        # reverse member runs, as k2k start --reverse would.
        cfg, fork = prepare_reverse(cfg)
        app = reverse_app(app)
        start_at = fork.offsets if fork is not None else None
    return (kind or Cutover)(cfg, app, options, _say, start_at)


def _say(line: str) -> None:
    click.echo(line, err=True)


GROUPS = click.option(
    "--groups",
    metavar="REGEX",
    help="The consumer groups to move (a regular expression over whole names); default: "
    "the Offset Mapping app's groups.consumerGroups from the same files.",
)
_NO_COUNT = click.option(
    "--no-count",
    "no_count",
    is_flag=True,
    help="Skip counting the records on each side (it reads the replicated range once).",
)
_ALLOW = click.option(
    "--allow-lower-bounds",
    is_flag=True,
    help="Exit 0 also when some positions are lower bounds (records read again, none skipped).",
)


@click.command()
@FILES
@GROUPS
@click.option(
    "--quiet-period",
    "quiet",
    default="10s",
    show_default=True,
    help="How long the source end offsets must stand still to be the cut point.",
)
@click.option(
    "--timeout",
    default="10m",
    show_default=True,
    help="How long each waiting step (cut, drain) may take.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the offset-confidence report as if cut over now; write nothing.",
)
@click.option("--yes", is_flag=True, help="Cut over (without it, the plan is printed).")
@click.option(
    "--reverse",
    is_flag=True,
    help="Cut the reversed pipeline over (failback): move the groups from the target back "
    "to the source through the mappings k2k start --reverse wrote (docs/operations.md#failback).",
)
@AS_JSON
@_ALLOW
@_NO_COUNT
@click.option("-v", "--verbose", count=True, help="Log each step (INFO); -vv DEBUG.")
@TEMPLATE_ENGINE
@one_line_errors
def cutover(
    files: Sequence[str],
    groups: str | None,
    quiet: str,
    timeout: str,
    dry_run: bool,
    yes: bool,
    reverse: bool,
    as_json: bool,
    allow_lower_bounds: bool,
    no_count: bool,
    verbose: int,
    template_engine: bool,
) -> None:
    """Move the pipeline's consumer groups to the target and stop replicating.

    Steps, each recorded on the target so that a second run resumes: wait until the source
    stands still (stopping its producers is your step), wait until everything up to there is
    copied, stop every running member and hold its partitions, translate the groups one last
    time, and report per group and partition how exact its target position is. Exit 0 when
    every position is exact, 1 with the report otherwise. docs/operations.md#cutting-over.
    """
    setup_logging(verbose)
    job = open_migration(
        files, groups, quiet, timeout, not no_count, template_engine, reverse=reverse
    )
    try:
        if dry_run:
            finish(job.dry_run(), as_json, allow_lower_bounds)
            return
        if not yes:
            click.echo(_plan(job))
            from k2k.migration.cutover import CutoverRefused

            raise CutoverRefused(
                "nothing written: add --yes to cut over (or --dry-run for the report)"
            )
        finish(job.run(), as_json, allow_lower_bounds)
    finally:
        job.close()


@click.command("report")
@FILES
@GROUPS
@AS_JSON
@_ALLOW
@_NO_COUNT
@TEMPLATE_ENGINE
@one_line_errors
def offset_mapping_report(
    files: Sequence[str],
    groups: str | None,
    as_json: bool,
    allow_lower_bounds: bool,
    no_count: bool,
    template_engine: bool,
) -> None:
    """The offset-confidence report: where each group would continue on the target if the
    pipeline were cut over now, and how exact that is (k2k cutover --dry-run)."""
    job = open_migration(files, groups, "10s", "10m", not no_count, template_engine)
    try:
        finish(job.dry_run(), as_json, allow_lower_bounds)
    finally:
        job.close()


def finish(
    report: CutoverReport, as_json: bool, allow_lower_bounds: bool, strict: bool = True
) -> None:
    """Print ``report``; exit 1 when ``strict`` and a position is not exact enough."""
    echo_report(report, as_json)
    if strict and report.inexact(allow_lower_bounds):
        sys.exit(EXIT_INEXACT)


def _plan(job: Cutover) -> str:
    rec = job.recorded()
    name = job.cfg.name
    if rec is not None and rec.done:
        return f"pipeline {name}: already cut over; k2k cutover --yes prints its report"
    done = "/".join(rec.steps) if rec is not None else "nothing"
    tps = job.partitions() if rec is None else sorted(rec.cut)
    positions = job.source_positions({t for t, _ in tps})
    return "\n".join(
        [
            f"pipeline {name}: cut-over plan ({done} done so far)",
            f"  partitions: {len(tps)} on {len({t for t, _ in tps})} topics",
            f"  groups: {', '.join(sorted(positions)) or 'none selected'}",
            "  steps: cut (source stands still) -> drain (copied up to the cut) -> stop "
            "(members stop, claims held) -> groups (translated, report)",
        ]
    )
