"""``errorHandling``: what the pipeline does when a control-topic operation fails, source
records are lost, another producer writes to a replicated target topic, or a cluster stops
answering."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from k2k.config.base import K2KModel, Policy
from k2k.config.fields import Duration

__all__ = ["ErrorHandling"]


class ErrorHandling(K2KModel):
    """What to do when a control-topic operation fails."""

    on_commit_sync_timeout: Policy = Field(
        "fail",
        description="Progress records could not be read within `coordination.commit.syncTimeout`: "
        "`fail` stops the pipeline (unless a cluster does not answer at that moment: an "
        "outage is waited out, `errorHandling.maxOutage`); `ignore` logs it and continues "
        "with the progress read so far (partitions whose progress was not read may "
        "replicate records again).",
    )
    on_control_message_deserialization_error: Policy = Field(
        "fail",
        description="A control-topic record cannot be decoded (corrupt, or written by an "
        "incompatible version): `fail` stops the pipeline; `ignore` skips the record.",
    )
    on_source_records_lost: Literal["fail", "continue"] = Field(
        "fail",
        description="Source records were deleted before they were replicated, by retention "
        "or with their topic (deleted, or deleted and created again): `fail` stops, naming the "
        "lost range and how to go on (for retention the `k2k offsets reset` command); "
        "`continue` moves on (to the earliest offset still there, or without the topic) and "
        "logs the lost range as a warning, counted in `k2k.source.records.lost` with `-t`. A "
        "committed position past a partition's end without a topic id to explain it always "
        "stops.",
    )
    on_foreign_writes: Literal["warn", "fail"] = Field(
        "warn",
        description="A replicated target partition holds records the pipeline did not write "
        "(another producer writes to a replicated topic): `warn` counts them "
        "(`k2k.foreign.records`, `k2k status`) and logs a warning once per target partition "
        "with the offsets; `fail` stops with an error naming the partition and the offsets. "
        "Offset mappings stay exact either way. Found from the offsets the target gave "
        "k2k's own records, see docs/operations.md#foreign-writes-on-the-target.",
    )
    on_offset_gap: Literal["fail", "map"] = Field(
        "fail",
        description="`replication[].sink.offsets: identical`: a partition's target offsets "
        "can no longer equal its source offsets (a gap in the source offsets: a transaction "
        "marker, aborted or compacted-away records; or a record another producer wrote to "
        "the target partition). `fail` stops before anything is written at a wrong offset "
        "(a foreign write: as soon as it is seen), naming the partition and the offsets; "
        "`map` goes on with that partition's offsets translated by offset mappings from "
        "there (needs `features.offsetMapping`), shown as not identical by `k2k status`.",
    )
    max_outage: Duration | None = Field(
        None,
        description="How long a running pipeline waits for a cluster that does not answer "
        "(down, restarting, no leader) before it stops with an error; null waits as long "
        "as it takes. At start-up an unreachable cluster fails within `connectTimeout`. "
        "See docs/operations.md#outages.",
    )
