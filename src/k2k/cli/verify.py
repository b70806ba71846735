"""``k2k verify``: compare source and target record for record, as a Spark job."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import click

from k2k.cli.errorboundary import one_line_errors
from k2k.cli.logsetup import setup_logging
from k2k.cli.options import AS_JSON, FILES, echo_report

__all__ = ["verify"]


@click.command()
@FILES
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
@AS_JSON
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

    setup_logging(verbose, quiet=logging.INFO)
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
    echo_report(report, as_json)
    if not report.ok:
        raise VerifyMismatch(report.summary())
