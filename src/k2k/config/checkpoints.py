"""``checkpoints``: MirrorMaker 2 checkpoints emitted into the target (``features.checkpoints``).

Every ``interval`` the pipeline's driver translates the committed offsets of the selected
source consumer groups through k2k's offset mappings and writes them, in MM2's checkpoint
format, to the target's ``<source alias>.checkpoints.internal``, so that applications using
MM2's ``RemoteClusterUtils.translateOffsets`` fail over unchanged (docs/mm2.md#checkpoints).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import Field, field_validator

from k2k.config.base import K2KModel
from k2k.config.errors import describe
from k2k.config.fields import Duration, regex_or_names
from k2k.config.hints import FieldDoc
from k2k.stages.selection import NameSelection

__all__ = [
    "GROUPS_EXPECTED",
    "Checkpoints",
    "GroupSelection",
    "SyncGroupOffsets",
    "checkpoints_topic",
    "group_selection",
]

GROUPS_EXPECTED = (
    "a regular expression matched against whole group names, or a list of exact group names"
)
#: MM2's default ``groups.exclude``: console consumers, Connect's workers, internal groups.
_MM2_GROUPS_EXCLUDE = "console-consumer-.*|connect-.*|__.*"


def _group_name_problem(name: Any) -> str | None:
    if isinstance(name, str) and name:
        return None
    return describe("not a group name", got=name, expected="a non-empty string")


def group_selection(value: Any) -> str | list[str]:
    """A group selection's value: a valid regex string, or a non-empty list of group names."""
    return regex_or_names(value, GROUPS_EXPECTED, _group_name_problem)


def checkpoints_topic(source_alias: str, separator: str) -> str:
    """MM2's checkpoints topic for a source alias (``DefaultReplicationPolicy.
    checkpointsTopic`` with its internal-topic separator on, MM2's default).

    >>> checkpoints_topic("A", "."), checkpoints_topic("A", "_")
    ('A.checkpoints.internal', 'A_checkpoints_internal')
    """
    return f"{source_alias}{separator}checkpoints{separator}internal"


class GroupSelection(K2KModel):
    """Which source consumer groups a service reads (MM2's ``groups`` / ``groups.exclude``)."""

    groups: Annotated[
        str | list[str], FieldDoc("regex string | list of group names", GROUPS_EXPECTED)
    ] = Field(
        ".*",
        description="Source consumer groups (MM2's `groups`): a regular expression (Python "
        "`re` syntax) matched against the whole group name, or a list of exact group names.",
    )
    groups_exclude: Annotated[
        str | list[str] | None,
        FieldDoc("regex string | list of group names | null", GROUPS_EXPECTED),
    ] = Field(
        _MM2_GROUPS_EXCLUDE,
        description="Groups left out although `groups` selects them (MM2's `groups.exclude`, "
        "same default): a regular expression matched against the whole group name, or a list "
        "of exact group names; exclude wins; null excludes nothing.",
    )

    @field_validator("groups", mode="before")
    @classmethod
    def _selection(cls, value: Any) -> str | list[str]:
        return group_selection(value)

    @field_validator("groups_exclude", mode="before")
    @classmethod
    def _exclusion(cls, value: Any) -> str | list[str] | None:
        return None if value is None else group_selection(value)

    def selects(self, group: str) -> bool:
        """True when ``group`` is selected.

        >>> c = Checkpoints()
        >>> c.selects("orders-app"), c.selects("console-consumer-42"), c.selects("__k2k")
        (True, False, False)
        """
        if self.groups_exclude is not None and NameSelection(self.groups_exclude).match(group):
            return False
        return NameSelection(self.groups).match(group)

    def pattern(self) -> str:
        """The selection as one regular expression over whole group names.

        >>> print(GroupSelection(groups=["a.b", "c"], groups_exclude="c").pattern())
        (?!(?:c)$)(?:a\\.b|c)
        """
        include = _alternatives(self.groups)
        if self.groups_exclude is None:
            return f"(?:{include})"
        return f"(?!(?:{_alternatives(self.groups_exclude)})$)(?:{include})"


def _alternatives(selection: str | list[str]) -> str:
    return selection if isinstance(selection, str) else "|".join(map(re.escape, selection))


class Checkpoints(GroupSelection):
    """How often checkpoints are emitted (``features.checkpoints``), and for which groups."""

    interval: Duration = Field(
        timedelta(seconds=60),
        description="Time between two checkpoint passes (MM2's "
        "`emit.checkpoints.interval.seconds`, default 60 s). A pass reads the selected groups' "
        "committed offsets on the source and writes the checkpoints that changed.",
    )


class SyncGroupOffsets(GroupSelection):
    """How often the selected groups' offsets are committed on the target
    (``features.syncGroupOffsets``, MM2's ``sync.group.offsets.enabled``)."""

    interval: Duration = Field(
        timedelta(seconds=60),
        description="Time between two passes (MM2's `sync.group.offsets.interval.seconds`, "
        "default 60 s). A pass translates the selected source groups' committed offsets "
        "through the offset mappings and commits them to the target's groups of the same "
        "name, as the Offset Mapping app does; a group with members on the target is left "
        "alone and logged, and retried next pass (MM2's behaviour).",
    )
