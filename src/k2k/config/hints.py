"""Per-field hints shared by error messages and the generated reference (``docs/config.md``).

A :class:`FieldDoc` rides in a field's ``Annotated`` metadata. Keeping the human phrasing of a
type next to the type means an error message ("expected a duration such as '2 seconds'") and
the reference table cannot describe the same field differently.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FieldDoc"]


@dataclass(frozen=True)
class FieldDoc:
    """How to name a field's type in the docs (``type``) and what to ask for in errors."""

    type: str
    expected: str
