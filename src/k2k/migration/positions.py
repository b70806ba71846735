"""Positions kept outside Kafka (a Structured Streaming checkpoint, a database), translated
from one pipeline's source partitions to the target, reading the target only.

A partition copied with ``offsets: identical`` keeps its position, under the target topic's
name, below where identity ended (the progress record's ``mappedFrom``); every other
position goes through the pipeline's offset mappings, as the Offset Mapping app translates
a group's (:class:`~k2k.offsetmapping.index.PartitionIndex`). The source is never asked:
this is how a consumer moves after the source was lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from k2k.admin.reader import PipelineReader
from k2k.errors import ConfigError, OffsetMappingError
from k2k.kafka import TP
from k2k.kafka.bulk import named
from k2k.offsetmapping.resolve import RunReader
from k2k.offsetmapping.store import MappingStore

if TYPE_CHECKING:
    from k2k.config import PipelineConfig
    from k2k.formats.progress import ProgressRecord

__all__ = ["Moved", "PositionTranslator", "Translated"]

IDENTICAL, MAPPED, LOWER_BOUND = "identical", "mapped", "mapped, lower bound"


@dataclass(frozen=True, slots=True)
class Moved:
    """Where one source position continues on the target, and how that is known."""

    target: TP
    offset: int
    how: str


@dataclass
class Translated:
    """Every position translated, and the identical ones the target does not hold yet."""

    moved: dict[TP, Moved] = field(default_factory=dict)
    #: Identical partitions whose position is past the target's end: (position, end).
    ahead: dict[TP, tuple[int, int]] = field(default_factory=dict)


class PositionTranslator:
    """Runs on: the operator's machine. One pipeline's positions, source to target."""

    def __init__(self, cfg: PipelineConfig) -> None:
        if not (cfg.features.offset_mapping or cfg.replication.sink.offsets.identical):
            raise ConfigError(
                "features.offsetMapping: disabled, and replication[].sink.offsets is not "
                "identical; expected either (positions translate through offset mappings, or "
                "stay as they are)"
            )
        self.cfg = cfg
        self.reader = PipelineReader(cfg)
        self.identical = cfg.replication.sink.offsets.identical
        self._router = cfg.topic_router()
        self._selection = cfg.topic_selection()
        self._timeout_s = cfg.target.connect_timeout.total_seconds()
        self._progress: dict[TP, ProgressRecord] | None = None
        self._store: MappingStore | None = None
        self._runs: RunReader | None = None

    def target_topic(self, topic: str) -> str | None:
        """The target topic ``topic`` is copied to; None when the pipeline does not copy it."""
        if not self._selection.should_replicate(topic):
            return None
        return self._router.route(topic)

    def check_topics(self, topics: set[str]) -> None:
        """Refuse topics the pipeline does not copy (asks no cluster)."""
        unknown = sorted(t for t in topics if self.target_topic(t) is None)
        if unknown:
            raise OffsetMappingError(
                f"topic(s) {', '.join(unknown)} are not replicated by pipeline "
                f"{self.cfg.name!r}; expected only topics it copies (its topic selection "
                "and routing)"
            )

    def translate(self, positions: Mapping[TP, int]) -> Translated:
        """Every position of ``positions`` on the target; one error naming what cannot be
        translated (topics not replicated, positions no mapping covers)."""
        self.check_topics({t for t, _ in positions})
        out = Translated()
        rest: dict[TP, int] = {}
        for tp, position in sorted(positions.items()):
            kept = self._kept(tp, position)
            if kept is None:
                rest[tp] = position
            else:
                out.moved[tp] = kept
        if rest:
            out.moved.update(self._mapped(rest))
        out.ahead = self._ahead(out.moved)
        return out

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._runs is not None:
            self._runs.close()

    def _kept(self, tp: TP, position: int) -> Moved | None:
        """The position itself on an identical partition (Spark's ``-1``/``-2``, latest
        and earliest, keep their meaning everywhere); None where mappings must translate."""
        target = (self.target_topic(tp[0]) or tp[0], tp[1])
        if position < 0:
            return Moved(target, position, IDENTICAL)
        if not self.identical:
            return None
        rec = self.progress().get(tp)
        ended = rec.mapped_from if rec is not None else None
        return Moved(target, position, IDENTICAL) if ended is None or position < ended else None

    def progress(self) -> dict[TP, ProgressRecord]:
        if self._progress is None:
            self._progress = self.reader.progress()
        return self._progress

    def _mapped(self, positions: dict[TP, int]) -> dict[TP, Moved]:
        if self._store is None:
            self._store = MappingStore(
                self.cfg.control_consumer(), self.cfg.offset_mapping.topic, self._timeout_s
            )
            self._runs = RunReader(self.cfg.target_client("consumer"), self._timeout_s)
        self._store.catch_up()
        return self._through_mappings(positions)

    def _through_mappings(self, positions: dict[TP, int]) -> dict[TP, Moved]:
        assert self._store is not None and self._runs is not None
        out: dict[TP, Moved] = {}
        uncovered: list[TP] = []
        for tp, position in positions.items():
            index = self._store.indexes(tp).get(self.cfg.name)
            if index is not None and len(index.targets) > 1:
                raise OffsetMappingError(
                    f"{tp[0]}[{tp[1]}]: its records went to several target partitions "
                    f"({', '.join(f'{t}[{p}]' for t, p in sorted(index.targets))}), so one "
                    "position cannot be translated; expected partition: source routing"
                )
            found = index.translate(position) if index is not None else None
            if found is None:
                uncovered.append(tp)
                continue
            found = self._runs.resolve(found, position)
            out[tp] = Moved(found.target, found.offset, MAPPED if found.exact else LOWER_BOUND)
        if uncovered:
            raise OffsetMappingError(
                f"{named(uncovered)}: no offset mapping of pipeline {self.cfg.name!r} covers "
                f"the position ({', '.join(str(positions[tp]) for tp in sorted(uncovered)[:3])}"
                "): older than the oldest mapping kept, or never copied; expected positions "
                "the pipeline copied while writing offset mappings"
            )
        return out

    def _ahead(self, moved: dict[TP, Moved]) -> dict[TP, tuple[int, int]]:
        """Identical positions past the target's end: the pipeline has not copied there yet."""
        kept = {tp: m for tp, m in moved.items() if m.how == IDENTICAL and m.offset >= 0}
        if not kept:
            return {}
        ends = self.reader.target.offsets([m.target for m in kept.values()], "latest")
        return {
            tp: (m.offset, ends[m.target])
            for tp, m in kept.items()
            if m.target in ends and m.offset > ends[m.target]
        }
