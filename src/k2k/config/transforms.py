"""``replication[].transforms``: the ordered steps applied to every record between source
and sink (filters, header and JSON-field rewrites), as the user wrote them.

Every expression is compiled here, when the file is loaded, so that a typo is a one-line
config error naming the step; the executable form of the steps lives in
:mod:`k2k.stages.transforms`, compiled once per topic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import cel
from pydantic import (
    BeforeValidator,
    Field,
    SecretStr,
    field_validator,
    model_serializer,
    model_validator,
)

from k2k.config.base import K2KModel
from k2k.config.errors import describe, problems_error, suggest_key
from k2k.config.hints import FieldDoc

__all__ = [
    "EXPRESSION_VARIABLES",
    "STEP_KINDS",
    "STEP_MODELS",
    "ConditionalStep",
    "DropFields",
    "DropHeaders",
    "Filter",
    "InsertField",
    "InsertHeader",
    "JsonStep",
    "KeepFields",
    "MaskFields",
    "RenameFields",
    "RenameHeaders",
    "Step",
    "TransformStep",
    "check_expression",
]

#: What an expression may name (docs/transforms.md#expressions).
EXPRESSION_VARIABLES = (
    "topic",
    "targetTopic",
    "partition",
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
    "keyJson",
    "valueJson",
)
_EXPRESSION_EXPECTED = "a CEL expression over " + ", ".join(EXPRESSION_VARIABLES)
_OnError = Annotated[
    Literal["fail", "skip"],
    FieldDoc("fail | skip", "fail (stop, naming the record) or skip (leave the record out)"),
]
_NonJson = Annotated[
    Literal["fail", "pass"],
    FieldDoc("fail | pass", "fail (stop, naming the record) or pass (copy it unchanged)"),
]


def check_expression(source: str) -> str | None:
    """Why ``source`` is not a usable expression, or None when it is."""
    try:
        program = cel.compile(source)
    except (ValueError, RuntimeError) as exc:
        first = next((line for line in str(exc).splitlines() if "ERROR" in line), str(exc))
        return "does not compile: " + first.split("ERROR: <input>:", 1)[-1].strip()
    # Names bound by a comprehension (``headers.exists(h, ...)``) are listed as variables too.
    bound = set(re.findall(r"\b(?:all|exists|exists_one|map|filter)\s*\(\s*(\w+)\s*,", source))
    unknown = sorted(set(program.variables()) - set(EXPRESSION_VARIABLES) - bound)
    if unknown:
        return "names unknown " + ", ".join(repr(name) for name in unknown)
    return None


def _expression(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise problems_error(
            [((), describe("not an expression", got=value, expected=_EXPRESSION_EXPECTED))]
        )
    why = check_expression(value)
    if why is not None:
        raise problems_error([((), describe(f"expression {why}", expected=_EXPRESSION_EXPECTED))])
    return value


Expression = Annotated[
    str, BeforeValidator(_expression), FieldDoc("CEL expression", _EXPRESSION_EXPECTED)
]


def _one_of(first: object, second: object, what: str, choices: str) -> None:
    """Refuse a step that sets both or neither of two exclusive keys."""
    if (first is None) == (second is None):
        expected = f"either {choices}, not both"
        raise problems_error([((), describe(what, expected=expected))])


_FIELD_EXPECTED = "a dotted path starting with key. or value., e.g. value.customer.email"


def _field_path(value: Any) -> str:
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) < 2 or parts[0] not in ("key", "value") or not all(parts):
        raise problems_error(
            [((), describe("not a field path", got=value, expected=_FIELD_EXPECTED))]
        )
    return str(value)


FieldPath = Annotated[str, BeforeValidator(_field_path), FieldDoc("field path", _FIELD_EXPECTED)]


class ConditionalStep(K2KModel):
    """What every step but ``filter`` has: a condition and what a failure does."""

    kind: ClassVar[str]
    when: Expression | None = Field(
        None,
        description="Apply the step only to records for which this expression is true "
        "(evaluated once per topic when it names only `topic`); null: every record.",
    )
    on_error: _OnError = Field(
        "fail",
        description="The step fails on a record (an expression error, a value it cannot "
        "rewrite): `fail` stops the runner with one line naming the record "
        "(`topic[partition]@offset`), the step and the reason; `skip` leaves the record out "
        "of the copy (counted in `k2k.transform.records` with `outcome: failed`).",
    )


class JsonStep(ConditionalStep):
    """A step that rewrites JSON keys or values."""

    non_json: _NonJson = Field(
        "fail",
        description="A key or value the step must rewrite is not JSON (a null value, a "
        "tombstone, passes unchanged): `fail` stops with one line naming the record; `pass` "
        "copies it unchanged.",
    )


class Filter(K2KModel):
    """``filter``: drop the records for which ``drop`` holds, or keep only those for which
    ``keep`` holds (exactly one of the two)."""

    kind: ClassVar[str] = "filter"
    drop: Expression | None = Field(
        None, description="Records for which this is true are not copied."
    )
    keep: Expression | None = Field(
        None, description="Only records for which this is true are copied."
    )
    on_error: _OnError = Field(
        "fail",
        description="The expression fails on a record (e.g. it reads a header the record "
        "lacks: write `has(headers.env) && ...`), or is not true or false: `fail` stops with "
        "one line naming the record; `skip` leaves the record out.",
    )

    @model_validator(mode="after")
    def _one_condition(self) -> Filter:
        _one_of(self.drop, self.keep, "needs a condition", "drop: EXPR or keep: EXPR")
        return self

    @property
    def drops(self) -> bool:
        """Whether records for which the predicate holds are dropped (else kept)."""
        return self.drop is not None

    @property
    def predicate(self) -> str:
        return self.drop if self.drop is not None else str(self.keep)


class InsertHeader(ConditionalStep):
    """``insertHeader``: add a header (after the record's own), a fixed value or an
    expression's result as text."""

    kind: ClassVar[str] = "insertHeader"
    name: str = Field(min_length=1, description="The header's name.")
    value: str | None = Field(None, description="A fixed value (UTF-8).")
    expression: Expression | None = Field(
        None, description="An expression whose result, as text, is the value (not with `value`)."
    )

    @model_validator(mode="after")
    def _one_value(self) -> InsertHeader:
        _one_of(self.value, self.expression, "needs a value", "value: TEXT or expression: EXPR")
        return self


class DropHeaders(ConditionalStep):
    """``dropHeaders``: remove headers by name or by a regular expression over the name."""

    kind: ClassVar[str] = "dropHeaders"
    names: list[str] = Field(default_factory=list, description="Header names to remove.")
    pattern: str | None = Field(
        None, description="A regular expression matched against whole header names."
    )

    @field_validator("pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise problems_error(
                    [((), describe(f"not a regular expression ({exc})", got=value))]
                ) from None
        return value

    @model_validator(mode="after")
    def _something(self) -> DropHeaders:
        if not self.names and self.pattern is None:
            raise problems_error([((), describe("drops nothing", expected="names or pattern"))])
        return self


class RenameHeaders(ConditionalStep):
    """``renameHeaders``: rename headers (every header of that name)."""

    kind: ClassVar[str] = "renameHeaders"
    names: dict[str, str] = Field(min_length=1, description="Old name: new name.")


class DropFields(JsonStep):
    """``dropFields``: remove fields from JSON keys or values (absent fields are no error)."""

    kind: ClassVar[str] = "dropFields"
    fields: list[FieldPath] = Field(
        min_length=1, description="Field paths, e.g. `value.card.number`."
    )


class KeepFields(JsonStep):
    """``keepFields``: keep only these fields of their objects (Kafka Connect ReplaceField's
    ``include``); fields of other objects are untouched."""

    kind: ClassVar[str] = "keepFields"
    fields: list[FieldPath] = Field(min_length=1, description="Field paths, e.g. `value.id`.")


class MaskFields(JsonStep):
    """``maskFields``: replace the values of JSON fields: with the empty value of their type
    (`0`, `""`, `false`, `[]`, `{}`, as Kafka Connect's MaskField), with ``replacement``, or
    with a keyed hash (HMAC-SHA256, hex) so that equal values stay equal and joins still
    work."""

    kind: ClassVar[str] = "maskFields"
    fields: list[FieldPath] = Field(min_length=1, description="Field paths, e.g. `value.email`.")
    replacement: str | None = Field(
        None,
        description="Text that replaces the value (for a number or boolean field, its value "
        "as that type, as MaskField's `replacement`); null: the type's empty value.",
    )
    hash_secret: SecretStr | None = Field(
        None,
        description="Replace each value with the HMAC-SHA256 of its JSON text under this key, "
        "in hex (not with `replacement`); keep it out of the file with a placeholder "
        "(`${env:MASK_KEY}`).",
    )

    @model_validator(mode="after")
    def _one_mask(self) -> MaskFields:
        if self.replacement is not None and self.hash_secret is not None:
            raise problems_error(
                [((), describe("both replacement and hashSecret", expected="at most one"))]
            )
        return self


class RenameFields(JsonStep):
    """``renameFields``: rename JSON fields in place (the new name is in the same object)."""

    kind: ClassVar[str] = "renameFields"
    fields: dict[FieldPath, str] = Field(
        min_length=1, description="Field path: new name, e.g. `value.cust: customer`."
    )


class InsertField(JsonStep):
    """``insertField``: set a JSON field to a fixed value (objects on the way are created)."""

    kind: ClassVar[str] = "insertField"
    field: FieldPath = Field(description="The field's path, e.g. `value.origin`.")
    value: str | int | float | bool | None = Field(description="The value (any JSON scalar).")


Step = (
    Filter
    | InsertHeader
    | DropHeaders
    | RenameHeaders
    | DropFields
    | KeepFields
    | MaskFields
    | RenameFields
    | InsertField
)
STEP_MODELS: tuple[type[Filter | JsonStep | ConditionalStep], ...] = (
    Filter,
    InsertHeader,
    DropHeaders,
    RenameHeaders,
    DropFields,
    KeepFields,
    MaskFields,
    RenameFields,
    InsertField,
)
STEP_KINDS: tuple[str, ...] = tuple(model.kind for model in STEP_MODELS)
_STEP_EXPECTED = "one key naming the step: " + ", ".join(STEP_KINDS)


class TransformStep(K2KModel):
    """One item of ``replication[].transforms``: a single key naming the step."""

    filter: Filter | None = Field(None, description="Drop or keep records by a condition.")
    insert_header: InsertHeader | None = Field(None, description="Add a header.")
    drop_headers: DropHeaders | None = Field(None, description="Remove headers.")
    rename_headers: RenameHeaders | None = Field(None, description="Rename headers.")
    drop_fields: DropFields | None = Field(None, description="Remove JSON fields.")
    keep_fields: KeepFields | None = Field(None, description="Keep only these JSON fields.")
    mask_fields: MaskFields | None = Field(None, description="Mask JSON fields.")
    rename_fields: RenameFields | None = Field(None, description="Rename JSON fields.")
    insert_field: InsertField | None = Field(None, description="Set a JSON field.")

    @model_validator(mode="before")
    @classmethod
    def _single_key(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or len(data) != 1:
            raise problems_error(
                [((), describe("not a single-key step", got=data, expected=_STEP_EXPECTED))]
            )
        ((kind, _),) = data.items()
        known = {*STEP_KINDS, *(_snake(k) for k in STEP_KINDS)}
        if kind not in known:
            raise problems_error([((str(kind),), suggest_key(str(kind), list(STEP_KINDS)))])
        return data

    @property
    def step(self) -> Step:
        """The step this item names."""
        return next(
            v for v in (getattr(self, name) for name in type(self).model_fields) if v is not None
        )

    @model_serializer(mode="wrap")
    def _one_key(self, handler: Any) -> Any:
        return {k: v for k, v in handler(self).items() if v is not None}


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)
