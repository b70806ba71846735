"""Schema mapping (``features.schemaMapping``): rewrite Confluent wire-format schema ids from
the source registry's to the target registry's (docs/schema-mapping.md).

* :mod:`~k2k.schemamapping.registry` — the Confluent API calls, retries and failure classes;
* :mod:`~k2k.schemamapping.mapper` — the per-runner resolver with its caches, and the
  per-topic transform the copier applies to each run of records.

:func:`schema_transforms` is the planner's entry point: it decides per topic, once, which
facets are mapped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from k2k.errors import SchemaMappingError
from k2k.schemamapping.mapper import SchemaIdRewrite, SchemaMapper
from k2k.schemamapping.registry import (
    RegistryClient,
    RegistryEndpoint,
    RegistryFailure,
    RegistryUnavailable,
)

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

log = logging.getLogger("k2k.schemamapping")

__all__ = [
    "SchemaIdRewrite",
    "SchemaMapper",
    "check_registries",
    "registry_endpoints",
    "schema_mapper",
    "schema_transforms",
]


def registry_endpoints(cfg: PipelineConfig) -> tuple[RegistryEndpoint, RegistryEndpoint]:
    """Runs on: driver. The source and target registries of the pipeline."""
    sm = cfg.schema_mapping
    request_s, retry_s = sm.request_timeout.total_seconds(), sm.retry_timeout.total_seconds()
    return (
        RegistryEndpoint.from_config("source", cfg.source.registry, request_s, retry_s),
        RegistryEndpoint.from_config("target", cfg.target.registry, request_s, retry_s),
    )


def check_registries(cfg: PipelineConfig) -> None:
    """Runs on: driver, at start. A wrong setting (TLS files that do not load here,
    credentials refused, a URL that is not the Confluent API) raises one line naming the
    connection before any record is read. A registry that does not answer only warns: it
    may be back before a record needs it, and a record that does waits as at any time
    (``retryTimeout``, then the one-line error naming subject and id)."""
    for endpoint in registry_endpoints(cfg):
        try:
            RegistryClient(endpoint).check()
        except RegistryUnavailable as exc:
            log.warning(
                "%s.registry.config: %s; records that need it will wait up to "
                "schemaMapping.retryTimeout for it",
                endpoint.cluster,
                exc,
            )
        except RegistryFailure as exc:
            raise SchemaMappingError(f"{endpoint.cluster}.registry.config: {exc}") from None


def schema_mapper(cfg: PipelineConfig) -> SchemaMapper:
    """Runs on: driver. The pipeline's mapper (no client, no cache until an executor uses it)."""
    sm = cfg.schema_mapping
    return SchemaMapper(
        *registry_endpoints(cfg),
        key_strategy=sm.subject_name_strategy.key,
        value_strategy=sm.subject_name_strategy.value,
        on_non_wire_format=sm.on_non_wire_format,
    )


def schema_transforms(cfg: PipelineConfig) -> Callable[[str, str], SchemaIdRewrite | None] | None:
    """Runs on: driver. None when schema mapping is off; else a function of (source topic,
    target topic) giving the topic's transform, or None when the rules map neither facet.
    Every transform of one call shares one mapper; its caches are per Python worker process
    and registry pair (:func:`~k2k.schemamapping.mapper.process_caches`)."""
    if not cfg.features.schema_mapping:
        return None
    mapper = schema_mapper(cfg)

    def transform(source: str, target: str) -> SchemaIdRewrite | None:
        keys, values = cfg.schema_mapping.facets(source)
        return SchemaIdRewrite(mapper, target, keys, values) if keys or values else None

    return transform
