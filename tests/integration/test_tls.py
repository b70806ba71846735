"""TLS on real brokers: replication over SSL (client certificates) and over SASL_SSL (SCRAM)
from a source whose principal may only read; a wrong CA, and a missing client certificate,
failing with one clear line; no password in any output, also at -vv.

One extra broker serves as the TLS source in some tests and the TLS target in others. It has
four listeners: PLAINTEXT (the tests' own admin, produce and read-back), CONTROLLER, SSL with
required client certificates, and SASL_SSL with SCRAM-SHA-512. Its certificates come from a
CA the fixture makes (:mod:`tests.tlsutil`). The StandardAuthorizer denies whatever no ACL
allows; the tests' PLAINTEXT principal (ANONYMOUS, also the controller's), the client
certificate's principal and the SCRAM user ``writer`` are super users, while the SCRAM user
``reader`` gets what docs/operations.md says a source needs and no Write anywhere.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
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
from tests.integration.conftest import BASE_TS, k2k_cli, pipeline_dict, write_pipeline
from tests.kafkautil import Rec, create_topic, produce, read_all
from tests.tlsutil import TlsFiles, make_ca, make_pki

pytestmark = pytest.mark.integration

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


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    root = tmp_path_factory.mktemp("tls")
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


# -- helpers -----------------------------------------------------------------------------------
def _records(n: int) -> list[tuple[int, bytes, bytes, list[tuple[str, bytes]], int]]:
    return [
        (i % 3, f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())], BASE_TS + i)
        for i in range(n)
    ]


def _content(records: dict[int, list[Rec]]) -> dict[int, list[Any]]:
    return {p: [r.content() for r in recs] for p, recs in records.items()}


def _run(
    tmp_path: Path, doc: dict[str, Any], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``k2k start --until-caught-up [args]`` on the pipeline ``doc``."""
    pipeline = str(write_pipeline(tmp_path, doc))
    return k2k_cli("start", "--until-caught-up", *args, "-f", pipeline, timeout=timeout)


def _assert_no_secret(result: subprocess.CompletedProcess) -> None:
    shown = result.stdout + result.stderr
    for secret in SECRETS:
        assert secret not in shown, f"a secret appears in the output: {secret[:3]}..."


# -- tests ---------------------------------------------------------------------------------------
def test_replicates_from_an_ssl_source(clusters, tls_broker, tmp_path, topic_name):
    t = topic_name("ssl-src")
    create_topic(tls_broker.plaintext, t, 3)
    produce(tls_broker.plaintext, t, _records(150))
    doc = pipeline_dict(clusters, topic_name("pssl"), [t])
    doc["source"]["kafka"]["common"] = ssl_client(tls_broker)
    result = _run(tmp_path, doc)
    assert result.returncode == 0, result.stderr
    _assert_no_secret(result)
    src = read_all(tls_broker.plaintext, t)
    assert sum(map(len, src.values())) == 150
    assert _content(read_all(clusters.target, t)) == _content(src)


def test_replicates_into_an_ssl_target(clusters, tls_broker, tmp_path, topic_name):
    t = topic_name("ssl-dst")
    create_topic(clusters.source, t, 3)
    produce(clusters.source, t, _records(150))
    doc = pipeline_dict(clusters, topic_name("pssl"), [t])
    doc["target"]["kafka"]["common"] = ssl_client(tls_broker)
    result = _run(tmp_path, doc)
    assert result.returncode == 0, result.stderr
    _assert_no_secret(result)
    src = read_all(clusters.source, t)
    assert _content(read_all(tls_broker.plaintext, t)) == _content(src)


def _assert_reader_cannot_write(broker: TlsBroker, topic: str) -> None:
    """The ACLs hold: a record the ``reader`` principal sends is refused as unauthorized."""
    producer = Producer(  # the test's own client: librdkafka's names
        {
            "bootstrap.servers": broker.sasl_ssl,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "reader",
            "sasl.password": READER_PASSWORD,
            "ssl.ca.location": str(broker.files.ca),
            "enable.idempotence": False,  # idempotence would ask for IdempotentWrite first
            "message.timeout.ms": 30_000,
        }
    )
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"denied", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(60) == 0
    assert len(errors) == 1 and errors[0] is not None, errors
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[0]


def test_replicates_over_sasl_ssl_from_a_read_only_source(tls_broker, tmp_path, topic_name):
    """Both sides SASL_SSL (one broker, the copy under a prefix); the source principal may
    not write anywhere, and debug logging (-vv, librdkafka's lines too) shows no password."""
    t = topic_name("sasl-ssl")
    create_topic(tls_broker.plaintext, t, 3)
    produce(tls_broker.plaintext, t, _records(300))
    _assert_reader_cannot_write(tls_broker, t)
    same = SimpleNamespace(source=tls_broker.sasl_ssl, target=tls_broker.sasl_ssl)
    doc = pipeline_dict(same, topic_name("psaslssl"), [t])
    doc["replication"][1]["sink"]["topic"] = {"prefix": "copy."}
    doc["source"]["kafka"]["common"] = sasl_ssl_client(tls_broker, "reader", READER_PASSWORD)
    doc["target"]["kafka"]["common"] = sasl_ssl_client(tls_broker, "writer", WRITER_PASSWORD)
    result = _run(tmp_path, doc, "-vv")
    assert result.returncode == 0, result.stderr
    _assert_no_secret(result)
    src = read_all(tls_broker.plaintext, t)
    assert sum(map(len, src.values())) == 300
    assert _content(read_all(tls_broker.plaintext, f"copy.{t}")) == _content(src)


def _one_tls_error_line(result: subprocess.CompletedProcess, side: str, bootstrap: str) -> str:
    """The run failed with exactly one ``error:`` line (no traceback) naming the cluster,
    its address and a failed TLS handshake; returns that line."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith(f"error: {side} cluster at {bootstrap}: TLS handshake failed"), line
    _assert_no_secret(result)
    return line


@pytest.mark.parametrize("side", ["source", "target"])
def test_wrong_ca_is_one_clear_line(clusters, tls_broker, tmp_path, topic_name, side):
    """A truststore without the CA that signed the broker's certificate; -vv shows no secret."""
    doc = pipeline_dict(clusters, topic_name("pbadca"), ["x"])
    doc[side]["kafka"]["common"] = ssl_client(tls_broker, ca=tls_broker.wrong_ca)
    doc[side]["connectTimeout"] = "5 seconds"
    result = _run(tmp_path, doc, "-vv", timeout=120)
    line = _one_tls_error_line(result, side, tls_broker.ssl)
    assert "certificate verify failed" in line and "ssl.truststore.location" in line, line


def test_no_client_certificate_is_one_clear_line(clusters, tls_broker, tmp_path, topic_name):
    """The SSL listener requires a client certificate: without one the broker ends the
    handshake, which is said as such, not as an unreachable cluster."""
    conf = {
        key: value
        for key, value in ssl_client(tls_broker).items()
        if not key.startswith(("ssl.keystore.", "ssl.key."))
    }
    doc = pipeline_dict(clusters, topic_name("pnocert"), ["x"])
    doc["target"]["kafka"]["common"] = conf
    doc["target"]["connectTimeout"] = "5 seconds"
    result = _run(tmp_path, doc, timeout=120)
    line = _one_tls_error_line(result, "target", tls_broker.ssl)
    assert "alert" in line and "refused this client's certificate" in line, line
