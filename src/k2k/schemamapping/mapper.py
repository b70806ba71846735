"""Schema-id mapping: source registry ids to target registry ids, resolved once, cached.

Runs on: executor. One :class:`SchemaMapper` per runner task (the lease spec pickles one and
every topic's :class:`SchemaIdRewrite` refers to it, so they share its clients); clients are
created at the first cache miss. The resolved ids live longer than the task: in a
:class:`_Caches` per Python worker process and (source, target) registry pair
(:func:`process_caches`), so a lease that follows another in a reused Python worker
(``spark.python.worker.reuse``, Spark's default) asks no registry about an id already mapped.

Per record (:meth:`SchemaIdRewrite.__call__`, once per run of records): a 5-byte slice, one
dict lookup and a splice of the new 5-byte prefix before the unchanged payload (for Protobuf
the message indexes after the id are payload, so they stay). Only an unseen prefix costs more:
:meth:`SchemaIdRewrite._miss` checks the wire format, and :meth:`SchemaMapper.target_id`
fetches the schema (with its references, recursively) from the source registry and registers
it under the target subject, one round trip per schema and never again in this process.

Invariants:
  * a prefix in a rewrite's table maps to the id the target registry returned for the same
    schema text, type and references under that topic's subject: no record is written with an
    id that was guessed or defaulted;
  * a failure raises before the record is produced (the caller writes nothing of it);
  * a process cache holds only answers of its own registry pair: it is keyed by both
    endpoints (URLs, credentials, TLS), and its keys carry the target subject, so mappers with
    different subject strategies share it safely (the same subject and schema get the same id).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import Message

from k2k.errors import SchemaMappingError
from k2k.schemamapping.registry import (
    RegistryClient,
    RegistryEndpoint,
    RegistryFailure,
    RegistryRefused,
    SchemaRecord,
)

__all__ = [
    "WIRE_MAGIC",
    "WIRE_PREFIX",
    "SchemaIdRewrite",
    "SchemaMapper",
    "clear_process_caches",
    "process_caches",
    "record_name",
    "registered_by",
    "subject_for",
]

Facet = Literal["key", "value"]
Refs = tuple[tuple[str, str, int], ...]

#: Confluent's wire format: a magic byte 0, the 4-byte big-endian schema id, the payload.
#: The prefix is what the mapper rewrites, and what verify compares by schema instead.
WIRE_MAGIC = 0
WIRE_PREFIX = 5
_MAX_REFERENCE_DEPTH = 32


#: Reads a facet's data from a consumed message (unbound methods: no bound method per call).
_READ: dict[Facet, Callable[[Message], bytes | None]] = {"key": Message.key, "value": Message.value}


class _NameError(RegistryFailure):
    """The schema has no record name a record-name strategy could use.

    Internal: raised again as a SchemaMappingError naming the record."""


class _TooDeep(RegistryFailure):
    """References nest deeper than :data:`_MAX_REFERENCE_DEPTH` (a cycle, most likely); not
    prefixed with every reference on the way, which would make a line of dozens.

    Internal: raised again as a SchemaMappingError naming the record."""


def record_name(schema: SchemaRecord) -> str:
    """The full record name of a schema, for the record-name strategies.

    >>> record_name(SchemaRecord('{"type":"record","name":"P","namespace":"x","fields":[]}'))
    'x.P'
    >>> record_name(SchemaRecord('{"title":"Person","type":"object"}', "JSON"))
    'Person'
    """
    if schema.schema_type == "PROTOBUF":
        raise _NameError(
            "record-name strategies are not supported for Protobuf schemas yet; use "
            "TopicNameStrategy for this facet"
        )
    try:
        parsed = json.loads(schema.schema)
    except ValueError:
        parsed = None
    if schema.schema_type == "JSON":
        title = parsed.get("title") if isinstance(parsed, dict) else None
        if isinstance(title, str) and title:
            return title
        raise _NameError("the JSON schema has no 'title' for a record-name strategy")
    if isinstance(parsed, dict) and parsed.get("type") in ("record", "enum", "fixed"):
        name, space = str(parsed.get("name", "")), parsed.get("namespace")
        if name:
            return name if "." in name or not space else f"{space}.{name}"
    raise _NameError("the Avro schema is not a named record for a record-name strategy")


def subject_for(strategy: str, topic: str, facet: Facet, schema: SchemaRecord) -> str:
    """The target subject of ``schema`` under ``strategy`` (Confluent's naming).

    >>> subject_for("TopicNameStrategy", "dr.orders", "value", SchemaRecord('"string"'))
    'dr.orders-value'
    """
    if strategy == "TopicNameStrategy":
        return f"{topic}-{facet}"
    name = record_name(schema)
    return name if strategy == "RecordNameStrategy" else f"{topic}-{name}"


@dataclass
class _Caches:
    """What one (source, target) registry pair answered: source id → schema, (target subject,
    source id) → target id, (reference subject, source version) → target version."""

    schemas: dict[int, SchemaRecord] = field(default_factory=dict)
    ids: dict[tuple[str, int], int] = field(default_factory=dict)
    versions: dict[tuple[str, int], int] = field(default_factory=dict)


_PROCESS_CACHES: dict[tuple[RegistryEndpoint, RegistryEndpoint], _Caches] = {}


def process_caches(source: RegistryEndpoint, target: RegistryEndpoint) -> _Caches:
    """Runs on: executor. This Python worker's caches of the registry pair (created empty).

    They live as long as the process: Spark reuses Python workers across tasks, so the ids a
    lease mapped serve the next leases too. They grow with the schemas met, never
    with records; they are never evicted (ids are never reused by a registry)."""
    return _PROCESS_CACHES.setdefault((source, target), _Caches())


def clear_process_caches() -> None:
    """Forget every cached answer of this process (tests)."""
    _PROCESS_CACHES.clear()


@dataclass
class SchemaMapper:
    """Runs on: executor (built on the driver, pickled without clients or caches).

    Resolves source ids to target ids: ``target_id(source_id, facet, topic)``."""

    source: RegistryEndpoint
    target: RegistryEndpoint
    key_strategy: str = "TopicNameStrategy"
    value_strategy: str = "TopicNameStrategy"
    on_non_wire_format: Literal["pass", "fail"] = "pass"
    #: Schemas this mapper had the target registry resolve (a counter for metrics and tests;
    #: ids found in the process cache do not count).
    registered: int = 0
    _clients: dict[str, RegistryClient] = field(default_factory=dict, repr=False)
    _cache: _Caches | None = field(default=None, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_clients": {}, "_cache": None}

    @property
    def cache(self) -> _Caches:
        """This process's caches of the mapper's registry pair (looked up once)."""
        cache = self._cache
        if cache is None:
            cache = self._cache = process_caches(self.source, self.target)
        return cache

    def _client(self, which: Literal["source", "target"]) -> RegistryClient:
        client = self._clients.get(which)
        if client is None:
            client = self._clients[which] = RegistryClient(getattr(self, which))
        return client

    def source_schema(self, source_id: int) -> SchemaRecord:
        """The source registry's schema of ``source_id`` (cached)."""
        schemas = self.cache.schemas
        schema = schemas.get(source_id)
        if schema is None:
            schema = schemas[source_id] = self._client("source").schema_by_id(source_id)
        return schema

    def subject(self, facet: Facet, topic: str, schema: SchemaRecord) -> str:
        strategy = self.key_strategy if facet == "key" else self.value_strategy
        return subject_for(strategy, topic, facet, schema)

    def target_id(self, source_id: int, subject: str, schema: SchemaRecord) -> int:
        """The target registry's id of ``schema`` under ``subject``, registering it (and its
        references, under their own subjects) when new."""
        ids = self.cache.ids
        known = ids.get((subject, source_id))
        if known is None:
            refs = self._target_refs(schema.references, 0)
            known = self._client("target").register(subject, schema, refs)
            ids[(subject, source_id)] = known
            self.registered += 1
        return known

    def _target_refs(self, refs: Refs, depth: int) -> Refs:
        """``refs`` with each version replaced by the version the target registry gave the
        same schema under the same subject (registered there first, depth first)."""
        if not refs:
            return ()
        if depth > _MAX_REFERENCE_DEPTH:
            raise _TooDeep(f"schema references nest deeper than {_MAX_REFERENCE_DEPTH}")
        out = []
        versions = self.cache.versions
        for name, subject, version in refs:
            target_version = versions.get((subject, version))
            if target_version is None:
                try:
                    target_version = self._target_version(subject, version, depth)
                except RegistryFailure as exc:
                    where = f"reference {name!r} (subject {subject!r} version {version})"
                    raise _within(exc, where) from None
                versions[(subject, version)] = target_version
                self.registered += 1
            out.append((name, subject, target_version))
        return tuple(out)

    def _target_version(self, subject: str, version: int, depth: int) -> int:
        """The target's version of the source's ``subject`` ``version``, registered there."""
        schema = self._client("source").version(subject, version)
        nested = self._target_refs(schema.references, depth + 1)
        target = self._client("target")
        target.register(subject, schema, nested)
        return target.lookup_version(subject, schema, nested)


def _within(exc: RegistryFailure, where: str) -> RegistryFailure:
    """``exc`` (same class) with ``where`` before its message: a failure in a reference
    names the reference's subject, not only the record's."""
    if isinstance(exc, _TooDeep):
        return exc
    text = f"{where}: {exc}"
    if isinstance(exc, RegistryRefused):
        return RegistryRefused(text, exc.status, exc.code)
    return type(exc)(text)


class _PrefixTable(dict[bytes, bytes]):
    """Wire-format prefix -> the target's prefix; a missing prefix asks ``resolve``, whose
    answer is kept only for wire format (other data's first bytes are not ids: kept, they
    would grow the table with the records)."""

    __slots__ = ("resolve",)

    def __init__(self, resolve: Callable[[bytes], bytes]) -> None:
        super().__init__()
        self.resolve = resolve

    def __missing__(self, prefix: bytes) -> bytes:
        new = self.resolve(prefix)
        if new is not prefix:
            self[prefix] = new
        return new


@dataclass
class SchemaIdRewrite:
    """The schema-id transform of one topic (a :class:`~k2k.stages.topicplan.RecordTransform`).

    Runs on: executor, once per run of records; returns the run's keys and values with
    wire-format prefixes replaced. ``keys``/``values`` False leave that facet untouched.
    Per record: a 5-byte slice, one lookup in a table that resolves what it misses, and a
    splice, inside a list comprehension (no Python call per record).
    """

    mapper: SchemaMapper
    target_topic: str
    keys: bool
    values: bool
    _tables: dict[Facet, _PrefixTable] = field(default_factory=dict, repr=False)
    #: The run being rewritten, to name a record in an error.
    _run: Sequence[Message] = field(default=(), repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tables": {}, "_run": ()}

    def __call__(self, run: Sequence[Message]) -> tuple[list[bytes | None], list[bytes | None]]:
        self._run = run
        keys = self._rewrite("key", run) if self.keys else list(map(Message.key, run))
        values = self._rewrite("value", run) if self.values else list(map(Message.value, run))
        return keys, values

    def table(self, facet: Facet) -> dict[bytes, bytes]:
        """The facet's known prefixes: source prefix -> target prefix."""
        table = self._tables.get(facet)
        if table is None:
            table = self._tables[facet] = _PrefixTable(lambda prefix: self._miss(facet, prefix))
        return table

    def _rewrite(self, facet: Facet, run: Sequence[Message]) -> list[bytes | None]:
        """The run's ``facet`` data, rewritten; read and rewritten in one comprehension.

        ``replace(prefix, new, 1)`` splices at index 0 (the data starts with ``prefix``) in
        one allocation, where a slice and a concatenation make two."""
        table = self.table(facet)
        read = _READ[facet]
        if self.mapper.on_non_wire_format == "pass":
            # Data not starting with the magic byte passes as it is, without a lookup: plain
            # keys beside wire-format values would otherwise each miss the table.
            return [
                d.replace(p, table[p], 1)
                if (d := read(m)) and d[0] == WIRE_MAGIC and (p := d[:WIRE_PREFIX])
                else d
                for m in run
            ]
        return [
            None if (d := read(m)) is None else d.replace(p := d[:WIRE_PREFIX], table[p], 1)
            for m in run
        ]

    def _miss(self, facet: Facet, prefix: bytes) -> bytes:
        """An unseen prefix: not wire format (the policy decides; ``prefix`` itself means
        unchanged), or a new source id to resolve."""
        if len(prefix) < WIRE_PREFIX or prefix[0] != WIRE_MAGIC:
            if self.mapper.on_non_wire_format == "pass":
                return prefix
            m, data = self._record_with(facet, prefix)
            raise SchemaMappingError(
                f"cannot map the schema id of {_locator(m)} ({facet}): not in wire format "
                f"(first byte {prefix[:1].hex() or 'none'}, {len(data)} bytes) and "
                "schemaMapping.onNonWireFormat is 'fail'"
            )
        source_id = int.from_bytes(prefix[1:WIRE_PREFIX], "big")
        mapper = self.mapper
        strategy = mapper.key_strategy if facet == "key" else mapper.value_strategy
        subject = (  # for the message: a record-name subject is known once the schema is read
            f"{self.target_topic}-{facet}" if strategy == "TopicNameStrategy" else "(unread)"
        )
        try:
            schema = mapper.source_schema(source_id)
            subject = mapper.subject(facet, self.target_topic, schema)
            target_id = mapper.target_id(source_id, subject, schema)
        except RegistryFailure as exc:
            m, _ = self._record_with(facet, prefix)
            raise SchemaMappingError(
                f"cannot map the schema id of {_locator(m)} ({facet}): subject {subject!r}, "
                f"source schema id {source_id}: {exc}"
            ) from None
        return bytes((WIRE_MAGIC,)) + target_id.to_bytes(4, "big")

    def _record_with(self, facet: Facet, prefix: bytes) -> tuple[Message, bytes]:
        """The run's first record whose ``facet`` starts with ``prefix``, and that data."""
        read = _READ[facet]
        for m in self._run:
            d = read(m)
            if d is not None and d[:WIRE_PREFIX] == prefix:
                return m, d
        raise AssertionError("a missed prefix comes from the run")  # pragma: no cover


def registered_by(transforms: Iterable[object]) -> int:
    """Schemas the mappers behind ``transforms`` had the target registry resolve; each
    mapper counted once, as a pipeline's topics share one."""
    mappers = {id(t.mapper): t.mapper for t in transforms if isinstance(t, SchemaIdRewrite)}
    return sum(m.registered for m in mappers.values())


def _locator(m: Message) -> str:
    return f"{m.topic()}[{m.partition()}]@{m.offset()}"
