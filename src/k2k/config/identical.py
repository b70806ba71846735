"""Checks for ``replication[].sink.offsets: identical``: what it needs from the rest of the
pipeline. A target partition keeps its source partition's offsets only when this pipeline is
its one writer, writes each source record once, in place, and writes nothing else there."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from k2k.config.errors import Problem, describe
from k2k.config.routing import ExplicitTopicMap, StaticTopicName

if TYPE_CHECKING:
    from k2k.config.model import PipelineConfig

__all__ = ["identical_offsets_problems"]

_OFFSETS = ("replication", "sink", "offsets")
_NEEDS = "offsets: identical needs"


def identical_offsets_problems(cfg: PipelineConfig) -> list[Problem]:
    """One problem per setting that identical offsets cannot work with (none when the
    pipeline does not ask for them)."""
    sink = cfg.replication.sink
    if not sink.offsets.identical:
        return []
    out: list[Problem] = []
    if sink.partition != "source":
        what = "offsets: identical keeps each record at its source partition and offset"
        out.append(
            (
                ("replication", "sink", "partition"),
                describe(what, got=sink.partition, expected="source"),
            )
        )
    routing = sink.topic
    if isinstance(routing, StaticTopicName):
        what = f"{_NEEDS} a target topic of its own per source topic; this route sends every topic to one"
        expected = "source, {prefix, suffix}, {map: ...} with distinct targets, or a policy"
        out.append(
            (("replication", "sink", "topic"), describe(what, got=routing.topic, expected=expected))
        )
    elif isinstance(routing, ExplicitTopicMap):
        shared = sorted(t for t, n in Counter(routing.mapping.values()).items() if n > 1)
        if shared:
            what = (
                f"{_NEEDS} a target topic of its own per source topic; several map to {shared[0]!r}"
            )
            out.append(
                (
                    ("replication", "sink", "topic", "map"),
                    describe(what, got=shared, expected="distinct targets"),
                )
            )
    features = cfg.features
    if features.exactly_once:
        what = (
            "cannot be combined with features.exactlyOnce: each transaction's commit marker "
            "takes an offset on the target"
        )
        expected = "offsets: assigned with exactly-once, or exactlyOnce: disabled"
        out.append((_OFFSETS, describe(what, got="identical", expected=expected)))
    if features.bidirectional_replication:
        what = "cannot be combined with bidirectional replication: it leaves records out"
        out.append((_OFFSETS, describe(what, got="identical", expected="offsets: assigned")))
    leaving_out = [
        i
        for i, item in enumerate(cfg.replication.transforms)
        if item.step.kind == "filter" or item.step.on_error == "skip"
    ]
    if leaving_out:
        what = (
            "cannot be combined with a filter or a step with onError: skip: they leave "
            "records out, and every record must keep its source offset"
        )
        out.append(
            (
                ("replication", "transforms", leaving_out[0]),
                describe(what, expected="offsets: assigned, or steps that leave nothing out"),
            )
        )
    if cfg.error_handling.on_offset_gap == "map" and not features.offset_mapping:
        what = "map goes on through offset mappings: needs features.offsetMapping: enabled"
        expected = "features.offsetMapping: enabled, or onOffsetGap: fail"
        out.append((("errorHandling", "onOffsetGap"), describe(what, got="map", expected=expected)))
    return out
