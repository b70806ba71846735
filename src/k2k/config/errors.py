"""Turn validation failures into one line per problem, in the user's words.

Every line reads ``<key.path as written in YAML>: <what is wrong>, got <value>; expected <what
would be right>``. The path uses the camelCase keys of the file, list items as ``[i]``; the value
is a ``repr`` with secrets masked; pydantic's own wording, types and URLs never show, because
the person reading is editing a YAML file, not debugging Python.

Validators inside the config package report problems by raising :func:`problems_error`, which
carries any number of ``(relative path, text)`` pairs in one pydantic error; the formatter
expands them under the location pydantic reports. That is how one cluster check can report
every bad Kafka property at once.

>>> describe("too small", got=0, expected="an integer >= 1")
'too small, got 0; expected an integer >= 1'
>>> dotted(("replication", 0, "source", "topic"))
'replication[0].source.topic'
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import AliasChoices, BaseModel, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from k2k.config.hints import FieldDoc
from k2k.config.secrets import MASK, is_secret_key, mask_tree

__all__ = [
    "ERROR_TYPE",
    "Path",
    "Problem",
    "describe",
    "dotted",
    "format_validation_error",
    "problems_error",
    "show",
    "suggest_key",
]

Path = tuple[str | int, ...]
Problem = tuple[Path, str]

#: The pydantic error type used by k2k's own validators.
ERROR_TYPE = "k2k"

_NOTHING: Any = object()
_MAX_SHOWN = 120


def show(value: Any, *, secret: bool = False) -> str:
    """A short, masked ``repr`` of a user value.

    >>> show("abc"), show("abc", secret=True), show({"sasl.password": "p"})
    ("'abc'", "'******'", "{'sasl.password': '******'}")
    """
    if secret or isinstance(value, SecretStr):
        return repr(MASK)
    text = repr(mask_tree(value))
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def describe(
    what: str, *, got: Any = _NOTHING, expected: str | None = None, secret: bool = False
) -> str:
    """The text after ``<path>: `` in the house style."""
    text = what
    if got is not _NOTHING:
        text += f", got {show(got, secret=secret)}"
    if expected:
        text += f"; expected {expected}"
    return text


def dotted(path: Iterable[str | int]) -> str:
    """A key path as the user would point at it in the YAML file."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def problems_error(problems: Sequence[Problem]) -> PydanticCustomError:
    """A pydantic error carrying several k2k problems; raise it from a validator."""
    summary = "; ".join(f"{dotted(path) or '(here)'}: {text}" for path, text in problems)
    return PydanticCustomError(
        ERROR_TYPE, "{summary}", {"summary": summary, "problems": tuple(problems)}
    )


def suggest_key(key: str, allowed: Iterable[str]) -> str:
    """The ``unknown key`` sentence: the closest allowed key, or all of them.

    >>> suggest_key("exactlyOnse", ["exactlyOnce", "offsetMapping"])
    "unknown key; did you mean 'exactlyOnce'?"
    >>> suggest_key("zzz", ["a", "b"])
    'unknown key; expected one of: a, b'
    """
    allowed = list(allowed)
    folded = {_fold(name): name for name in allowed}
    if _fold(key) in folded:
        return f"unknown key; did you mean {folded[_fold(key)]!r}?"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; expected one of: {', '.join(allowed)}"


def _fold(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


# --- walking the model along an error location ------------------------------------------------


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``Optional`` so the walker sees the real container or model."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
            continue
        if origin in (Union, types.UnionType):
            members = [arg for arg in get_args(tp) if arg is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _model_field(model: type[BaseModel], key: object) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        choices = field.validation_alias
        other = choices.choices if isinstance(choices, AliasChoices) else ()
        if key in (name, field.alias) or key in other:
            return field
    return None


def _walk(root: type[BaseModel], loc: Sequence[str | int]) -> tuple[FieldInfo | None, Any]:
    """The field named by ``loc`` (None inside free mappings) and its type."""
    field: FieldInfo | None = None
    current: Any = root
    for part in loc:
        tp = _unwrap(current)
        origin = get_origin(tp)
        if _is_model(tp):
            field = _model_field(tp, part)
            if field is None:
                return None, None
            current = field.annotation
        elif origin is dict:
            field, current = None, get_args(tp)[1]
        elif origin is list:
            field, current = None, get_args(tp)[0]
        else:
            return None, None
    return field, current


def allowed_keys(root: type[BaseModel], loc: Sequence[str | int]) -> list[str] | None:
    """The keys accepted at the mapping that contains ``loc[-1]``, in model order."""
    _, tp = _walk(root, loc[:-1])
    tp = _unwrap(tp)
    if not _is_model(tp):
        return None
    return [field.alias or name for name, field in tp.model_fields.items()]


def _hint(field: FieldInfo | None) -> FieldDoc | None:
    if field is None:
        return None
    return next((m for m in field.metadata if isinstance(m, FieldDoc)), None)


def _expected_for(field: FieldInfo | None, tp: Any) -> str | None:
    hint = _hint(field)
    if hint is not None:
        return hint.expected
    tp = _unwrap(tp)
    if get_origin(tp) is Literal:
        return "one of: " + ", ".join(str(arg) for arg in get_args(tp))
    if _is_model(tp) or get_origin(tp) is dict:
        return "a mapping (key: value lines)"
    if get_origin(tp) is list:
        return "a list"
    return {int: "an integer", str: "a string", bool: "true or false"}.get(tp)


# --- pydantic error -> lines --------------------------------------------------------------------

_WHAT = {
    "missing": "missing",
    "extra_forbidden": "unknown key",
    "string_type": "wrong type",
    "int_type": "wrong type",
    "int_parsing": "not a whole number",
    "int_from_float": "not a whole number",
    "bool_type": "wrong type",
    "bool_parsing": "not true or false",
    "dict_type": "wrong type",
    "model_type": "wrong type",
    "model_attributes_type": "wrong type",
    "list_type": "wrong type",
    "literal_error": "invalid value",
    "string_too_short": "empty",
    "string_too_long": "too long",
    "string_pattern_mismatch": "invalid characters",
    "too_short": "too few items",
    "greater_than_equal": "too small",
    "greater_than": "too small",
    "less_than_equal": "too large",
    "less_than": "too large",
}


def _bound(kind: str, ctx: dict[str, Any]) -> str | None:
    symbols = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    for key, symbol in symbols.items():
        if key in ctx and kind.startswith(("greater", "less")):
            return f"a number {symbol} {ctx[key]}"
    return None


def _line(root: type[BaseModel], error: Any) -> list[str]:
    loc: Path = tuple(error["loc"])
    kind: str = error["type"]
    if kind == ERROR_TYPE:
        return [
            f"{dotted(loc + tuple(rel)) or '(top level)'}: {text}"
            for rel, text in error["ctx"]["problems"]
        ]
    path = dotted(loc) or "(top level)"
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = allowed_keys(root, loc)
        if allowed is None:
            return [f"{path}: unknown key"]
        return [f"{path}: {suggest_key(key, allowed)}"]
    field, tp = _walk(root, loc)
    expected = _bound(kind, error.get("ctx") or {}) or _expected_for(field, tp)
    if kind == "string_too_short":
        expected = "a non-empty value"
    if kind == "missing":
        return [f"{path}: missing" + (f"; expected {expected}" if expected else "")]
    secret = any(is_secret_key(part) for part in loc)
    what = _WHAT.get(kind) or error["msg"][:1].lower() + error["msg"][1:]
    return [f"{path}: {describe(what, got=error['input'], expected=expected, secret=secret)}"]


def format_validation_error(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """One line per problem in ``exc``, in file order where pydantic gives it, without repeats."""
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        for line in _line(root, error):
            if line not in lines:
                lines.append(line)
    return lines
