"""``--mm2 FILE`` beyond MM2's dedicated-mode file: a MirrorSourceConnector's properties, its
Connect REST JSON and a Strimzi KafkaMirrorMaker2 resource each give the pipelines of the
equivalent dedicated-mode file; what k2k cannot take is noted or refused in one line naming
the input's own key or resource path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from k2k.config.mm2 import all_notes, flow_config, read_mm2, render_flows
from k2k.config.strimzi_auth import SECRETS_DIR
from k2k.errors import ConfigError

K2K = [sys.executable, "-m", "k2k"]
MIRROR = "org.apache.kafka.connect.mirror."
PASSWORD = "s3cret-from-the-Secret"

#: A MirrorSourceConnector as a Connect cluster runs it (the shape of Apache Kafka's and
#: Cloudera's examples): cluster keys under source.cluster./target.cluster., the rest the flow's.
CONNECTOR = {
    "name": "backup-to-primary",
    "connector.class": f"{MIRROR}MirrorSourceConnector",
    "tasks.max": "3",
    "source.cluster.alias": "backup",
    "target.cluster.alias": "primary",
    "source.cluster.bootstrap.servers": "backup-1:9092,backup-2:9092",
    "target.cluster.bootstrap.servers": "primary-1:9092",
    "target.cluster.security.protocol": "SASL_SSL",
    "target.cluster.sasl.mechanism": "SCRAM-SHA-512",
    "target.cluster.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule"
    f' required username="mirror" password="{PASSWORD}";',
    "topics": "orders.*, payments",
    "topics.exclude": ".*\\.tmp",
    "replication.policy.class": f"{MIRROR}DefaultReplicationPolicy",
    "replication.policy.separator": "_",
    "replication.factor": "1",
    "sync.topic.acls.enabled": "false",
    "refresh.topics.interval.seconds": "30",
    "source.consumer.fetch.max.bytes": "1048576",
    "producer.override.linger.ms": "10",
    "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
    "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
}

#: The same flow as MM2's dedicated mode writes it; the source connector alone emits neither
#: checkpoints nor heartbeats (those are two more connectors on Connect).
DEDICATED = f"""\
clusters = backup, primary
backup.bootstrap.servers = backup-1:9092,backup-2:9092
primary.bootstrap.servers = primary-1:9092
primary.security.protocol = SASL_SSL
primary.sasl.mechanism = SCRAM-SHA-512
primary.sasl.jaas.config = {CONNECTOR["target.cluster.sasl.jaas.config"]}
backup->primary.enabled = true
backup->primary.tasks.max = 3
backup->primary.topics = orders.*, payments
backup->primary.topics.exclude = .*\\\\.tmp
backup->primary.replication.policy.separator = _
backup->primary.replication.factor = 1
backup->primary.sync.topic.acls.enabled = false
backup->primary.refresh.topics.interval.seconds = 30
backup->primary.source.consumer.fetch.max.bytes = 1048576
backup->primary.producer.override.linger.ms = 10
backup->primary.emit.checkpoints.enabled = false
backup->primary.emit.heartbeats.enabled = false
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _properties(config: dict[str, str]) -> str:
    return "".join(f"{k} = {v.replace(chr(92), chr(92) * 2)}\n" for k, v in config.items())


def _pipelines(path: Path) -> dict[str, dict[str, Any]]:
    mm2 = read_mm2(path)
    for flow in mm2.flows:
        flow_config(mm2, flow)  # k2k's model accepts each one
    return {flow.label: flow.pipeline for flow in mm2.flows}


def _validate(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [*K2K, "validate", "--mm2", str(path)],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != SECRETS_DIR}, **(env or {})},
        check=False,
    )


# -- connector properties and Connect REST JSON ----------------------------------------------
def test_connector_properties_give_the_dedicated_files_pipeline(tmp_path: Path) -> None:
    connector = _write(tmp_path, "msc.properties", _properties(CONNECTOR))
    dedicated = _write(tmp_path, "mm2.properties", DEDICATED)
    assert _pipelines(connector) == _pipelines(dedicated)
    (pipeline,) = _pipelines(connector).values()
    assert pipeline["name"] == "mm2-backup-primary"
    assert pipeline["features"]["checkpoints"] == "disabled"
    assert pipeline["features"]["heartbeats"] == "disabled"
    assert pipeline["features"]["offsetMapping"] == "enabled"  # the source connector's syncs
    assert pipeline["replication"][0]["source"]["topic"] == "(?:orders.*)|(?:payments)"
    assert pipeline["target"]["kafka"]["common"]["sasl.mechanism"] == "SCRAM-SHA-512"


@pytest.mark.parametrize("envelope", [True, False], ids=["name-and-config", "bare-config"])
def test_connect_rest_json_gives_the_same_pipeline(tmp_path: Path, envelope: bool) -> None:
    config = {k: v for k, v in CONNECTOR.items() if k != "name"}
    config["tasks.max"] = 3  # type: ignore[assignment]  # JSON numbers are taken as Connect does
    body = {"name": CONNECTOR["name"], "config": config} if envelope else config
    path = _write(tmp_path, "msc.json", json.dumps(body, indent=2))
    dedicated = _write(tmp_path, "mm2.properties", DEDICATED)
    assert _pipelines(path) == _pipelines(dedicated)
    assert f"{path}: read as Kafka Connect REST JSON" in render_flows(read_mm2(path))


def test_connector_notes_name_the_connectors_own_keys(tmp_path: Path) -> None:
    config = {
        **CONNECTOR,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "source.cluster.consumer.fetch.min.bytes": "5",
        "target.producer.acks": "all",
        "offset-syncs.topic.location": "target",
    }
    notes = all_notes(read_mm2(_write(tmp_path, "msc.properties", _properties(config))))
    text = "\n".join(notes)
    for line in (
        "flow backup->primary: name: k2k names each flow's pipeline mm2-<source>-<target>",
        "value.converter: not applied: k2k copies keys, values and headers byte for byte",
        "value.converter.schemas.enable: an option of value.converter: not applied",
        "source.cluster.consumer.fetch.min.bytes: not applied: the Mirror connectors read only",
        "target.producer.acks: not applied: MM2's own producer to the target",
        "flow backup->primary: offset-syncs.topic.location: not needed",
    ):
        assert line in text, line
    assert "key.converter" not in text  # ByteArrayConverter: what k2k does anyway
    assert "backup->primary." not in text  # no dedicated-mode spelling leaks out
    assert PASSWORD not in text + render_flows(read_mm2(tmp_path / "msc.properties"))
    assert len(notes) == 6


def test_the_source_connectors_config_can_turn_on_checkpoints_and_heartbeats(
    tmp_path: Path,
) -> None:
    extra = {
        "emit.checkpoints.enabled": "true",
        "emit.heartbeats.enabled": "true",
        "groups": "app-.*",
        "emit.checkpoints.interval.seconds": "15",
    }
    (pipeline,) = _pipelines(
        _write(tmp_path, "msc.properties", _properties({**CONNECTOR, **extra}))
    ).values()
    assert pipeline["features"]["checkpoints"] == "enabled"
    assert pipeline["features"]["heartbeats"] == "enabled"
    assert pipeline["checkpoints"] == {"interval": "15 seconds", "groups": "app-.*"}


def test_connector_problems_name_the_connectors_keys(tmp_path: Path) -> None:
    config = {**CONNECTOR, "tasks.max": "many"}
    del config["target.cluster.bootstrap.servers"]
    with pytest.raises(ConfigError) as caught:
        read_mm2(_write(tmp_path, "msc.properties", _properties(config)))
    path = tmp_path / "msc.properties"
    assert caught.value.problems == [
        f"{path}: target.cluster.bootstrap.servers: missing, expected host:port[,...]",
        f"{path}: tasks.max: invalid value 'many', expected >= 1",
    ]


@pytest.mark.parametrize(
    ("connector_class", "message"),
    [
        (
            f"{MIRROR}MirrorCheckpointConnector",
            "connector.class: MirrorCheckpointConnector is not run on its own: k2k runs a "
            "flow's replication, checkpoints and heartbeats as one pipeline",
        ),
        (
            "MirrorHeartbeat",
            "connector.class: MirrorHeartbeatConnector is not run on its own",
        ),
        (
            "io.confluent.connect.replicator.ReplicatorSourceConnector",
            "connector.class: 'io.confluent.connect.replicator.ReplicatorSourceConnector' is "
            f"not a Mirror connector, expected {MIRROR}MirrorSourceConnector",
        ),
    ],
)
def test_other_connector_classes_are_refused_in_one_line(
    tmp_path: Path, connector_class: str, message: str
) -> None:
    path = _write(tmp_path, "c.json", json.dumps({**CONNECTOR, "connector.class": connector_class}))
    done = _validate(path)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {path}: {message}")
    if "not run on its own" in message:
        switch = "checkpoints" if "Checkpoint" in message else "heartbeats"
        assert f"expected the flow's MirrorSourceConnector config with emit.{switch}" in line


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "bad.json",
            '{"name": "x", "config": {\n',
            "not valid JSON (line 2 column 1: Expecting property name enclosed in double "
            "quotes), expected a Kafka Connect connector config",
        ),
        ("list.json", "[1, 2]", "a JSON list, expected a Kafka Connect connector config"),
        ("nested.json", '{"topics": ["a"]}', "topics: a JSON list, expected a string"),
        ("noclass.json", '{"config": {"topics": "a"}}', "connector.class: missing"),
        (
            "bad.yaml",
            "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nspec: [\n",
            "not valid YAML (line 4 column 1: expected the node content, but found "
            "'<stream end>'), expected a Strimzi KafkaMirrorMaker2 resource",
        ),
        (
            "kafka.yaml",
            "apiVersion: kafka.strimzi.io/v1beta2\nkind: Kafka\nspec: {}\n",
            "kind: 0 KafkaMirrorMaker2 resources (kinds: Kafka), expected exactly one",
        ),
    ],
)
def test_malformed_inputs_are_one_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = _write(tmp_path, name, text)
    done = _validate(path)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {path}: {message}"), line


# -- Strimzi KafkaMirrorMaker2 ----------------------------------------------------------------
def _secrets(tmp_path: Path) -> Path:
    """Kubernetes Secrets as a pod mounts them: one directory per Secret, a file per key."""
    root = tmp_path / "secrets"
    for secret, key, text in (
        ("src-cluster-ca-cert", "ca.crt", "-----BEGIN CERTIFICATE-----\nAA==\n"),
        ("tgt-cluster-ca-cert", "ca.crt", "-----BEGIN CERTIFICATE-----\nBB==\n"),
        ("mirror-user", "password", PASSWORD),
        ("mirror-tls", "user.crt", "cert"),
        ("mirror-tls", "user.key", "key"),
    ):
        (root / secret).mkdir(parents=True, exist_ok=True)
        (root / secret / key).write_text(text, encoding="utf-8")
    return root


def _resource(**spec_changes: Any) -> dict[str, Any]:
    """A v1beta2 resource in the shape of Strimzi's examples: TLS to both clusters, SCRAM to
    the target (the Connect cluster), a source and a checkpoint connector."""
    spec: dict[str, Any] = {
        "version": "3.9.0",
        "replicas": 1,
        "connectCluster": "tgt",
        "clusters": [
            {
                "alias": "src",
                "bootstrapServers": "src-kafka-bootstrap:9093",
                "tls": {
                    "trustedCertificates": [
                        {"secretName": "src-cluster-ca-cert", "certificate": "ca.crt"}
                    ]
                },
            },
            {
                "alias": "tgt",
                "bootstrapServers": "tgt-kafka-bootstrap:9093",
                "tls": {
                    "trustedCertificates": [
                        {"secretName": "tgt-cluster-ca-cert", "pattern": "*.crt"}
                    ]
                },
                "authentication": {
                    "type": "scram-sha-512",
                    "username": "mirror",
                    "passwordSecret": {"secretName": "mirror-user", "password": "password"},
                },
                "config": {
                    "config.storage.replication.factor": -1,
                    "producer.linger.ms": 20,
                    "ssl.endpoint.identification.algorithm": "",
                },
            },
        ],
        "mirrors": [
            {
                "sourceCluster": "src",
                "targetCluster": "tgt",
                "sourceConnector": {
                    "tasksMax": 4,
                    "config": {
                        "replication.factor": -1,
                        "offset-syncs.topic.replication.factor": -1,
                        "sync.topic.acls.enabled": "false",
                        "refresh.topics.interval.seconds": 600,
                    },
                },
                "checkpointConnector": {
                    "tasksMax": 1,
                    "config": {
                        "checkpoints.topic.replication.factor": -1,
                        "emit.checkpoints.interval.seconds": 30,
                        "sync.group.offsets.enabled": "false",
                    },
                },
                "topicsPattern": "orders.*|payments",
                "groupsPattern": "app-.*",
            }
        ],
    }
    spec.update(spec_changes)
    return {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": "my-mirror-maker-2"},
        "spec": spec,
    }


def _strimzi_dedicated(secrets: Path) -> str:
    """:func:`_resource` as MM2's dedicated mode: the target's config is the workers'."""
    return f"""\
clusters = src, tgt
src.bootstrap.servers = src-kafka-bootstrap:9093
src.security.protocol = SSL
src.ssl.ca.location = {secrets}/src-cluster-ca-cert/ca.crt
tgt.bootstrap.servers = tgt-kafka-bootstrap:9093
tgt.security.protocol = SASL_SSL
tgt.ssl.ca.location = {secrets}/tgt-cluster-ca-cert/ca.crt
tgt.ssl.endpoint.identification.algorithm =
tgt.sasl.mechanism = SCRAM-SHA-512
tgt.sasl.username = mirror
tgt.sasl.password = {PASSWORD}
tgt.config.storage.replication.factor = -1
tgt.producer.linger.ms = 20
src->tgt.enabled = true
src->tgt.tasks.max = 4
src->tgt.replication.factor = -1
src->tgt.sync.topic.acls.enabled = false
src->tgt.refresh.topics.interval.seconds = 600
src->tgt.emit.checkpoints.interval.seconds = 30
src->tgt.topics = orders.*|payments
src->tgt.groups = app-.*
src->tgt.emit.heartbeats.enabled = false
"""


def _strimzi(tmp_path: Path, resource: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(SECRETS_DIR, str(_secrets(tmp_path)))
    return _write(tmp_path, "kmm2.yaml", yaml.safe_dump(resource, sort_keys=False))


def test_strimzi_resource_gives_the_dedicated_files_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _strimzi(tmp_path, _resource(), monkeypatch)
    dedicated = _write(tmp_path, "mm2.properties", _strimzi_dedicated(tmp_path / "secrets"))
    assert _pipelines(path) == _pipelines(dedicated)
    (pipeline,) = _pipelines(path).values()
    assert pipeline["features"]["checkpoints"] == "enabled"  # a checkpointConnector runs
    assert pipeline["features"]["heartbeats"] == "disabled"  # no heartbeatConnector
    assert pipeline["target"]["kafka"]["common"]["sasl.password"] == PASSWORD
    assert pipeline["spark"] == {"parallelism": 4}  # the source connector's tasksMax


def test_strimzi_notes_name_resource_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mm2 = read_mm2(_strimzi(tmp_path, _resource(), monkeypatch))
    notes = all_notes(mm2)
    mirror = "spec.mirrors[0]"
    for line in (
        "spec.version: a setting of the Connect deployment Strimzi runs",
        "spec.replicas: a setting of the Connect deployment Strimzi runs",
        f"{mirror}.checkpointConnector.tasksMax: not applied: k2k runs the flow as one "
        "pipeline, which takes the MirrorSourceConnector's setting ('4')",
        "flow src->tgt: spec.clusters[1].config.config.storage.replication.factor: a Kafka "
        "Connect worker setting",
        f"flow src->tgt: {mirror}.sourceConnector.config.offset-syncs.topic.replication.factor:"
        " not needed",
        f"flow src->tgt: {mirror}.checkpointConnector.config.checkpoints.topic.replication."
        "factor: not separately configurable",
    ):
        assert any(line in note for note in notes), line
    assert len(notes) == 6  # sync.group.offsets.enabled is taken (features.syncGroupOffsets)
    assert mm2.flows[0].pipeline["features"]["syncGroupOffsets"] == "disabled"
    printed = render_flows(mm2)
    assert PASSWORD not in printed + "\n".join(notes)
    assert "sasl.password: '******'" in printed


def test_strimzi_v1_shape_with_two_mirrors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spec.target and mirrors[].source: one flow per mirror, each like the v1beta2 one."""
    old = _resource()["spec"]
    source, target = old["clusters"]
    second = {"alias": "dr", "bootstrapServers": "dr-kafka-bootstrap:9092"}
    mirror = {
        k: v for k, v in old["mirrors"][0].items() if k not in ("sourceCluster", "targetCluster")
    }
    resource = _resource(
        target={**target, "groupId": "mm2-cluster", "configStorageTopic": "mm2-configs"},
        mirrors=[
            {**mirror, "source": source},
            {"source": second, "sourceConnector": {}, "heartbeatConnector": {}},
        ],
    )
    del resource["spec"]["clusters"], resource["spec"]["connectCluster"]
    resource["apiVersion"] = "kafka.strimzi.io/v1"
    path = _strimzi(tmp_path, resource, monkeypatch)
    dedicated = _write(tmp_path, "mm2.properties", _strimzi_dedicated(tmp_path / "secrets"))
    pipelines = _pipelines(path)
    assert list(pipelines) == ["src->tgt", "dr->tgt"]
    assert pipelines["src->tgt"] == _pipelines(dedicated)["src->tgt"]
    dr = pipelines["dr->tgt"]
    assert dr["source"]["kafka"]["common"] == {
        "bootstrap.servers": "dr-kafka-bootstrap:9092",
        "security.protocol": "PLAINTEXT",  # no tls, as Strimzi writes it
    }
    assert dr["target"] == pipelines["src->tgt"]["target"]
    assert (dr["features"]["heartbeats"], dr["features"]["checkpoints"]) == ("enabled", "disabled")
    notes = "\n".join(all_notes(read_mm2(path)))
    assert "spec.target.groupId: a Kafka Connect worker setting" in notes
    assert "spec.target.configStorageTopic: a Kafka Connect worker setting" in notes
    assert [f.label for f in read_mm2(path, ["tgt"]).flows] == ["src->tgt", "dr->tgt"]


def test_strimzi_connector_keys_go_to_the_connector_that_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """groups is the checkpoint connector's: its value wins over the source connector's
    (noted), and the mirror's groupsPattern over both, as Strimzi writes it last."""
    resource = _resource()
    mirror = resource["spec"]["mirrors"][0]
    mirror["sourceConnector"]["config"]["emit.checkpoints.interval.seconds"] = 99
    mirror["checkpointConnector"]["config"]["groups.exclude"] = "test-.*"
    mirror["checkpointConnector"]["config"]["replication.policy.separator"] = "_"
    mirror["heartbeatConnector"] = {"config": {"emit.heartbeats.interval.seconds": 5}}
    mirror["topicsExcludePattern"] = "tmp-.*"
    mirror["sourceConnector"]["config"]["topics.exclude"] = "old-.*"
    mm2 = read_mm2(_strimzi(tmp_path, resource, monkeypatch))
    (flow,) = mm2.flows
    assert flow.pipeline["checkpoints"] == {
        "interval": "30 seconds",
        "groups": "app-.*",
        "groupsExclude": "test-.*",
    }
    assert flow.pipeline["heartbeats"] == {"interval": "5 seconds"}
    assert flow.pipeline["replication"][0]["source"]["exclude"] == "tmp-.*"
    assert flow.pipeline["replication"][1]["sink"]["topic"] == {"policy": "alias"}
    text = "\n".join(all_notes(mm2))
    connector = "spec.mirrors[0].sourceConnector.config"
    assert (
        f"{connector}.emit.checkpoints.interval.seconds: not applied: the "
        "MirrorCheckpointConnector's own config decides this setting"
    ) in text
    assert (
        "spec.mirrors[0].checkpointConnector.config.replication.policy.separator: not "
        "applied: k2k runs the flow as one pipeline, which takes the MirrorSourceConnector's "
        "setting (unset)"
    ) in text
    assert f"{connector}.topics.exclude: overridden by spec.mirrors[0].topicsExcludePattern" in text


def test_strimzi_mutual_tls_and_several_trusted_certificates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resource = _resource()
    source = resource["spec"]["clusters"][0]
    source["tls"]["trustedCertificates"].append(
        {"secretName": "tgt-cluster-ca-cert", "certificate": "ca.crt"}
    )
    source["authentication"] = {
        "type": "tls",
        "certificateAndKey": {
            "secretName": "mirror-tls",
            "certificate": "user.crt",
            "key": "user.key",
        },
    }
    (pipeline,) = _pipelines(_strimzi(tmp_path, resource, monkeypatch)).values()
    secrets = tmp_path / "secrets"
    assert pipeline["source"]["kafka"]["common"] == {
        "bootstrap.servers": "src-kafka-bootstrap:9093",
        "security.protocol": "SSL",
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----\nAA==\n-----BEGIN CERTIFICATE-----\nBB==\n",
        "ssl.certificate.location": str(secrets / "mirror-tls" / "user.crt"),
        "ssl.key.location": str(secrets / "mirror-tls" / "user.key"),
    }


def test_strimzi_custom_authentication_passes_its_client_properties(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resource = _resource()
    resource["spec"]["clusters"][0]["authentication"] = {
        "type": "custom",
        "sasl": True,
        "config": {"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"},
    }
    (pipeline,) = _pipelines(_strimzi(tmp_path, resource, monkeypatch)).values()
    common = pipeline["source"]["kafka"]["common"]
    assert (common["security.protocol"], common["sasl.mechanism"]) == ("SASL_SSL", "PLAIN")
    assert (common["sasl.username"], common["sasl.password"]) == ("u", "p")


@pytest.mark.parametrize(
    ("secrets_dir", "change", "message"),
    [
        (
            False,
            None,
            "spec.clusters[0].tls.trustedCertificates[0]: Kubernetes Secret "
            "'src-cluster-ca-cert' cannot be read: k2k reads Secrets from files, expected "
            "K2K_SECRETS_DIR set to a directory holding src-cluster-ca-cert/<key>",
        ),
        (
            True,
            ("passwordSecret", {"secretName": "mirror-user", "password": "pw"}),
            "spec.clusters[1].authentication.passwordSecret: {dir}/mirror-user/pw: no such "
            "file, expected Secret 'mirror-user''s key 'pw' there",
        ),
        (
            True,
            ("passwordSecret", {"secretName": "../etc", "password": "passwd"}),
            "spec.clusters[1].authentication.passwordSecret.secretName: '../etc', expected a "
            "Secret's name",
        ),
        (
            True,
            (
                "tls",
                {"trustedCertificates": [{"secretName": "tgt-cluster-ca-cert", "pattern": "../*"}]},
            ),
            "spec.clusters[1].tls.trustedCertificates[0].pattern: '../*', expected a glob of "
            "key names",
        ),
        (
            True,
            ("type", "oauth"),
            "spec.clusters[1].authentication.type: 'oauth' is not translated, expected tls, "
            "scram-sha-256, scram-sha-512, plain or custom",
        ),
    ],
)
def test_unresolvable_strimzi_references_are_one_line(
    tmp_path: Path, secrets_dir: bool, change: tuple[str, Any] | None, message: str
) -> None:
    resource = _resource()
    target = resource["spec"]["clusters"][1]
    if change is not None and change[0] == "tls":
        target["tls"] = change[1]
    elif change is not None:
        target["authentication"][change[0]] = change[1]
    path = _write(tmp_path, "kmm2.yaml", yaml.safe_dump(resource))
    secrets = _secrets(tmp_path)
    done = _validate(path, {SECRETS_DIR: str(secrets)} if secrets_dir else None)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {path}: {message.format(dir=secrets)}"), line
    assert PASSWORD not in done.stderr


@pytest.mark.parametrize(
    ("mirror_change", "message"),
    [
        (
            {"targetCluster": "src"},
            "spec.mirrors[0].targetCluster: 'src' is not spec.connectCluster ('tgt'), "
            "expected the Connect cluster",
        ),
        (
            {"sourceCluster": "nope"},
            "spec.mirrors[0].sourceCluster: 'nope' is not in spec.clusters, expected one of "
            "src, tgt",
        ),
        (
            {"sourceConnector": None},
            "spec.mirrors[0].sourceConnector: missing, expected one: k2k runs a flow's "
            "replication, checkpoints and heartbeats as one pipeline",
        ),
        (
            {"sourceConnector": {"config": {"tasks.max": "many"}}},
            "spec.mirrors[0].sourceConnector.config.tasks.max: invalid value 'many', expected >= 1",
        ),
    ],
)
def test_bad_strimzi_mirrors_name_the_resource_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_change: dict[str, Any], message: str
) -> None:
    resource = _resource()
    resource["spec"]["mirrors"][0].update(mirror_change)
    with pytest.raises(ConfigError) as caught:
        read_mm2(_strimzi(tmp_path, resource, monkeypatch))
    (problem,) = caught.value.problems
    assert problem.startswith(f"{tmp_path / 'kmm2.yaml'}: {message}"), problem
