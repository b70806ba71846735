"""Keys a K2K file may hold that mean nothing to k2k: accepted, and named in one warning each.

K2K users bring their files unchanged, so keys whose K2K meaning has no counterpart here
(the ``license`` block, consumer-group settings of clients that k2k assigns partitions to
itself) must load; but a key that is read and silently ignored misleads whoever set it.
:func:`inert_keys` lists every such key the file sets, with why it has no effect;
``k2k validate`` prints them and ``k2k start`` logs them (docs/config.md#keys-with-no-effect).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from k2k.config.errors import dotted

__all__ = ["GROUP_PROPERTIES", "LICENSE", "ClientMap", "Inert", "inert_keys"]


@dataclass(frozen=True)
class Inert:
    """Field metadata: the key is accepted for K2K files and has no effect, because ``why``."""

    why: str


#: The ``license`` block of K2K files.
LICENSE = Inert("k2k is open software and no feature is gated")


@dataclass(frozen=True)
class ClientMap:
    """Field metadata: a map of Kafka client properties (checked for :data:`GROUP_PROPERTIES`)."""


_ASSIGNED = (
    "k2k assigns partitions to its consumers itself (members share the work through "
    "coordination.assignment.topic) and never commits offsets to a Kafka group"
)
#: Consumer-group properties: librdkafka accepts them, but a consumer that is assigned its
#: partitions and never commits uses none of them. (``group.id`` does count: librdkafka looks
#: up that group's coordinator, so it names the group the source's ACLs must let k2k describe.)
GROUP_PROPERTIES: dict[str, str] = {
    name: _ASSIGNED
    for name in (
        "group.instance.id",
        "group.protocol",
        "group.remote.assignor",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "auto.commit.interval.ms",
    )
}


def inert_keys(model: BaseModel) -> list[tuple[str, str]]:
    """(dotted key path, why it has no effect) for every inert key ``model`` was given."""
    return list(_walk(model, ()))


def _walk(model: BaseModel, path: tuple[str | int, ...]) -> Iterator[tuple[str, str]]:
    fields = type(model).model_fields
    for name in (n for n in fields if n in model.model_fields_set):
        field = fields[name]
        here = (*path, field.alias or name)
        inert = next((m for m in field.metadata if isinstance(m, Inert)), None)
        value = getattr(model, name)
        if inert is not None:
            yield dotted(here), inert.why
        elif any(isinstance(m, ClientMap) for m in field.metadata):
            yield from _client_keys(value, here)
        elif isinstance(value, BaseModel):
            yield from _walk(value, here)
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _walk(item, (*here, index))


def _client_keys(
    props: Mapping[str, Any], path: tuple[str | int, ...]
) -> Iterator[tuple[str, str]]:
    for key in props:
        why = GROUP_PROPERTIES.get(key)
        if why is not None:
            yield f"{dotted(path)}.{key}", why
