"""``schemaMapping`` and the ``source.registry`` / ``target.registry`` connections.

With ``features.schemaMapping: enabled`` every record key and value in Confluent's wire format
(magic byte 0, a 4-byte schema id of the source registry, the payload) is written to the
target with the id of the same schema in the target registry (docs/schema-mapping.md).
``schemaMapping.topics`` chooses the facets per source topic (first matching rule wins;
topics no rule matches get both facets); the registry connections are K2K's
``<cluster>.registry.config`` maps of Confluent client properties.

>>> rules = SchemaMapping.model_validate({"topics": [{"pattern": "orders-.*", "key": "disabled"}]})
>>> rules.facets("orders-eu"), rules.facets("payments")
((False, True), (True, True))
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, SecretStr, field_validator

from k2k.config.base import K2KModel
from k2k.config.base import raise_problems as _raise
from k2k.config.durations import format_duration
from k2k.config.errors import Problem, describe, problems_error, suggest_key
from k2k.config.fields import Duration, Flag, scalar_text
from k2k.config.hints import FieldDoc
from k2k.config.secrets import MASK, is_secret_key, reveal
from k2k.observability.redact import url_without_user

__all__ = [
    "REGISTRY_PROPERTIES",
    "RegistryConnection",
    "SchemaMapping",
    "SchemaMappingRule",
    "SubjectNameStrategies",
    "SubjectNameStrategy",
]

#: The Confluent client properties a registry connection understands, with what they do.
REGISTRY_PROPERTIES: dict[str, str] = {
    "schema.registry.url": "base URL(s) of the registry, comma-separated (tried in order)",
    "basic.auth.credentials.source": "USER_INFO (default) or URL (user:password in the URL)",
    "basic.auth.user.info": "user:password for HTTP basic authentication (secret)",
    "schema.registry.basic.auth.user.info": "same as basic.auth.user.info (secret)",
    "schema.registry.ssl.ca.location": "PEM file of the CAs that sign the registry's certificate",
    "schema.registry.ssl.truststore.location": "same as ssl.ca.location (PEM only)",
    "schema.registry.ssl.truststore.type": "PEM (JKS and PKCS12 stores are Java-only)",
    "schema.registry.ssl.certificate.location": "PEM client certificate (mutual TLS)",
    "schema.registry.ssl.key.location": "PEM private key of the client certificate",
    "schema.registry.ssl.key.password": "password of that key (secret)",
    "schema.registry.ssl.endpoint.identification.algorithm": "https (default) or empty: "
    "check the registry's host name against its certificate",
}
_USER_INFO = ("basic.auth.user.info", "schema.registry.basic.auth.user.info")
_CA = ("schema.registry.ssl.ca.location", "schema.registry.ssl.truststore.location")


def _registry_properties(value: Any) -> dict[str, str | SecretStr]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        expected = "a mapping of schema registry client properties (schema.registry.url ...)"
        # Any text holding "@" may be a URL with user:password in it: never shown.
        hidden = "@" in str(value)
        raise problems_error(
            [((), describe("wrong type", got=value, expected=expected, secret=hidden))]
        )
    props: dict[str, str | SecretStr] = {}
    problems: list[Problem] = []
    for key, item in value.items():
        secret = is_secret_key(key)
        text = reveal(item) if isinstance(item, SecretStr) else scalar_text(item)
        if not isinstance(key, str) or key not in REGISTRY_PROPERTIES:
            problems.append(((str(key),), suggest_key(str(key), REGISTRY_PROPERTIES)))
        elif text is None:
            expected = "a string, number or boolean"
            hidden = secret or "@" in str(item)
            problems.append(
                ((key,), describe("wrong type", got=item, expected=expected, secret=hidden))
            )
        else:
            # A URL may carry user:password (basic.auth.credentials.source: URL).
            hidden = secret or (key == "schema.registry.url" and "@" in text)
            props[key] = SecretStr(text) if hidden else text
    problems.extend(_property_problems(props))
    _raise(problems)
    return props


def _property_problems(props: Mapping[str, str | SecretStr]) -> list[Problem]:
    problems: list[Problem] = []
    for spellings in (_USER_INFO, _CA):
        if all(key in props for key in spellings):
            what = f"the same setting as {spellings[0]!r}, given twice"
            problems.append(((spellings[1],), describe(what, expected="one spelling")))
    for url in map(str.strip, reveal(props.get("schema.registry.url", "")).split(",")):
        if url and not re.match(r"https?://[^/\s]+", url):
            what = "not an http(s) URL"
            expected = "e.g. http://registry:8081 (several: comma-separated)"
            got = url_without_user(url, mark=f"{MASK}@")
            problems.append((("schema.registry.url",), describe(what, got=got, expected=expected)))
        elif "@" in re.sub(r"^[^/?#]*", "", url.partition("://")[2]):
            # An unencoded / ? or # in user:password ends the host early: the URL parser
            # would then take part of the password for a host or port.
            what = "user:password with an unencoded '/', '?' or '#' (or '@' in the path)"
            expected = "user info percent-encoded (%2F, %3F, %23, %40)"
            got = url_without_user(url, mark=f"{MASK}@")
            problems.append((("schema.registry.url",), describe(what, got=got, expected=expected)))
    source = reveal(props.get("basic.auth.credentials.source", "USER_INFO")).upper()
    if source not in ("USER_INFO", "URL"):
        problems.append(
            (
                ("basic.auth.credentials.source",),
                describe("not supported", got=source, expected="USER_INFO or URL"),
            )
        )
    store = reveal(props.get("schema.registry.ssl.truststore.type", "PEM")).upper()
    if store != "PEM":
        what = "only PEM files can be read outside the JVM"
        expected = "PEM (convert the store: keytool -exportcert -rfc)"
        problems.append(
            (("schema.registry.ssl.truststore.type",), describe(what, got=store, expected=expected))
        )
    for key in _USER_INFO:
        info = props.get(key)
        if info is not None and ":" not in reveal(info):
            what = "not of the form user:password"
            problems.append(((key,), describe(what, got=info, expected="user:password")))
    return problems


RegistryProperties = Annotated[
    dict[str, str | SecretStr],
    BeforeValidator(_registry_properties),
    FieldDoc(
        "map of registry client properties",
        "a mapping of schema.registry.url, basic.auth.* and schema.registry.ssl.* properties",
    ),
]


class RegistryConnection(K2KModel):
    """One cluster's schema registry (Confluent-compatible API), K2K's ``registry.config``."""

    config: RegistryProperties = Field(
        default_factory=dict,
        description="Registry client properties: `schema.registry.url` (required with "
        "`features.schemaMapping`), `basic.auth.credentials.source`, `basic.auth.user.info` "
        "(or `schema.registry.basic.auth.user.info`), "
        "`schema.registry.ssl.{ca,certificate,key}.location` (PEM files; "
        "`schema.registry.ssl.truststore.location` with `truststore.type: PEM` is read as the "
        "CA file), `schema.registry.ssl.key.password`, "
        "`schema.registry.ssl.endpoint.identification.algorithm`. Secrets are masked.",
    )

    @property
    def url(self) -> str | None:
        """The configured URL(s), or None when the connection is not configured."""
        url = self.config.get("schema.registry.url")
        return reveal(url) if url is not None else None

    def setting(self, *keys: str) -> str | None:
        """The plain value of the first of ``keys`` that is set (secrets revealed)."""
        for key in keys:
            if key in self.config:
                return reveal(self.config[key])
        return None


_STRATEGIES = {
    "topicnamestrategy": "TopicNameStrategy",
    "recordnamestrategy": "RecordNameStrategy",
    "topicrecordnamestrategy": "TopicRecordNameStrategy",
}
_STRATEGY_EXPECTED = (
    "TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy (the Java class name "
    "io.confluent.kafka.serializers.subject.<name> is accepted too)"
)


def _strategy(value: Any) -> str:
    name = value.rsplit(".", 1)[-1].lower() if isinstance(value, str) else None
    if name not in _STRATEGIES:
        raise problems_error(
            [
                (
                    (),
                    describe(
                        "unknown subject name strategy", got=value, expected=_STRATEGY_EXPECTED
                    ),
                )
            ]
        )
    return _STRATEGIES[name]


SubjectNameStrategy = Annotated[
    Literal["TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"],
    BeforeValidator(_strategy),
    PlainSerializer(str, return_type=str),
    FieldDoc(
        "TopicNameStrategy | RecordNameStrategy | TopicRecordNameStrategy", _STRATEGY_EXPECTED
    ),
]


class SubjectNameStrategies(K2KModel):
    """Under which subject of the target registry each facet's schemas are registered."""

    key: SubjectNameStrategy = Field(
        "TopicNameStrategy",
        description="Subject of key schemas: `TopicNameStrategy` (`<target topic>-key`), "
        "`RecordNameStrategy` (the record's full name) or `TopicRecordNameStrategy` "
        "(`<target topic>-<record full name>`).",
    )
    value: SubjectNameStrategy = Field(
        "TopicNameStrategy",
        description="Subject of value schemas (`<target topic>-value` by default); same "
        "choices as `key`.",
    )


class SchemaMappingRule(K2KModel):
    """Which facets of the topics matching ``pattern`` carry wire-format schema ids."""

    pattern: str = Field(
        min_length=1,
        description="Regular expression matched against whole source topic names (required).",
    )
    key: Flag = Field(True, description="Rewrite the schema ids of record keys.")
    value: Flag = Field(True, description="Rewrite the schema ids of record values.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            what = f"not a regular expression ({exc})"
            raise problems_error(
                [((), describe(what, got=value, expected="a Python/Java regex"))]
            ) from None
        return value


class SchemaMapping(K2KModel):
    """Schema-id rewriting between the source and target registries (docs/schema-mapping.md)."""

    topics: Annotated[
        list[SchemaMappingRule],
        FieldDoc("list of rules", "a list of rules, each {pattern, key, value}"),
    ] = Field(
        default_factory=list,
        description="Per-topic rules, each `{pattern, key, value}`: `pattern` a regular "
        "expression matched against the whole source topic name (required), `key` and `value` "
        "`enabled` (default) or `disabled`. The first rule whose pattern matches the source "
        "topic decides; a topic no rule matches gets both facets.",
    )
    subject_name_strategy: SubjectNameStrategies = Field(
        default_factory=SubjectNameStrategies,
        description="k2k extension: the subject naming of the target registry, per facet.",
    )
    on_non_wire_format: Literal["pass", "fail"] = Field(
        "pass",
        description="k2k extension. A mapped key or value that is not in wire format (no magic "
        "byte 0, or shorter than 5 bytes; null is never touched): `pass` copies it unchanged, "
        "`fail` stops the pipeline naming the record (exactly-once: its batch is aborted).",
    )
    retry_timeout: Duration = Field(
        timedelta(seconds=20),
        description="k2k extension. How long a registry that does not answer (connection "
        "refused, timeout, HTTP 5xx/429) is retried, with backoff, before the pipeline stops "
        "naming the subject and schema id. Exactly-once: at most half of the producer's "
        "`transaction.timeout.ms`.",
    )
    request_timeout: Duration = Field(
        timedelta(seconds=10),
        description="k2k extension. Timeout of one registry HTTP request.",
    )

    def facets(self, topic: str) -> tuple[bool, bool]:
        """(key, value): whether ``topic``'s keys and values are mapped."""
        for rule in self.topics:
            if re.fullmatch(rule.pattern, topic):
                return rule.key, rule.value
        return True, True


def schema_mapping_problems(
    enabled: bool,
    source: RegistryConnection,
    target: RegistryConnection,
    mapping: SchemaMapping,
    transaction_timeout_ms: int | None,
) -> list[Problem]:
    """Cross-field rules of the feature (the pipeline model calls it): both registries are
    configured, and exactly-once retries end before the transaction would time out."""
    if not enabled:
        return []
    problems: list[Problem] = []
    for cluster, connection in (("source", source), ("target", target)):
        if not connection.url:
            what = "missing: features.schemaMapping is enabled"
            problems.append(
                (
                    (cluster, "registry", "config", "schema.registry.url"),
                    describe(what, expected=f"the URL of the {cluster} cluster's schema registry"),
                )
            )
    retry_ms = mapping.retry_timeout.total_seconds() * 1000
    if transaction_timeout_ms is not None and retry_ms * 2 > transaction_timeout_ms:
        what = (
            "too long for exactly-once: the open transaction waits for the registry and "
            f"transaction.timeout.ms is {transaction_timeout_ms}"
        )
        problems.append(
            (
                ("schemaMapping", "retryTimeout"),
                describe(
                    what,
                    got=format_duration(mapping.retry_timeout),
                    expected="at most half of transaction.timeout.ms",
                ),
            )
        )
    return problems
