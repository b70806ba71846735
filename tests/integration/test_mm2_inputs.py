"""``k2k start --mm2 --until-caught-up`` with the other inputs ``--mm2`` recognises: the same
flow written as a MirrorSourceConnector's properties, as its Connect REST JSON and as a Strimzi
KafkaMirrorMaker2 resource replicates into the TLS broker's SASL_SSL listener (SCRAM-SHA-512)
exactly what the equivalent dedicated-mode file would: the pipelines are equal, and the target
topic ``<alias>.<topic>`` holds the source's records, partition by partition. The Strimzi
resource names its CA and password by Kubernetes Secret, read from ``$K2K_SECRETS_DIR``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from k2k.config.mm2 import read_mm2
from tests.helpers.kafka import create_topic, list_topics, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli
from tests.helpers.tlsbroker import SCRAM_JAAS, WRITER_PASSWORD, TlsBroker

pytestmark = pytest.mark.integration

TARGET = "secure"


def _connector(source: str, broker: TlsBroker, alias: str, topic: str) -> dict[str, str]:
    """The flow as a Connect cluster runs its MirrorSourceConnector (Java client names)."""
    return {
        "name": f"{alias}-to-{TARGET}",
        "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "tasks.max": "2",
        "source.cluster.alias": alias,
        "target.cluster.alias": TARGET,
        "source.cluster.bootstrap.servers": source,
        "target.cluster.bootstrap.servers": broker.sasl_ssl,
        "target.cluster.security.protocol": "SASL_SSL",
        "target.cluster.sasl.mechanism": "SCRAM-SHA-512",
        "target.cluster.sasl.jaas.config": SCRAM_JAAS.format(
            user="writer", password=WRITER_PASSWORD
        ),
        "target.cluster.ssl.truststore.type": "PEM",
        "target.cluster.ssl.truststore.location": str(broker.files.ca),
        "topics": topic.replace(".", "\\."),
        "sync.topic.acls.enabled": "false",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
    }


def _strimzi(source: str, broker: TlsBroker, alias: str, topic: str) -> dict:
    """The flow as a v1beta2 KafkaMirrorMaker2: the CA and password by Secret reference."""
    return {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": "mirror"},
        "spec": {
            "replicas": 1,
            "connectCluster": TARGET,
            "clusters": [
                {"alias": alias, "bootstrapServers": source},
                {
                    "alias": TARGET,
                    "bootstrapServers": broker.sasl_ssl,
                    "tls": {
                        "trustedCertificates": [
                            {"secretName": "secure-cluster-ca-cert", "certificate": "ca.crt"}
                        ]
                    },
                    "authentication": {
                        "type": "scram-sha-512",
                        "username": "writer",
                        "passwordSecret": {"secretName": "writer", "password": "password"},
                    },
                },
            ],
            "mirrors": [
                {
                    "sourceCluster": alias,
                    "targetCluster": TARGET,
                    "sourceConnector": {
                        "tasksMax": 2,
                        "config": {"sync.topic.acls.enabled": "false"},
                    },
                    "topicsPattern": topic.replace(".", "\\."),
                }
            ],
        },
    }


def _dedicated(shape: str, source: str, broker: TlsBroker, alias: str, topic: str, secrets: Path):
    """The equivalent MM2 dedicated-mode file: the cluster keys as the input gives them (the
    connector's Java client names, or what Strimzi derives from tls and authentication)."""
    if shape == "strimzi":
        clients = {
            f"{alias}.security.protocol": "PLAINTEXT",
            f"{TARGET}.security.protocol": "SASL_SSL",
            f"{TARGET}.ssl.ca.location": f"{secrets}/secure-cluster-ca-cert/ca.crt",
            f"{TARGET}.sasl.mechanism": "SCRAM-SHA-512",
            f"{TARGET}.sasl.username": "writer",
            f"{TARGET}.sasl.password": WRITER_PASSWORD,
        }
    else:
        connector = _connector(source, broker, alias, topic).items()
        clients = {
            f"{TARGET}.{k.removeprefix('target.cluster.')}": v
            for k, v in connector
            if k.startswith("target.cluster.") and not k.endswith((".alias", ".servers"))
        }
    flow = f"{alias}->{TARGET}"
    lines = [
        f"clusters = {alias}, {TARGET}",
        f"{alias}.bootstrap.servers = {source}",
        f"{TARGET}.bootstrap.servers = {broker.sasl_ssl}",
        *(f"{k} = {v}" for k, v in clients.items()),
        f"{flow}.enabled = true",
        f"{flow}.tasks.max = 2",
        f"{flow}.topics = {topic.replace('.', chr(92) * 2 + '.')}",
        f"{flow}.sync.topic.acls.enabled = false",
        f"{flow}.emit.checkpoints.enabled = false",
        f"{flow}.emit.heartbeats.enabled = false",
    ]
    return "\n".join(lines) + "\n"


def _write_input(shape: str, path: Path, source: str, broker: TlsBroker, alias: str, topic: str):
    if shape == "strimzi":
        path.write_text(yaml.safe_dump(_strimzi(source, broker, alias, topic)), encoding="utf-8")
        return
    config = _connector(source, broker, alias, topic)
    if shape == "connect-rest-json":
        body = {"name": config.pop("name"), "config": config}
        path.write_text(json.dumps(body, indent=2), encoding="utf-8")
        return
    lines = [f"{k} = {v.replace(chr(92), chr(92) * 2)}" for k, v in config.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("shape", "replicate"),
    [("connector-properties", False), ("connect-rest-json", False), ("strimzi", True)],
)
def test_each_input_shape_reads_as_the_dedicated_file_and_one_replicates(
    clusters,
    tls_broker: TlsBroker,
    tmp_path: Path,
    topic_name,
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
    replicate: bool,
) -> None:
    """Each shape gives the pipeline its dedicated-mode file gives; the richest (Strimzi's
    resource, with its secrets and auth) also runs, end to end over SASL_SSL: the other
    shapes reach the same pipeline, so a run of theirs would prove nothing more."""
    topic, alias = topic_name(shape), f"src_{shape.replace('-', '_')}"
    create_topic(clusters.source, topic, 3)
    records = [
        (i % 3, f"k{i}".encode(), f"{shape}-{i}".encode(), [("h", b"%d" % i)], BASE_TS + i)
        for i in range(120)
    ]
    produce(clusters.source, topic, records)
    secrets = tmp_path / "secrets"
    for secret, key, text in (
        ("secure-cluster-ca-cert", "ca.crt", tls_broker.files.ca.read_text()),
        ("writer", "password", WRITER_PASSWORD),
    ):
        (secrets / secret).mkdir(parents=True, exist_ok=True)
        (secrets / secret / key).write_text(text, encoding="utf-8")
    path = tmp_path / {"strimzi": "kmm2.yaml", "connect-rest-json": "msc.json"}.get(
        shape, "msc.properties"
    )
    _write_input(shape, path, clusters.source, tls_broker, alias, topic)
    dedicated = tmp_path / "mm2.properties"
    dedicated.write_text(_dedicated(shape, clusters.source, tls_broker, alias, topic, secrets))
    env = {"K2K_SECRETS_DIR": str(secrets)}
    monkeypatch.setenv("K2K_SECRETS_DIR", str(secrets))
    (mine,), (expected,) = read_mm2(path).flows, read_mm2(dedicated).flows
    assert mine.pipeline == expected.pipeline
    if not replicate:
        return

    done = k2k_cli("start", "--mm2", str(path), "--until-caught-up", timeout=400, env=env)

    assert done.returncode == 0, done.stderr[-3000:]
    assert WRITER_PASSWORD not in done.stdout + done.stderr
    remote = f"{alias}.{topic}"  # DefaultReplicationPolicy's name, as the dedicated file's
    assert remote in list_topics(tls_broker.plaintext)
    source = read_all(clusters.source, topic)
    copied = read_all(tls_broker.plaintext, remote)
    assert sum(len(recs) for recs in copied.values()) == len(records)
    for partition, recs in source.items():
        assert [r.content() for r in copied[partition]] == [r.content() for r in recs]
