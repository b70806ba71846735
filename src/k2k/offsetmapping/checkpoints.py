"""One consumer group's source positions as MirrorMaker 2 checkpoints.

Pure: the translation is the Offset Mapping app's (:func:`~k2k.offsetmapping.translate.
plan_group` over one pipeline's mappings, made exact by the same resolver); this module only
says which translations become checkpoints, and which checkpoints are worth writing again.

A checkpoint names one *target* partition and carries one upstream offset, so a target
partition fed by several source partitions (many topics routed into one) gets none: MM2's
format cannot say which source position it came from. Source partitions whose records went to
several target partitions are not translated by :func:`plan_group` either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from k2k.formats.checkpoint import Checkpoint
from k2k.kafka import TP
from k2k.kafka.groups import Committed
from k2k.offsetmapping.index import PartitionIndex, Translation
from k2k.offsetmapping.translate import plan_group

__all__ = ["GroupCheckpoints", "LastCheckpoints", "group_checkpoints"]


@dataclass(slots=True)
class GroupCheckpoints:
    checkpoints: list[Checkpoint] = field(default_factory=list)
    #: Target partitions fed by several source partitions (no checkpoint).
    shared: list[TP] = field(default_factory=list)
    #: Source partitions before the oldest mapping, or replicated to several targets.
    untranslated: list[TP] = field(default_factory=list)


def group_checkpoints(
    group: str,
    committed: Mapping[TP, Committed],
    indexes: Callable[[TP], Mapping[str, PartitionIndex]],
    resolve: Callable[[Translation, int], Translation] | None = None,
) -> GroupCheckpoints:
    """The checkpoints of ``group`` from its committed source offsets (and their metadata).

    >>> from k2k.formats.offset_mapping import OffsetMappingRecord
    >>> idx = PartitionIndex()
    >>> idx.add(OffsetMappingRecord("p", "s", 0, 0, 0, 10, "A.s", 0, 100, 109, 0), (0, 0))
    >>> group_checkpoints("g", {("s", 0): (4, "m"), ("t", 0): (1, "")},
    ...                   lambda tp: {"p": idx} if tp == ("s", 0) else {}).checkpoints
    [Checkpoint(g A.s[0]: 4 -> 104)]
    """
    plan = plan_group({tp: offset for tp, (offset, _) in committed.items()}, indexes, resolve)
    out = GroupCheckpoints(untranslated=plan.untranslated + sorted(plan.multiple))
    for target, downstream in sorted(plan.offsets.items()):
        sources = plan.sources[target]
        if len(sources) != 1:
            out.shared.append(target)
            continue
        ((source, upstream),) = sources.items()
        metadata = committed[source][1] or ""
        out.checkpoints.append(Checkpoint(group, *target, upstream, downstream, metadata))
    return out


class LastCheckpoints:
    """The newest checkpoint written per (group, target partition), and MM2's rule for the
    next one (``MirrorCheckpointTask.checkpointIsMoreRecent``): write it when it is the
    first, when the group moved back on the source (a reset must be followed), or when the
    translated offset moved forward; never move a checkpoint back otherwise, and never
    repeat one.

    Invariant: for every key, the kept checkpoint is the last one :meth:`worth_writing`
    accepted and :meth:`written` recorded.

    >>> last = LastCheckpoints()
    >>> c = Checkpoint("g", "A.s", 0, 10, 110)
    >>> last.worth_writing(c); last.written(c)
    True
    >>> [last.worth_writing(Checkpoint("g", "A.s", 0, u, d)) for u, d in
    ...  [(10, 110), (11, 109), (12, 112), (5, 105)]]
    [False, False, True, True]
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[tuple[str, str, int], Checkpoint] = {}

    def worth_writing(self, new: Checkpoint) -> bool:
        old = self._last.get((new.group, new.topic, new.partition))
        if old is None:
            return True
        if new.upstream_offset < old.upstream_offset:
            return True
        return new.downstream_offset > old.downstream_offset

    def written(self, checkpoint: Checkpoint) -> None:
        self._last[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
