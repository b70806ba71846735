"""The TLS broker the integration tests share (the ``tls_broker`` fixture starts one per
session: brokers are costly).

It has four listeners: PLAINTEXT (the tests' own admin, produce and read-back), CONTROLLER, SSL
with required client certificates, and SASL_SSL with SCRAM-SHA-512. Its certificates come from a
CA made for it (:mod:`tests.helpers.tls`). The StandardAuthorizer denies whatever no ACL
allows; the tests' PLAINTEXT principal (ANONYMOUS, also the controller's), the client
certificate's principal and the SCRAM user ``writer`` are super users, while the SCRAM user
``reader`` gets what docs/operations.md says a source needs and no Write anywhere.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from k2k.local import LocalCluster, free_port
from tests.helpers.tls import TlsFiles, make_ca, make_pki

READER_PASSWORD = "r3ader-Pa55word"
WRITER_PASSWORD = "wr1ter-Pa55word"
KEY_PASSWORD = "k3y-Pa55word"
SECRETS = (READER_PASSWORD, WRITER_PASSWORD, KEY_PASSWORD)
CLIENT_CN = "k2k-client"
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="{user}" password="{password}";'
)


@dataclass(frozen=True)
class TlsBroker:
    """Bootstrap addresses of the TLS broker's listeners and the PEM files of its CA."""

    plaintext: str
    ssl: str
    sasl_ssl: str
    files: TlsFiles
    wrong_ca: Path
    """A CA certificate that did not sign the broker's certificate."""


def _broker_settings(
    port: int, ssl_port: int, sasl_port: int, controller: int, files: TlsFiles
) -> dict[str, object]:
    host = "127.0.0.1"
    return {
        "listeners": (
            f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller},"
            f"SSL://{host}:{ssl_port},SASL_SSL://{host}:{sasl_port}"
        ),
        "advertised.listeners": (
            f"PLAINTEXT://{host}:{port},SSL://{host}:{ssl_port},SASL_SSL://{host}:{sasl_port}"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": files.broker_keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": files.ca,
        "listener.name.ssl.ssl.client.auth": "required",
        # The client certificate's principal is its CN, not the whole DN.
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # ANONYMOUS: the PLAINTEXT and CONTROLLER listeners (the broker talks to its own
        # controller as ANONYMOUS too, so without it the node cannot work).
        "super.users": f"User:ANONYMOUS;User:writer;User:{CLIENT_CN}",
    }


def _reader_acls() -> list[AclBinding]:
    """What docs/operations.md says a source principal needs, for every topic and group:
    Describe and Read on topics, DescribeConfigs on topics (autoCreateTopics), Describe on
    groups. No Write, no Create, nothing on the cluster."""
    topic_ops = (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.DESCRIBE_CONFIGS)
    return [
        *(
            AclBinding(
                ResourceType.TOPIC,
                "*",
                ResourcePatternType.LITERAL,
                "User:reader",
                "*",
                op,
                AclPermissionType.ALLOW,
            )
            for op in topic_ops
        ),
        AclBinding(
            ResourceType.GROUP,
            "*",
            ResourcePatternType.LITERAL,
            "User:reader",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        ),
    ]


@contextlib.contextmanager
def running_tls_broker(root: Path) -> Iterator[TlsBroker]:
    """A TLS broker with its PKI under ``root``, its SCRAM users and ACLs; stopped on exit."""
    files = make_pki(CLIENT_CN).write(root / "pki", KEY_PASSWORD)
    wrong_ca = root / "wrong-ca.pem"
    wrong_ca.write_bytes(make_ca("not the broker's CA").cert_pem())
    port, ssl_port, sasl_port, controller = free_port(), free_port(), free_port(), free_port()
    cluster = LocalCluster(
        "tls",
        port,
        root / "broker",
        controller_port=controller,
        heap="384m",
        broker_overrides=_broker_settings(port, ssl_port, sasl_port, controller, files),
        owner_pid=os.getpid(),
    )
    cluster.start(timeout=120)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        upserts = [
            UserScramCredentialUpsertion(
                user,
                ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                password.encode(),
            )
            for user, password in (("reader", READER_PASSWORD), ("writer", WRITER_PASSWORD))
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result()
        for future in admin.create_acls(_reader_acls(), request_timeout=30).values():
            future.result()
        yield TlsBroker(
            cluster.bootstrap,
            f"127.0.0.1:{ssl_port}",
            f"127.0.0.1:{sasl_port}",
            files,
            wrong_ca,
        )
    finally:
        cluster.stop()


# -- client settings as a user writes them (Java client names) ---------------------------------
def ssl_client(broker: TlsBroker, ca: Path | None = None) -> dict[str, str]:
    """TLS with a client certificate: PEM truststore, PEM key and chain inline (read from
    files by placeholders), the key encrypted with :data:`KEY_PASSWORD`."""
    return {
        "bootstrap.servers": broker.ssl,
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca or broker.files.ca),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": f"${{file:{broker.files.client_cert}}}",
        "ssl.keystore.key": f"${{file:{broker.files.client_key}}}",
        "ssl.key.password": KEY_PASSWORD,
    }


def sasl_ssl_client(broker: TlsBroker, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM_JAAS.format(user=user, password=password),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(broker.files.ca),
    }
