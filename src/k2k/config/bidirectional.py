"""``bidirectional``: the loop breaker of two pipelines replicating in both directions.

Read when ``features.bidirectionalReplication`` is enabled (K2K's block, since K2K 1.2): both
pipelines (A -> B and B -> A) must have the same ``mode`` and header name, and in ``pipeline``
mode the same ``name``. See :mod:`k2k.stages.bidirectional` for what the marker means.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from k2k.config.base import K2KModel
from k2k.config.hints import FieldDoc

__all__ = ["Bidirectional", "BidirectionalHeaders"]


class BidirectionalHeaders(K2KModel):
    """Header names of bidirectional replication."""

    bidirectional: str = Field(
        "__k2k_bidirectional",
        min_length=1,
        description="The marker header: added to every replicated record, and a source record "
        "that carries it with the other direction's value is not replicated.",
    )


class Bidirectional(K2KModel):
    """How replicated records are marked (``features.bidirectionalReplication``)."""

    mode: Annotated[
        Literal["pipeline", "cluster"], FieldDoc("pipeline | cluster", "one of: pipeline, cluster")
    ] = Field(
        "cluster",
        description="The marker's value. `cluster`: the source cluster's id; a source record "
        "marked with the target cluster's id came from the target and is not replicated. "
        "`pipeline`: the pipeline `name`, which both directions must share; a source record "
        "marked with it is not replicated. Both directions need the same mode.",
    )
    headers: BidirectionalHeaders = Field(
        default_factory=BidirectionalHeaders, description="Header names."
    )
