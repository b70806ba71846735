"""``k2k offsets describe | set | reset``: read or move a pipeline's committed positions."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.cli.logsetup import setup_logging
from k2k.cli.options import AS_JSON, FILES

if TYPE_CHECKING:
    from k2k.admin.offsets import Destination

__all__ = ["offsets"]


@click.group()
def offsets() -> None:
    """A pipeline's committed positions (progress records): describe them, or move them."""


@offsets.command("describe")
@FILES
@AS_JSON
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
            FILES,
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

    setup_logging(verbose)
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
