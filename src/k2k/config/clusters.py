"""``source`` and ``target``: each cluster's alias, registry, timeout and Kafka client maps.

The client maps are checked and translated by :mod:`k2k.config.clients`; the sections here
only hold them per role and hand out librdkafka properties through ``client(role)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Annotated, Any, ClassVar

from pydantic import Field, SecretStr, model_validator

from k2k.config import clients
from k2k.config.base import K2KModel
from k2k.config.base import raise_problems as _raise
from k2k.config.fields import Duration
from k2k.config.hints import FieldDoc
from k2k.config.inert import ClientMap
from k2k.config.schema_mapping import RegistryConnection
from k2k.errors import ConfigError

__all__ = [
    "KafkaProperties",
    "SourceCluster",
    "SourceKafka",
    "TargetCluster",
    "TargetKafka",
]

KafkaProperties = Annotated[
    dict[str, str | SecretStr],
    FieldDoc(
        "map of Kafka client properties",
        "a mapping of Kafka client property names (Java or librdkafka spelling) to values",
    ),
    ClientMap(),
]


class _KafkaRoles(K2KModel):
    """Property maps per client role, checked together (see :func:`clients.check_cluster`).

    One before-validator checks the whole ``kafka`` section, so a file with a JKS truststore, a
    Java-only property and a missing ``bootstrap.servers`` gets all three reported at once.
    """

    @model_validator(mode="before")
    @classmethod
    def _check_clients(cls, data: Any) -> Any:
        if data is not None and not isinstance(data, Mapping):
            return data  # pydantic reports the wrong type
        roles = tuple(name for name in cls.model_fields if name != "common")
        maps, problems = clients.check_cluster(data or {}, roles)
        _raise(problems)
        return maps


_COMMON = "Kafka client properties shared by every client of this cluster (a role's map wins)."


class SourceKafka(_KafkaRoles):
    """Kafka client properties for the source cluster (read only: k2k never writes to it)."""

    common: KafkaProperties = Field(default_factory=dict, description=_COMMON)
    consumer: KafkaProperties = Field(
        default_factory=dict, description="Properties of the consumers reading replicated topics."
    )
    admin: KafkaProperties = Field(
        default_factory=dict, description="Properties of the admin client (topic discovery)."
    )


class TargetKafka(_KafkaRoles):
    """Kafka client properties for the target cluster."""

    common: KafkaProperties = Field(default_factory=dict, description=_COMMON)
    producer: KafkaProperties = Field(
        default_factory=dict,
        description="Properties of the producers writing replicated records and progress records.",
    )
    consumer: KafkaProperties = Field(
        default_factory=dict, description="Properties of the consumers reading the control topics."
    )
    admin: KafkaProperties = Field(
        default_factory=dict, description="Properties of the admin client (topic creation, checks)."
    )


_ALIAS_DOC = FieldDoc(
    "string | null", "a name made of letters, digits, '.', '_' and '-' (it is used in topic names)"
)


class _Cluster(K2KModel):
    """Behaviour shared by the source and target sections."""

    ROLES: ClassVar[tuple[str, ...]] = ()
    CLUSTER: ClassVar[str] = ""
    kafka: Any
    alias: Annotated[str | None, _ALIAS_DOC] = Field(
        None,
        min_length=1,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="The cluster's name in MirrorMaker 2 terms (MM2's `clusters` entries): "
        "used by `replication.sink.topic: {policy: ...}` and heartbeats. Null: unnamed.",
    )

    def _layers(self, role: str) -> list[tuple[str, clients.Properties]]:
        return [("common", self.kafka.common), (role, getattr(self.kafka, role))]

    def client(
        self, role: str, over: Sequence[tuple[str, clients.Properties]] = ()
    ) -> dict[str, str]:
        """A new dict of librdkafka properties for ``role``: common merged with the role's map,
        then with the maps of ``over`` (named layers such as another section's properties)."""
        if role not in self.ROLES:
            raise ValueError(
                f"unknown {self.CLUSTER} client role {role!r}; expected one of {self.ROLES}"
            )
        props, problems = clients.translate([*self._layers(role), *over])
        if problems:  # pragma: no cover - validation refused these already
            raise ConfigError(
                [f"{self.CLUSTER}.kafka.{'.'.join(map(str, p))}: {t}" for p, t in problems]
            )
        return props

    def bootstrap_servers(self) -> frozenset[str]:
        """The set of bootstrap addresses of this cluster, for comparing clusters."""
        values = [self.client(role).get("bootstrap.servers", "") for role in self.ROLES]
        return frozenset(a.strip().lower() for v in values for a in v.split(",") if a.strip())


_REGISTRY = (
    "The cluster's schema registry (`config: {schema.registry.url: ...}`), used by "
    "`features.schemaMapping`."
)


class SourceCluster(_Cluster):
    """The cluster records are read from."""

    ROLES: ClassVar[tuple[str, ...]] = clients.SOURCE_ROLES
    CLUSTER: ClassVar[str] = "source"

    kafka: Annotated[
        SourceKafka, FieldDoc("mapping", "a mapping with common, consumer and admin property maps")
    ] = Field(
        default_factory=dict,
        validate_default=True,
        description="Kafka clients of the source cluster.",
    )
    registry: RegistryConnection = Field(default_factory=RegistryConnection, description=_REGISTRY)
    connect_timeout: Duration = Field(
        timedelta(seconds=15),
        description="How long k2k waits for the source cluster to answer at start and for "
        "admin calls; an admin call about many topics or partitions that the cluster answers "
        "bit by bit (leaders still being elected, topics still being created) waits on while "
        "it gets new answers (docs/operations.md#retries-at-start).",
    )


class TargetCluster(_Cluster):
    """The cluster records are written to; it also holds k2k's control topics."""

    ROLES: ClassVar[tuple[str, ...]] = clients.TARGET_ROLES
    CLUSTER: ClassVar[str] = "target"

    kafka: Annotated[
        TargetKafka,
        FieldDoc("mapping", "a mapping with common, producer, consumer and admin property maps"),
    ] = Field(
        default_factory=dict,
        validate_default=True,
        description="Kafka clients of the target cluster.",
    )
    registry: RegistryConnection = Field(default_factory=RegistryConnection, description=_REGISTRY)
    connect_timeout: Duration = Field(
        timedelta(seconds=15),
        description="How long k2k waits for the target cluster to answer at start and for "
        "admin calls; an admin call about many topics or partitions that the cluster answers "
        "bit by bit (leaders still being elected, topics still being created) waits on while "
        "it gets new answers (docs/operations.md#retries-at-start).",
    )
