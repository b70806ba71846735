"""``--mm2 FILE`` beyond MM2's dedicated-mode file: a MirrorSourceConnector's properties and
its Connect REST JSON each give the pipelines of the equivalent dedicated-mode file; what k2k cannot take is noted or refused in one line naming
the input's own key or resource path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from k2k.config.mm2 import all_notes, flow_config, read_mm2, render_flows
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
        env={**os.environ, **(env or {})},
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
    ],
)
def test_malformed_inputs_are_one_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = _write(tmp_path, name, text)
    done = _validate(path)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {path}: {message}"), line
