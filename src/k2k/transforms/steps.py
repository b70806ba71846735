"""The steps of ``replication[].transforms`` compiled for one topic, and applied to each record.

Runs on: driver (:func:`compile_steps`, once per topic, when the topic plans are compiled)
and executor (:meth:`TopicSteps.run`, per record, before the copier forms its runs). What
depends only on the topic is decided at compile time: a step whose ``when`` names only
``topic`` (and ``targetTopic``) is kept or left out, a filter over those alone keeps or drops the whole topic.
A topic left with no step gets None: the copier's fast path. A filter whose expression reads
only ``partition`` and ``headers`` remembers its answer per distinct (partition, headers),
so that a header filter costs a lookup per record, not an expression evaluation.

Plans travel to the executors pickled; CEL programs do not pickle, so each expression
compiles on first use in each Python process.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import cel
from confluent_kafka import Message

from k2k.errors import K2KError, TransformFailed

if TYPE_CHECKING:  # the executors unpickle compiled steps without the config model
    from k2k.config import PipelineConfig
    from k2k.config.transforms import (
        ConditionalStep,
        DropFields,
        DropHeaders,
        Filter,
        InsertField,
        InsertHeader,
        KeepFields,
        MaskFields,
        RenameFields,
        RenameHeaders,
        TransformStep,
    )

__all__ = [
    "FAILED",
    "FILTERED",
    "KEPT",
    "Output",
    "TopicSteps",
    "compile_steps",
    "steps_for",
]

#: What a record's steps did: copied, dropped by a filter, or left out by ``onError: skip``.
KEPT, FILTERED, FAILED = 0, 1, 2
Header = tuple[str, bytes | None]
#: A rewritten record: key, value, headers (None: the record's own, unchanged).
Output = tuple[bytes | None, bytes | None, list[Header] | None]
_CACHEABLE = frozenset({"topic", "targetTopic", "partition", "headers"})
#: What is the same for every record of a topic: decided when the topic's steps compile.
_PER_TOPIC = frozenset({"topic", "targetTopic"})
_CACHE_LIMIT = 4096


class _StepError(Exception):
    """A step cannot handle a record; the reason is the message."""


class Expression:
    """A CEL expression and the record facets it reads; compiled lazily (not picklable)."""

    __slots__ = ("_program", "names", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._program: Any = cel.compile(source)
        self.names = frozenset(self._program.variables())

    def __getstate__(self) -> tuple[str, frozenset[str]]:
        return self.source, self.names

    def __setstate__(self, state: tuple[str, frozenset[str]]) -> None:
        self.source, self.names = state
        self._program = None

    def __call__(self, context: dict[str, Any]) -> Any:
        program = self._program
        if program is None:
            program = self._program = cel.compile(self.source)
        return program.execute(context)

    def truth(self, context: dict[str, Any]) -> bool:
        result = self(context)
        if not isinstance(result, bool):
            raise _StepError(f"the expression gave {result!r}, not true or false")
        return result


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


class _NotJson(_StepError):
    pass


class Record:
    """One record as the steps read and rewrite it; JSON is parsed when a step needs it."""

    __slots__ = ("dirty", "headers", "inserted", "json", "key", "msg", "target", "topic", "value")

    def __init__(self, msg: Message, topic: str, target: str) -> None:
        self.msg = msg
        self.topic = topic
        self.target = target
        self.key: bytes | None = msg.key()
        self.value: bytes | None = msg.value()
        headers: Any = msg.headers()  # a list: the stub also allows a dict
        self.headers: list[Header] = headers or []
        #: Parsed JSON per facet ("key", "value"), and the facets a step changed: only those
        #: are serialized again, so a record no step changed keeps its bytes.
        self.json: dict[str, Any] = {}
        self.dirty: set[str] = set()
        self.inserted: set[str] = set()

    def context(self, names: frozenset[str]) -> dict[str, Any]:
        """The variables an expression reads, and only those."""
        m = self.msg
        ctx: dict[str, Any] = {}
        for name in names:
            if name == "topic":
                ctx[name] = self.topic
            elif name == "targetTopic":
                ctx[name] = self.target
            elif name == "partition":
                ctx[name] = m.partition()
            elif name == "offset":
                ctx[name] = m.offset()
            elif name == "timestamp":
                ctx[name] = m.timestamp()[1]
            elif name == "headers":
                ctx[name] = {k: _text(v) for k, v in self.headers}
            elif name in ("key", "value"):
                ctx[name] = _text(self.data(name))
            elif name in ("keyJson", "valueJson"):
                ctx[name] = self.parsed(name[:-4])
        return ctx

    def data(self, facet: str) -> bytes | None:
        if facet in self.dirty:
            self._dump(facet)
        return self.key if facet == "key" else self.value

    def parsed(self, facet: str) -> Any:
        """The key's or value's JSON (a tombstone: None); raises :class:`_NotJson`."""
        if facet in self.json:
            return self.json[facet]
        data = self.key if facet == "key" else self.value
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise _NotJson(f"the {facet} is not JSON") from None

    def edit(self, facet: str) -> Any:
        """The key's or value's JSON object, to rewrite in place (tell :meth:`changed`)."""
        obj = self.json.get(facet)
        if obj is None:
            obj = self.parsed(facet)
            if not isinstance(obj, dict):
                raise _NotJson(f"the {facet} is not a JSON object")
            self.json[facet] = obj
        return obj

    def changed(self, facet: str) -> None:
        self.dirty.add(facet)

    def _dump(self, facet: str) -> None:
        self.dirty.discard(facet)
        data = json.dumps(self.json[facet], separators=(",", ":"), ensure_ascii=False)
        if facet == "key":
            self.key = data.encode()
        else:
            self.value = data.encode()

    def output(self, keep_headers: bool) -> Output:
        for facet in list(self.dirty):
            self._dump(facet)
        headers = self.headers
        if not keep_headers:
            headers = [h for h in headers if h[0] in self.inserted]
        return self.key, self.value, headers


class _Step:
    """A compiled step: ``apply`` returns False to drop the record."""

    def __init__(self, index: int, kind: str, when: Expression | None, skip: bool) -> None:
        self.where = f"replication.transforms[{index}] ({kind})"
        self.when = when
        self.skip = skip
        self.pass_non_json = False

    def __call__(self, rec: Record) -> bool:
        when = self.when
        if when is not None and not when.truth(rec.context(when.names)):
            return True
        try:
            return self.apply(rec)
        except _NotJson:
            if self.pass_non_json:
                return True
            raise

    def apply(self, rec: Record) -> bool:
        raise NotImplementedError


class _Filter(_Step):
    def __init__(self, index: int, step: Filter) -> None:
        super().__init__(index, "filter", None, step.on_error == "skip")
        self.expression = Expression(step.predicate)
        self.drops = step.drops
        self.cacheable = self.expression.names <= _CACHEABLE
        self._cache: dict[Any, bool] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}

    def keeps(self, rec: Record) -> bool:
        if not self.cacheable:
            return self.expression.truth(rec.context(self.expression.names)) != self.drops
        # The headers as the steps before left them: an inserted header may differ per record.
        cache_key = (rec.msg.partition(), tuple(rec.headers))
        kept = self._cache.get(cache_key)
        if kept is None:
            kept = self.expression.truth(rec.context(self.expression.names)) != self.drops
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[cache_key] = kept
        return kept

    def apply(self, rec: Record) -> bool:
        return self.keeps(rec)


class _DropAll(_Step):
    def apply(self, rec: Record) -> bool:
        return False


class _InsertHeader(_Step):
    def __init__(self, index: int, step: InsertHeader, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step.on_error == "skip")
        self.name = step.name
        self.fixed = step.value.encode() if step.value is not None else None
        self.expression = Expression(step.expression) if step.expression is not None else None

    def apply(self, rec: Record) -> bool:
        value = self.fixed
        if self.expression is not None:
            value = _header_value(self.expression(rec.context(self.expression.names)))
        rec.headers.append((self.name, value))
        rec.inserted.add(self.name)
        return True


def _header_value(result: Any) -> bytes | None:
    if result is None or isinstance(result, bytes):
        return result
    if isinstance(result, bool):
        return b"true" if result else b"false"
    if isinstance(result, str):
        return result.encode()
    if isinstance(result, int | float):
        return str(result).encode()
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode()


class _DropHeaders(_Step):
    def __init__(self, index: int, step: DropHeaders, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step.on_error == "skip")
        self.names = frozenset(step.names)
        self.pattern = re.compile(step.pattern) if step.pattern is not None else None

    def apply(self, rec: Record) -> bool:
        names, pattern = self.names, self.pattern
        rec.headers = [
            h
            for h in rec.headers
            if h[0] not in names and (pattern is None or not pattern.fullmatch(h[0]))
        ]
        return True


class _RenameHeaders(_Step):
    def __init__(self, index: int, step: RenameHeaders, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step.on_error == "skip")
        self.names = dict(step.names)

    def apply(self, rec: Record) -> bool:
        names = self.names
        rec.headers = [(names.get(k, k), v) for k, v in rec.headers]
        rec.inserted.update(new for old, new in names.items() if old in rec.inserted)
        return True


def _split(path: str) -> tuple[str, list[str], str]:
    """``value.a.b`` -> ("value", ["a"], "b")."""
    facet, *rest = path.split(".")
    return facet, rest[:-1], rest[-1]


def _parent(obj: Any, steps: Sequence[str], create: bool = False) -> dict[str, Any] | None:
    """The object holding a field, None when a step of the path is missing (or not an object)."""
    for name in steps:
        child = obj.get(name)
        if child is None and create:
            child = obj[name] = {}
        if not isinstance(child, dict):
            if create:
                raise _StepError(f"{name!r} is not a JSON object")
            return None
        obj = child
    return obj


class _JsonStep(_Step):
    def __init__(self, index: int, kind: str, when: Expression | None, step: Any) -> None:
        super().__init__(index, kind, when, step.on_error == "skip")
        self.pass_non_json = step.non_json == "pass"

    def fields(self, rec: Record, paths: Sequence[str]) -> Any:
        """Yields (facet, parent object, field name) of every path present in the record."""
        for path in paths:
            facet, steps, name = _split(path)
            if (rec.key if facet == "key" else rec.value) is None and facet not in rec.json:
                continue  # a null key or a tombstone: nothing to rewrite
            parent = _parent(rec.edit(facet), steps)
            if parent is not None and name in parent:
                yield facet, parent, name


class _DropFields(_JsonStep):
    def __init__(self, index: int, step: DropFields, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step)
        self.paths = tuple(step.fields)

    def apply(self, rec: Record) -> bool:
        for facet, parent, name in list(self.fields(rec, self.paths)):
            del parent[name]
            rec.changed(facet)
        return True


class _KeepFields(_JsonStep):
    def __init__(self, index: int, step: KeepFields, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step)
        kept: dict[str, set[str]] = {}
        for path in step.fields:
            parent, _, name = path.rpartition(".")
            kept.setdefault(parent, set()).add(name)
        self.kept = kept

    def apply(self, rec: Record) -> bool:
        for parent_path, names in self.kept.items():
            facet, *steps = parent_path.split(".")
            if (rec.key if facet == "key" else rec.value) is None and facet not in rec.json:
                continue
            parent = _parent(rec.edit(facet), steps)
            if parent is None:
                continue
            dropped = [k for k in parent if k not in names]
            for name in dropped:
                del parent[name]
            if dropped:
                rec.changed(facet)
        return True


class _MaskFields(_JsonStep):
    def __init__(self, index: int, step: MaskFields, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step)
        self.paths = tuple(step.fields)
        self.replacement = step.replacement
        self.secret = step.hash_secret.get_secret_value().encode() if step.hash_secret else None

    def __repr__(self) -> str:
        return f"<maskFields {self.paths}>"  # never the secret

    def apply(self, rec: Record) -> bool:
        for facet, parent, name in self.fields(rec, self.paths):
            if parent[name] is not None:
                parent[name] = self.masked(parent[name])
                rec.changed(facet)
        return True

    def masked(self, value: Any) -> Any:
        if self.secret is not None:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
            return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest()
        if self.replacement is None:
            return type(value)()  # False, 0, 0.0, "", [], {}: MaskField's empty values
        return _replacement(value, self.replacement)


def _replacement(value: Any, text: str) -> Any:
    """``text`` as the type of ``value``, as Kafka Connect's MaskField converts it."""
    try:
        if isinstance(value, bool):
            return text.strip().lower() == "true"
        if isinstance(value, int):
            return int(text)
        if isinstance(value, float):
            return float(text)
    except ValueError:
        raise _StepError(f"cannot mask a {type(value).__name__} with {text!r}") from None
    if isinstance(value, str):
        return text
    raise _StepError("cannot mask a JSON object or array with a replacement")


class _RenameFields(_JsonStep):
    def __init__(self, index: int, step: RenameFields, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step)
        self.renames = dict(step.fields)

    def apply(self, rec: Record) -> bool:
        for path, new in self.renames.items():
            for facet, parent, name in list(self.fields(rec, (path,))):
                items = list(parent.items())
                parent.clear()  # rebuilt in order, as ReplaceField keeps the field order
                parent.update((new if k == name else k, v) for k, v in items)
                rec.changed(facet)
        return True


class _InsertField(_JsonStep):
    def __init__(self, index: int, step: InsertField, when: Expression | None) -> None:
        super().__init__(index, step.kind, when, step)
        self.facet, self.steps, self.name = _split(step.field)
        self.value = step.value

    def apply(self, rec: Record) -> bool:
        if (rec.key if self.facet == "key" else rec.value) is None:
            return True
        parent = _parent(rec.edit(self.facet), self.steps, create=True)
        assert parent is not None
        parent[self.name] = self.value
        rec.changed(self.facet)
        return True


_BUILDERS: dict[str, Callable[[int, Any, Expression | None], _Step]] = {
    "insertHeader": _InsertHeader,
    "dropHeaders": _DropHeaders,
    "renameHeaders": _RenameHeaders,
    "dropFields": _DropFields,
    "keepFields": _KeepFields,
    "maskFields": _MaskFields,
    "renameFields": _RenameFields,
    "insertField": _InsertField,
}


class TopicSteps:
    """The steps that apply to one topic's records, in order."""

    def __init__(self, topic: str, target: str, steps: Sequence[_Step], keep_headers: bool) -> None:
        self.topic = topic
        self.target = target
        self.steps = tuple(steps)
        self.keep_headers = keep_headers
        #: Only filters: a kept record is copied as it is (no :data:`Output`).
        self.rewrites = not all(isinstance(s, _Filter | _DropAll) for s in self.steps)
        #: Whether a step rewrites keys or values (JSON steps), not only headers.
        self.rewrites_data = any(isinstance(s, _JsonStep) for s in self.steps)
        #: Only filters over partition and headers: the chain's outcome is remembered per
        #: distinct (partition, headers), and for the record before (runs share headers).
        self._by_headers = all(isinstance(s, _Filter) and s.cacheable for s in self.steps)
        self._reads_partition = any(
            "partition" in s.expression.names for s in self.steps if isinstance(s, _Filter)
        )
        self._outcomes: dict[Any, int] = {}
        self._last: tuple[Any, int, int] = (None, -1, KEPT)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_outcomes": {}, "_last": (None, -1, KEPT)}

    def outcome(self, msg: Message) -> int:
        """:data:`KEPT`, :data:`FILTERED` or :data:`FAILED` for a chain of filters only (no
        output); raises :class:`TransformFailed`."""
        if not self._by_headers:
            return self.run(msg)[0]
        headers = msg.headers()
        part = (msg.partition() or 0) if self._reads_partition else 0
        last_headers, last_part, last = self._last
        if headers == last_headers and part == last_part:
            return last
        key = (part, tuple(headers) if headers else None)
        found = self._outcomes.get(key)
        if found is None:
            found = self.run(msg)[0]
            if len(self._outcomes) >= _CACHE_LIMIT:
                self._outcomes.clear()
            self._outcomes[key] = found
        self._last = (headers, part, found)
        return found

    def run(self, msg: Message) -> tuple[int, Output | None]:
        """What the steps make of ``msg``: (:data:`KEPT`, its output or None when unchanged),
        or (:data:`FILTERED` | :data:`FAILED`, None). Raises :class:`TransformFailed`."""
        rec = Record(msg, self.topic, self.target)
        for step in self.steps:
            try:
                if not step(rec):
                    return FILTERED, None
            except Exception as exc:  # CEL raises builtin errors of many kinds
                if step.skip:
                    return FAILED, None
                raise TransformFailed(
                    f"transform failed on {self.topic}[{msg.partition()}]@{msg.offset()}: "
                    f"{step.where}: {_reason(exc)}"
                ) from None
        return KEPT, (rec.output(self.keep_headers) if self.rewrites else None)


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no such key {exc.args[0]!r} (test it first with has() or 'in')"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def compile_steps(
    steps: Sequence[TransformStep], topic: str, target: str, keep_headers: bool
) -> TopicSteps | None:
    """The steps of source topic ``topic`` (copied to ``target``), or None when none applies
    to it."""
    compiled: list[_Step] = []
    for index, item in enumerate(steps):
        step = item.step
        if step.kind == "filter":
            compiled.extend(_filter_steps(index, cast("Filter", step), topic, target))
            continue
        conditional = cast("ConditionalStep", step)
        when = Expression(conditional.when) if conditional.when is not None else None
        if when is not None and when.names <= _PER_TOPIC:
            if not _topic_truth(when, topic, target, index):
                continue
            when = None
        compiled.append(_BUILDERS[step.kind](index, step, when))
    return TopicSteps(topic, target, compiled, keep_headers) if compiled else None


def _filter_steps(index: int, step: Filter, topic: str, target: str) -> list[_Step]:
    """A filter, or what it comes to when it reads only the topic: nothing or drop-all."""
    expression = Expression(step.predicate)
    if not expression.names <= _PER_TOPIC:
        return [_Filter(index, step)]
    if _topic_truth(expression, topic, target, index) == step.drops:
        return [_DropAll(index, "filter", None, False)]
    return []


def _topic_truth(expression: Expression, topic: str, target: str, index: int) -> bool:
    try:
        return expression.truth({"topic": topic, "targetTopic": target})
    except Exception as exc:
        raise K2KError(
            f"replication.transforms[{index}]: {expression.source!r} fails for topic "
            f"{topic!r}: {_reason(exc)}"
        ) from None


def steps_for(cfg: PipelineConfig) -> Callable[[str, str], TopicSteps | None] | None:
    """The pipeline's steps per topic (for :func:`k2k.stages.compile_topic_plans`); None
    when the pipeline has no transforms."""
    steps = cfg.replication.transforms
    if not steps:
        return None
    keep_headers = cfg.features.header_replication

    def for_topic(topic: str, target: str) -> TopicSteps | None:
        return compile_steps(steps, topic, target, keep_headers)

    return for_topic
