"""The rewind guard kept in the metadata of the offsets the app commits on the target.

Kafka stores a free string with every committed offset. The app writes
``<offsetGuardPrefix>`` followed by canonical JSON ``{"v":1,"src":[[topic,partition,offset],
...]}``: the source positions the target offset was translated from (several when more
than one source partition feeds the target partition). With ``applyMappingsGuard`` enabled
a new target offset below the committed one is written only when the guard proves that the
source group itself moved back; so an app that restarted and has not read every mapping
yet, or a stale instance, cannot rewind a group (docs/offset-mapping.md#the-guard).

>>> g = Guard({("orders", 0): 42})
>>> text = g.encode("k2k_")
>>> text
'k2k_{"src":[["orders",0,42]],"v":1}'
>>> Guard.decode(text, "k2k_") == g
True
>>> Guard.decode("app-metadata", "k2k_") is None
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from k2k.formats.codec import dumps_canonical

__all__ = ["Guard", "may_commit"]

VERSION = 1


@dataclass(frozen=True, slots=True)
class Guard:
    #: The source positions the target offset was translated from.
    sources: dict[tuple[str, int], int]

    def encode(self, prefix: str) -> str:
        src = [[t, p, o] for (t, p), o in sorted(self.sources.items())]
        return prefix + dumps_canonical({"v": VERSION, "src": src}).decode()

    @classmethod
    def decode(cls, metadata: str | None, prefix: str) -> Guard | None:
        """The guard in ``metadata``, or None when it holds none (another writer's commit,
        or a format this k2k does not read)."""
        if not metadata or not metadata.startswith(prefix):
            return None
        try:
            obj = json.loads(metadata[len(prefix) :])
            if obj.get("v") != VERSION:
                return None
            return cls({(str(t), int(p)): int(o) for t, p, o in obj["src"]})
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def may_commit(new_offset: int, new: Guard, old_offset: int | None, old: Guard | None) -> bool:
    """Whether the guard lets ``new_offset`` replace the committed ``old_offset``.

    Forward (or a first commit) always; backwards only when a source position the old
    commit was translated from has itself moved back.

    >>> may_commit(90, Guard({("s", 0): 10}), 100, Guard({("s", 0): 12}))
    True
    >>> may_commit(90, Guard({("s", 0): 12}), 100, Guard({("s", 0): 12}))
    False
    >>> may_commit(90, Guard({("s", 0): 12}), 100, None)
    False
    """
    if old_offset is None or new_offset >= old_offset:
        return True
    if old is None:
        return False
    return any(new.sources.get(tp, pos) < pos for tp, pos in old.sources.items())
