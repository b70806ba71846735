"""One MM2 flow's Kafka Connect transforms and predicates as ``replication[].transforms`` steps.

Read as MM2's ``MirrorMakerConfig`` hands them to the flow's connectors: the ``transforms``
and ``predicates`` lists from ``A->B.`` or else the top level, but each one's options
(``transforms.<name>.type`` ...) only as ``A->B.transforms.<name>.*``: of the top level it
keeps only keys the connector defines. Field transforms get the semantics Connect gives
schemaless maps, on JSON keys and values (docs/mm2.md#transforms-and-predicates).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import cel

from k2k.config.mm2_notes import TRANSFORM_SKIPPED, Note
from k2k.config.properties import parse_list

__all__ = ["SUPPORTED", "Chain", "cel_string", "read_chain", "unsupported_line"]

_T = "org.apache.kafka.connect.transforms."
_P = _T + "predicates."
#: What the refusal lists as supported, shortest spelling first.
SUPPORTED = (
    f"{_T}{{Filter, InsertHeader, DropHeaders, MaskField$Key|$Value, ReplaceField$Key|$Value, "
    f"InsertField$Key|$Value (static.field)}} with {_P}{{TopicNameMatches, HasHeaderKey, "
    "RecordIsTombstone}"
)
_SCHEMA_ONLY = (
    "only matters for records with Connect schemas; k2k's JSON keys and values have none: "
    "nothing to do"
)

Entries = Mapping[str, tuple[str, str]]
Step = dict[str, Any]


class _Unsupported(Exception):
    """k2k has no equivalent of this transform or predicate; the message says why."""


class _Invalid(Exception):
    """MM2 itself would refuse the property: ``args`` = (property, what is wrong)."""


@dataclass
class Chain:
    """What one flow's transforms come to."""

    steps: list[Step] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: One line per transform k2k cannot run (refused unless --skip-unsupported-transforms).
    unsupported: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)


def cel_string(text: str) -> str:
    """``text`` as a CEL string literal (backslashes, quotes and control characters escaped)."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class _Options:
    """A transform's or predicate's options (``A->B.transforms.<name>.*``), noting which the
    translation read."""

    def __init__(self, entries: Entries, where: str) -> None:
        self.entries = dict(entries)
        self.where = where
        self.read: set[str] = set()

    def key(self, name: str) -> str:
        found = self.entries.get(name)
        return found[1] if found is not None else self.where + name

    def get(self, name: str) -> str | None:
        self.read.add(name)
        found = self.entries.get(name)
        return None if found is None else found[0]

    def required(self, name: str, expected: str) -> str:
        value = self.get(name)
        if value is None or not value.strip():
            raise _Invalid(self.key(name), f"missing, expected {expected}")
        return value

    def names(self, name: str, expected: str, *, required: bool = False) -> list[str]:
        """A list option, empty when unset; ``required``: at least one item."""
        items = parse_list(self.get(name) or "")
        if required and not items:
            raise _Invalid(self.key(name), f"missing, expected {expected}")
        return items


def _path(facet: str, name: str, where: str) -> str:
    """``facet.name``; Connect reads ``a.b`` as one name, k2k as a nested path."""
    if "." in name:
        raise _Unsupported(
            f"{where}: field name {name!r} holds a '.', which k2k reads as a nested path and "
            "Connect as one name"
        )
    return f"{facet}.{name}"


def _field_names(opts: _Options, name: str, facet: str, *, required: bool = False) -> list[str]:
    fields = opts.names(name, "a list of field names", required=required)
    return [_path(facet, f, opts.key(name)) for f in fields]


# -- transforms: each returns its steps (without `when`) -----------------------------------
def _insert_header(opts: _Options) -> list[Step]:
    name = opts.required("header", "a header name")
    value = opts.get("value.literal")  # may be empty, as in Connect
    if value is None:
        raise _Invalid(opts.key("value.literal"), "missing, expected the header's value")
    return [{"insertHeader": {"name": name, "value": value}}]


def _drop_headers(opts: _Options) -> list[Step]:
    names = opts.names("headers", "a list of header names", required=True)
    return [{"dropHeaders": {"names": names}}]


def _mask(facet: str) -> Callable[[_Options], list[Step]]:
    def mask(opts: _Options) -> list[Step]:
        step: Step = {"fields": _field_names(opts, "fields", facet, required=True)}
        replacement = opts.get("replacement")
        if replacement is not None:
            if not replacement:
                raise _Invalid(opts.key("replacement"), "empty, expected a non-empty string")
            step["replacement"] = replacement
        return [{"maskFields": step}]

    return mask


def _renames(opts: _Options, facet: str) -> dict[str, str]:
    renames = {}
    for item in opts.names("renames", "old:new pairs"):
        old, sep, new = item.partition(":")
        if not sep or not old or not new or ":" in new:
            raise _Invalid(opts.key("renames"), f"invalid rename {item!r}, expected old:new")
        renames[_path(facet, old, opts.key("renames"))] = new
    return renames


def _replace(facet: str) -> Callable[[_Options], list[Step]]:
    """ReplaceField filters fields first, then renames the ones left (as Connect does)."""

    def replace(opts: _Options) -> list[Step]:
        include = "include" if opts.get("include") is not None else "whitelist"
        exclude = "exclude" if opts.get("exclude") is not None else "blacklist"
        steps: list[Step] = []
        kept = _field_names(opts, include, facet)
        if kept:
            steps.append({"keepFields": {"fields": kept}})
        dropped = _field_names(opts, exclude, facet)
        if dropped:
            steps.append({"dropFields": {"fields": dropped}})
        renames = _renames(opts, facet)
        if renames:
            steps.append({"renameFields": {"fields": renames}})
        return steps

    return replace


def _insert_field(facet: str) -> Callable[[_Options], list[Step]]:
    def insert(opts: _Options) -> list[Step]:
        for metadata in ("topic.field", "partition.field", "offset.field", "timestamp.field"):
            if opts.get(metadata) is not None:
                raise _Unsupported(f"{opts.key(metadata)}: only static.field is supported")
        # A trailing ! or ? marks the field required or optional in a Connect schema.
        name = opts.required("static.field", "a field name").strip().rstrip("!?")
        value = opts.required("static.value", f"a value for static field {name!r}")
        path = _path(facet, name, opts.key("static.field"))
        return [{"insertField": {"field": path, "value": value}}]

    return insert


def _filter(opts: _Options) -> list[Step]:
    return [{"filter": {"drop": "true"}}]  # the chain puts the predicate in


_TRANSFORMS: dict[str, Callable[[_Options], list[Step]]] = {
    _T + "Filter": _filter,
    _T + "InsertHeader": _insert_header,
    _T + "DropHeaders": _drop_headers,
    _T + "MaskField$Value": _mask("value"),
    _T + "MaskField$Key": _mask("key"),
    _T + "ReplaceField$Value": _replace("value"),
    _T + "ReplaceField$Key": _replace("key"),
    _T + "InsertField$Value": _insert_field("value"),
    _T + "InsertField$Key": _insert_field("key"),
}
#: Options Connect defines that change nothing on schemaless data.
_IGNORED = {"replace.null.with.default"}


# -- predicates: each returns a CEL expression ---------------------------------------------
def _topic_matches(opts: _Options) -> str:
    """MM2 transforms records already addressed to the remote topic (MirrorSourceTask builds
    each SourceRecord with the renamed topic), so the pattern matches k2k's targetTopic."""
    pattern = opts.required("pattern", "a Java regular expression")
    expression = f"targetTopic.matches({cel_string(f'^(?:{pattern})$')})"
    try:
        cel.compile(expression).execute({"targetTopic": ""})
    except (ValueError, RuntimeError) as exc:
        why = next((line.strip() for line in str(exc).splitlines() if "error:" in line), "")
        raise _Unsupported(
            f"{opts.key('pattern')}: {pattern!r} is not valid in k2k's regex syntax (no "
            f"look-around, back-references or possessive quantifiers){': ' + why if why else ''}"
        ) from None
    return expression


def _has_header(opts: _Options) -> str:
    return f"{cel_string(opts.required('name', 'a header name'))} in headers"


_PREDICATES: dict[str, Callable[[_Options], str]] = {
    _P + "TopicNameMatches": _topic_matches,
    _P + "HasHeaderKey": _has_header,
    _P + "RecordIsTombstone": lambda opts: "value == null",
}
#: Connect's aliases: the simple name of a plugin class, where it is unique.
_ALIASES = {
    name.rpartition(".")[2]: name
    for name in [*_TRANSFORMS, *_PREDICATES]
    if "$" not in name  # Connect's simple name of MaskField$Value is the ambiguous `Value`
}


def _class(opts: _Options, what: str) -> str:
    kind = opts.required("type", f"a Connect {what} class")
    return _ALIASES.get(kind.strip(), kind.strip())


class _ChainReader:
    """Reads one flow's chain; ``flow``: its ``A->B.`` properties, prefix stripped."""

    def __init__(self, flow: Entries, label: str, top: Mapping[str, str]) -> None:
        self.flow, self.label, self.top = flow, label, top
        self.chain = Chain()
        self.listed: list[str] = []  # the flow's predicates list
        self.predicates: dict[str, str | Exception] = {}

    def options(self, kind: str, name: str) -> _Options:
        prefix = f"{kind}.{name}."
        entries = {k[len(prefix) :]: v for k, v in self.flow.items() if k.startswith(prefix)}
        self.chain.used.update(origin for _, origin in entries.values())
        return _Options(entries, f"{self.label}.{prefix}")

    def kind(self, opts: _Options, kind: str, name: str, what: str) -> str:
        if "type" not in opts.entries and f"{kind}.{name}.type" in self.top:
            raise _Invalid(
                opts.key("type"),
                f"missing, expected a Connect {what} class (MM2 ignores the top-level "
                f"{kind}.{name}.type: its connectors take {what} options only as "
                f"{self.label}.{kind}.{name}.*)",
            )
        value = opts.required("type", f"a Connect {what} class").strip()
        return _ALIASES.get(value, value)

    def transform(self, name: str) -> None:
        opts = self.options("transforms", name)
        try:
            steps = self._steps(name, opts)
        except _Invalid as exc:
            self.chain.problems.append(f"{exc.args[0]}: {exc.args[1]}")
        except _Unsupported as exc:
            kind = opts.entries.get("type", ("?", ""))[0].strip()
            line = f"transform {name} ({opts.key('type')} = {kind}): {exc}"
            self.chain.unsupported.append(line)
            self.chain.notes.append(Note(opts.key("type"), f"{kind}: {exc}: {TRANSFORM_SKIPPED}"))
        else:
            self.chain.steps.extend(steps)
            self.leftovers(opts, opts.entries["type"][0].strip())

    def _steps(self, name: str, opts: _Options) -> list[Step]:
        kind = self.kind(opts, "transforms", name, "transform")
        when = self._condition(opts)
        build = _TRANSFORMS.get(kind)
        if build is None:
            raise _Unsupported("not a transform k2k maps")
        steps = build(opts)
        if kind == _T + "Filter":  # Connect drops the records its predicate holds for
            return [{"filter": {"drop": when or "true"}}]
        for step in steps if when is not None else ():
            next(iter(step.values()))["when"] = when
        return steps

    def _condition(self, opts: _Options) -> str | None:
        """The transform's predicate as an expression (negated by ``negate``), or None."""
        alias, negate = opts.get("predicate"), opts.get("negate")
        if alias is None:
            if negate is not None:
                raise _Invalid(opts.key("negate"), "given without a predicate to negate")
            return None
        lowered = (negate or "false").strip().lower()
        if lowered not in ("true", "false"):
            raise _Invalid(opts.key("negate"), f"invalid value {negate!r}, expected true or false")
        expression = self._predicate(alias.strip(), opts.key("predicate"))
        return f"!({expression})" if lowered == "true" else expression

    def _predicate(self, alias: str, where: str) -> str:
        if alias not in self.listed:
            listed = ", ".join(self.listed) or "none"
            raise _Invalid(where, f"unknown predicate {alias!r}, expected one of {listed}")
        if alias not in self.predicates:
            self.predicates[alias] = self._read_predicate(alias)
        found = self.predicates[alias]
        if isinstance(found, Exception):
            raise found
        return found

    def _read_predicate(self, alias: str) -> str | Exception:
        opts = self.options("predicates", alias)
        try:
            kind = self.kind(opts, "predicates", alias, "predicate")
            build = _PREDICATES.get(kind)
            if build is None:
                raise _Unsupported(f"its predicate {alias} ({kind}) is not one k2k maps")
            expression = build(opts)
        except (_Invalid, _Unsupported) as exc:
            return exc
        self.leftovers(opts, kind)
        return expression

    def leftovers(self, opts: _Options, kind: str) -> None:
        """Notes for the options the translation did not read (Connect ignores unknown ones)."""
        for name, (_value, origin) in opts.entries.items():
            if name not in opts.read:
                advice = _SCHEMA_ONLY if name in _IGNORED else f"not an option of {kind}: ignored"
                self.chain.notes.append(Note(origin, advice))

    def finish(self) -> None:
        """Notes for predicates no transform uses and options of names no list holds."""
        for alias in self.listed:
            if alias not in self.predicates:
                opts = self.options("predicates", alias)
                advice = f"predicate {alias} is used by no transform of {self.label}: nothing to do"
                self.chain.notes.append(Note(opts.key("type"), advice))
        for key, (_value, origin) in self.flow.items():
            kind, dot, _rest = key.partition(".")
            if dot and kind in ("transforms", "predicates") and origin not in self.chain.used:
                advice = f"names no entry of the flow's {kind} list: not applied (nor by MM2)"
                self.chain.notes.append(Note(origin, advice))
                self.chain.used.add(origin)


def read_chain(
    flow: Entries,
    label: str,
    transforms: tuple[str, str] | None,
    predicates: tuple[str, str] | None,
    top: Mapping[str, str],
) -> Chain:
    """The steps of flow ``label``: ``flow`` holds its ``A->B.`` properties (prefix stripped,
    value and origin), ``transforms``/``predicates`` the lists in force (value, origin),
    ``top`` the whole file."""
    reader = _ChainReader(flow, label, top)
    reader.listed = parse_list(predicates[0]) if predicates is not None else []
    names = parse_list(transforms[0]) if transforms is not None else []
    for name in dict.fromkeys(names):
        if names.count(name) > 1 and transforms is not None:
            reader.chain.problems.append(
                f"{transforms[1]}: transform {name!r} listed twice, expected each name once"
            )
        reader.transform(name)
    reader.finish()
    return reader.chain


def unsupported_line(path: object, unsupported: list[str]) -> str:
    """The one-line refusal of a file whose flows use transforms k2k cannot run."""
    return (
        f"{path}: {'; '.join(dict.fromkeys(unsupported))}: k2k cannot run these Connect "
        f"transforms, and left out they would let records pass unchanged; supported: "
        f"{SUPPORTED}; expected only those, or --skip-unsupported-transforms to apply the "
        "supported ones and run without these"
    )
