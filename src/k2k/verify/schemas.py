"""Schema ids in ``k2k verify``: compare the schema a record names, not its registry's id.

With ``features.schemaMapping`` the pipeline rewrites the 5-byte wire-format prefix of
mapped keys and values (magic byte 0, the schema id) to the target registry's id of the
same schema (docs/schema-mapping.md). Verify therefore replaces that prefix on each side by
a fingerprint of the schema the id names in *that side's* registry: a record whose id was
rewritten compares equal to its source, and one whose id names another schema, or no
schema at all, is a difference like a changed payload.

Runs on: executor, inside a verify task; one :class:`SchemaIdCanon` per side and task, its
answers cached per prefix (a handful of schemas: one registry call each, never one per
record). Registries are only read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from k2k.schemamapping.mapper import WIRE_MAGIC, WIRE_PREFIX
from k2k.schemamapping.registry import (
    RegistryClient,
    RegistryEndpoint,
    RegistryRefused,
    SchemaRecord,
)

__all__ = ["SchemaIdCanon", "schema_fingerprint"]

#: Marks a prefix whose id the registry does not know: equal only to the same unknown id.
_UNKNOWN = b"\xff"


def schema_fingerprint(schema: SchemaRecord) -> bytes:
    """9 bytes (magic byte, 8-byte digest) naming a schema's type, normalised text and
    references (name and subject: their versions differ between registries).

    >>> a = SchemaRecord('{"type": "string"}')
    >>> b = SchemaRecord('{"type":"string"}')
    >>> schema_fingerprint(a) == schema_fingerprint(b) != schema_fingerprint(SchemaRecord('"int"'))
    True
    """
    try:  # Avro and JSON Schema: registries may reformat the text they return
        text = json.dumps(json.loads(schema.schema), sort_keys=True, separators=(",", ":"))
    except ValueError:  # Protobuf: whitespace only
        text = " ".join(schema.schema.split())
    refs = sorted((name, subject) for name, subject, _ in schema.references)
    h = hashlib.blake2b(digest_size=8, person=b"k2k-schema")
    h.update(json.dumps([schema.schema_type, text, refs]).encode())
    return bytes((WIRE_MAGIC,)) + h.digest()


@dataclass
class SchemaIdCanon:
    """One side's canonical keys and values: ``keys``/``values`` say which facets the
    pipeline maps; others pass unchanged, as do data not in wire format."""

    endpoint: RegistryEndpoint
    keys: bool
    values: bool
    _known: dict[bytes, bytes] = field(default_factory=dict, repr=False)
    _client: RegistryClient | None = field(default=None, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_known": {}, "_client": None}

    def key(self, data: bytes | None) -> bytes | None:
        return self._canon(data) if self.keys else data

    def value(self, data: bytes | None) -> bytes | None:
        return self._canon(data) if self.values else data

    def _canon(self, data: bytes | None) -> bytes | None:
        if data is None or len(data) < WIRE_PREFIX or data[0] != WIRE_MAGIC:
            return data
        prefix = data[:WIRE_PREFIX]
        canonical = self._known.get(prefix)
        if canonical is None:
            canonical = self._known[prefix] = self._resolve(prefix)
        return canonical + data[WIRE_PREFIX:]

    def _resolve(self, prefix: bytes) -> bytes:
        """The fingerprint of the schema ``prefix`` names; an unknown id stays itself,
        marked. A registry that cannot answer fails the task (raises)."""
        if self._client is None:
            self._client = RegistryClient(self.endpoint)
        try:
            return schema_fingerprint(self._client.schema_by_id(int.from_bytes(prefix[1:], "big")))
        except RegistryRefused as exc:
            if exc.status == 404:
                return _UNKNOWN + prefix
            raise
