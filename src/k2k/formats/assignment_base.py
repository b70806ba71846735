"""What every kind of assignment-topic record shares: the key layout and the version checks.

Its own module so that kinds defined elsewhere (:mod:`k2k.formats.cutover`) can share it
without importing :mod:`k2k.formats.assignment`, which registers them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from k2k.errors import ControlRecordError
from k2k.formats.codec import check_version, dumps_canonical, load_object

__all__ = ["KEY_VERSION", "AssignmentFormat"]


#: Version of the assignment key format (``k``). Separate from the value versions so that a
#: new value format keeps the key bytes, which compaction compares.
KEY_VERSION = 1


class AssignmentFormat:
    """What every kind shares: the key layout, the version checks and ``decode``."""

    __slots__ = ()

    KIND: ClassVar[str]
    VERSION: ClassVar[int]

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None, where: str) -> Self:
        """Decode one record of this kind read at ``where`` (``topic[partition]@offset``).

        Raises :class:`ControlRecordError` naming ``where`` when the record is of another
        kind, a tombstone, of an unknown version, or malformed.
        """
        k = load_object(key, "key", where)
        if k.get("kind") != cls.KIND:
            raise ControlRecordError(
                f"{where}: kind {k.get('kind')!r} where kind {cls.KIND!r} was expected"
            )
        check_version(k.get("k"), KEY_VERSION, f"{cls.KIND} key", where, "upgrade k2k")
        return cls.parse(k, value, where)

    @classmethod
    def parse(cls, key: dict[str, Any], value: bytes | None, where: str) -> Self:
        v = load_object(value, "value", where)
        check_version(v.get("v"), cls.VERSION, f"{cls.KIND} value", where, "upgrade k2k")
        try:
            return cls._from_fields(key, v)
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlRecordError(f"{where}: malformed assignment record ({exc!r})") from None

    @classmethod
    def _from_fields(cls, key: dict[str, Any], value: dict[str, Any]) -> Self:
        """The record from its decoded key and value (KeyError/TypeError/ValueError when a
        field is missing or of the wrong type)."""
        raise NotImplementedError

    @classmethod
    def _key(cls, group: str, **names: Any) -> bytes:
        return dumps_canonical({"k": KEY_VERSION, "kind": cls.KIND, "group": group, **names})

    @classmethod
    def _value(cls, **fields: Any) -> bytes:
        return dumps_canonical({"v": cls.VERSION, **fields})
