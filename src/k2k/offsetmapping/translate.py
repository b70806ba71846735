"""One consumer group's source positions, translated into target offsets.

Pure: given where the group stands on the source and the indexes of the mappings, what it
should commit on the target, and what could not be translated and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from k2k.kafka import TP
from k2k.offsetmapping.index import PartitionIndex, Span, Translation

__all__ = ["GroupPlan", "plan_group"]


@dataclass(slots=True)
class GroupPlan:
    #: target partition -> offset to commit.
    offsets: dict[TP, int] = field(default_factory=dict)
    #: target partition -> the source positions it was translated from (the guard).
    sources: dict[TP, dict[TP, int]] = field(default_factory=dict)
    #: Source partitions before the oldest mapping (nothing says where they continue).
    untranslated: list[TP] = field(default_factory=list)
    #: Source partition -> the target partitions its records went to, when several.
    multiple: dict[TP, list[TP]] = field(default_factory=dict)
    #: Translations that are lower bounds (records may be read again, none skipped).
    inexact: int = 0
    #: The spans the translations came from (retention keeps them).
    needed: list[Span] = field(default_factory=list)


def plan_group(
    positions: Mapping[TP, int],
    indexes: Callable[[TP], Mapping[str, PartitionIndex]],
    resolve: Callable[[Translation, int], Translation] | None = None,
) -> GroupPlan:
    """Translate every source position of one group that has mappings; ``resolve`` may
    make a lower bound exact (see :mod:`k2k.offsetmapping.resolve`).

    Several source partitions feeding one target partition (routing many topics into one)
    commit the lowest of their translations: the others' records are read again there,
    none is skipped.
    """
    plan = GroupPlan()
    for tp, position in sorted(positions.items()):
        by_pipeline = indexes(tp)
        if not by_pipeline:
            continue  # not replicated (by any pipeline the mappings know)
        targets = {t for index in by_pipeline.values() for t in index.targets}
        if len(by_pipeline) > 1 or len(targets) > 1:
            plan.multiple[tp] = sorted(targets)
            continue
        (index,) = by_pipeline.values()
        found = index.translate(position)
        if found is None:
            plan.untranslated.append(tp)
            continue
        plan.needed.append(found.span)
        if not found.exact and resolve is not None:
            found = resolve(found, position)
        if not found.exact:
            plan.inexact += 1
        previous = plan.offsets.get(found.target)
        if previous is None or found.offset < previous:
            plan.offsets[found.target] = found.offset
        plan.sources.setdefault(found.target, {})[tp] = position
    return plan
