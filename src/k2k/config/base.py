"""The base of every configuration section, shared by the replicator and the Offset Mapping app.

Kept apart from :mod:`k2k.config.model` so that sections used by both configurations
(:mod:`k2k.config.topics`, :mod:`k2k.config.mapping`) need not import the replicator's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from k2k.config.errors import Problem, describe, problems_error
from k2k.config.hints import FieldDoc

__all__ = ["K2KModel", "Policy", "one_spelling", "raise_problems"]

#: What to do with a control record that cannot be read, or a sync that times out: the one
#: spelling, which coordination and the lease spec import for their annotations.
Policy = Annotated[Literal["fail", "ignore"], FieldDoc("fail | ignore", "one of: fail, ignore")]


class K2KModel(BaseModel):
    """Base of every section: camelCase YAML keys, unknown keys refused, immutable."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=to_camel, frozen=True
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_section(cls, data: Any) -> Any:
        # `features:` followed only by comments is YAML null; it means "all defaults".
        return {} if data is None else data


def raise_problems(problems: list[Problem]) -> None:
    """Raise every problem at once (from a validator); do nothing when there is none."""
    if problems:
        raise problems_error(problems)


def one_spelling(data: Any, spellings: Mapping[str, tuple[str, ...]]) -> None:
    """Refuse a mapping that gives one key in two of its accepted spellings.

    ``spellings`` maps a field's name to the keys that set it (``AliasChoices``). Without this
    check pydantic would take one spelling and call the other an unknown key.
    """
    if not isinstance(data, dict):
        return
    problems: list[Problem] = []
    for choices in spellings.values():
        given = [key for key in choices if key in data]
        for key in given[1:]:
            what = f"the same setting as {given[0]!r}, given twice"
            problems.append(((key,), describe(what, got=data[key], expected="one spelling")))
    raise_problems(problems)


def license_field() -> Any:
    """K2K's ``license`` block: accepted, never shown, never used (no feature is gated)."""
    return Field(
        None,
        repr=False,
        exclude=True,
        description="K2K's license block. Accepted and ignored: k2k is open software and no "
        "feature is gated.",
    )
