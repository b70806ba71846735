"""MM2 dedicated-mode properties as k2k pipelines: parsing, MM2's precedence, translation,
the unsupported-property notes, and one-line errors naming the property."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from k2k.config.mm2 import all_notes, flow_config, read_mm2, render_flows
from k2k.config.properties import parse_properties
from k2k.errors import ConfigError
from tests.helpers.paths import REPO

BENCH = REPO / "bench" / "mm2"
K2K = [sys.executable, "-m", "k2k"]

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def _write(tmp_path: Path, text: str, name: str = "mm2.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _flow(tmp_path: Path, extra: str = "") -> tuple[dict, list[str]]:
    mm2 = read_mm2(_write(tmp_path, BASE + extra))
    (flow,) = mm2.flows
    return flow.pipeline, all_notes(mm2)


def test_properties_syntax() -> None:
    text = "# c\n! c\na=1\nb : 2\nc 3\nd = x\\\n    y\ne = .*\\\\.replica\nf=\\u0041\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "xy",
        "e": r".*\.replica",
        "f": "A",
    }


def test_flow_translation(tmp_path: Path) -> None:
    pipeline, _ = _flow(
        tmp_path,
        "topics = orders.*, pay\ntasks.max = 4\nreplication.policy.separator = _\n"
        "sync.topic.configs.interval.seconds = 30\nsync.topic.acls.enabled = false\n"
        "config.properties.exclude = min\\\\.insync\\\\.replicas\nemit.heartbeats.interval.seconds = 2\n"
        "refresh.topics.interval.seconds = 60\nreplication.factor = 1\n",
    )
    assert pipeline["name"] == "mm2-A-B"
    assert (pipeline["source"]["alias"], pipeline["target"]["alias"]) == ("A", "B")
    source, sink = pipeline["replication"][0]["source"], pipeline["replication"][1]["sink"]
    assert source["topic"] == "(?:orders.*)|(?:pay)"
    assert source["exclude"] == r"(?:.*[\-\.]internal)|(?:.*\.replica)|(?:__.*)"
    assert source["discoveryInterval"] == "60 seconds"
    assert sink["topic"] == {"policy": "alias", "separator": "_"}
    assert pipeline["spark"] == {"parallelism": 4}
    assert pipeline["features"]["heartbeats"] == "enabled"  # MM2's default
    assert pipeline["heartbeats"] == {"interval": "2 seconds"}
    assert pipeline["topicCreation"]["replicated"] == {
        "configSyncInterval": "30 seconds",
        "aclSync": "disabled",
        "configExclusions": [r"min\.insync\.replicas"],
        "replicationFactor": 1,
    }


def test_identity_policy_and_exactly_once(tmp_path: Path) -> None:
    pipeline, _ = _flow(
        tmp_path,
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
        "B.exactly.once.source.support = enabled\nemit.heartbeats.enabled = false\n",
    )
    assert pipeline["replication"][1]["sink"]["topic"] == {"policy": "identity"}
    assert pipeline["features"]["exactlyOnce"] == "enabled"
    assert pipeline["features"]["heartbeats"] == "disabled"


def test_flow_keys_win_over_top_level(tmp_path: Path) -> None:
    pipeline, _ = _flow(
        tmp_path, "topics = a\ntasks.max = 2\nA->B.topics = b\nA->B.tasks.max = 3\n"
    )
    assert pipeline["replication"][0]["source"]["topic"] == "b"
    assert pipeline["spark"] == {"parallelism": 3}


def test_client_precedence(tmp_path: Path) -> None:
    """MM2's MirrorMakerConfigTest case: alias over top level, role over alias."""
    pipeline, _ = _flow(
        tmp_path,
        "security.protocol = SSL\nA.security.protocol = PLAINTEXT\n"
        "A.admin.security.protocol = SSL\n"
        "A->B.consumer.client.rack = r1\nA.consumer.client.rack = r2\n"
        "A->B.consumer.fetch.min.bytes = 10\nA->B.source.consumer.fetch.min.bytes = 20\n"
        "A->B.consumer.security.protocol = SSL\n"
        "B.producer.linger.ms = 7\nA->B.producer.override.linger.ms = 9\n",
    )
    source, target = pipeline["source"]["kafka"], pipeline["target"]["kafka"]
    assert source["common"]["security.protocol"] == "PLAINTEXT"
    assert target["common"]["security.protocol"] == "SSL"  # the top level
    assert source["admin"]["security.protocol"] == "SSL"
    # The cluster's security keys beat the flow's generic consumer.* ones, as in MM2.
    assert "security.protocol" not in source["consumer"]
    assert source["consumer"]["client.rack"] == "r2"
    assert source["consumer"]["fetch.min.bytes"] == "20"
    assert target["producer"]["linger.ms"] == "9"


def test_unsupported_properties_are_listed(tmp_path: Path) -> None:
    _, notes = _flow(
        tmp_path,
        "B.group.id = mm2\n"
        "A.consumer.max.poll.records = 10\nA->B.foo.bar = 1\nA.producer.acks = all\n"
        "producer.linger.ms = 3\nB.foo.bar = 2\noffset.lag.max = 10\n",
    )
    text = "\n".join(notes)
    for prop in (
        "B.group.id: a Kafka Connect worker setting",
        "A.consumer.max.poll.records: left out",
        "A->B.foo.bar: not an MM2 property",
        "B.foo.bar: not an MM2 property k2k translates",
        "A.producer.acks: left out: k2k never writes to the source",
        "producer.linger.ms: MM2 ignores top-level client prefixes",
        "offset.lag.max: not needed",
    ):
        assert prop in text, prop


def test_checkpoints(tmp_path: Path) -> None:
    """MM2's offset syncs and checkpoints are on by default, and so they are here."""
    pipeline, _ = _flow(tmp_path)
    assert pipeline["features"]["offsetMapping"] == "enabled"
    assert pipeline["features"]["checkpoints"] == "enabled"
    assert "checkpoints" not in pipeline
    pipeline, _ = _flow(
        tmp_path,
        "groups = app.*, billing\ngroups.exclude = app-test.*\n"
        "A->B.emit.checkpoints.interval.seconds = 5\n",
    )
    assert pipeline["checkpoints"] == {
        "interval": "5 seconds",
        "groups": "(?:app.*)|(?:billing)",
        "groupsExclude": "app-test.*",
    }
    pipeline, notes = _flow(tmp_path, "emit.offset-syncs.enabled = false\n")
    assert pipeline["features"]["offsetMapping"] == "disabled"
    assert pipeline["features"]["checkpoints"] == "disabled"
    assert any("emit.checkpoints.enabled: MM2 emits no checkpoints" in n for n in notes)


def test_every_property_is_accounted_for(tmp_path: Path) -> None:
    """Each key of the benchmark's file either shapes the pipeline or is in a note."""
    path = _filled(tmp_path, "mm2-exactly-once.properties")
    mm2 = read_mm2(path)
    noted = {note.prop for note in mm2.notes} | {n.prop for f in mm2.flows for n in f.notes}
    taken = {
        "clusters",
        "mm7.bootstrap.servers",
        "tgt.bootstrap.servers",
        "mm7->tgt.enabled",
        "mm7->tgt.topics",
        "mm7->tgt.tasks.max",
        "mm7->tgt.exactly.once.support",
        "tgt.exactly.once.source.support",
        "tgt.offset.flush.interval.ms",
        "emit.heartbeats.enabled",
        "emit.checkpoints.enabled",
        "emit.offset-syncs.enabled",
        "sync.group.offsets.enabled",
        "sync.topic.acls.enabled",
        "sync.topic.configs.enabled",
        "replication.factor",
        "mm7.consumer.isolation.level",
        "mm7.consumer.max.partition.fetch.bytes",
        "mm7.consumer.fetch.max.wait.ms",
    } | {key for key in parse_properties(path.read_text()) if key.startswith("tgt.producer.")}
    assert set(parse_properties(path.read_text())) - noted == taken
    assert "mm7.consumer.max.poll.records" in noted


def test_clusters_limits_flows_by_target(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + "B->A.enabled = true\n")
    assert [f.label for f in read_mm2(path).flows] == ["A->B", "B->A"]
    assert [f.label for f in read_mm2(path, ["A"]).flows] == ["B->A"]
    with pytest.raises(ConfigError, match="--clusters: unknown alias 'C'"):
        read_mm2(path, ["C"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "clusters = A, B\nA->B.enabled = true\nB.bootstrap.servers = b:1\n",
            "A.bootstrap.servers: missing, expected host:port",
        ),
        (BASE.replace("a:9092", "nohost"), "A.bootstrap.servers: "),
        (
            BASE + "replication.policy.class = com.x.Custom\n",
            "replication.policy.class: unsupported",
        ),
        (BASE + "A->B.tasks.max = many\n", "A->B.tasks.max: invalid value"),
        (BASE + "emit.heartbeats.enabled = maybe\n", "emit.heartbeats.enabled: invalid value"),
        (BASE + "A.sasl.jaas.config = ${file:/x:y}\n", "A.sasl.jaas.config: MM2 config provider"),
        ("A.bootstrap.servers = a:1\n", "clusters: missing"),
        ("clusters = A, B\nA.bootstrap.servers = a:1\n", "no flow to run"),
    ],
)
def test_bad_properties(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_mm2(_write(tmp_path, text))
    (problem,) = caught.value.problems
    assert problem.startswith(f"{tmp_path / 'mm2.properties'}: ")
    assert message in problem


def test_cli_error_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "clusters = A, B\nA->B.enabled = true\nB.bootstrap.servers = b:1\n")
    done = subprocess.run([*K2K, "validate", "--mm2", str(path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == f"error: {path}: A.bootstrap.servers: missing, expected host:port[,...]\n"


def test_secrets_masked(tmp_path: Path) -> None:
    mm2 = read_mm2(
        _write(
            tmp_path,
            BASE + "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n"
            "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u" password="hunter2";\n',
        )
    )
    assert "hunter2" not in render_flows(mm2)
    assert "hunter2" not in "\n".join(all_notes(mm2))


# -- the benchmark's own files ---------------------------------------------------------------
_VALUES = {
    "source.alias": "mm7",
    "target.alias": "tgt",
    "source.bootstrap": "localhost:9092",
    "target.bootstrap": "localhost:9093",
    "topics": "bench\\\\-topic",
    "tasks.max": "8",
    "run": "7",
}


def _filled(tmp_path: Path, name: str) -> Path:
    """The template with its ``${name}`` placeholders filled, comments untouched (as
    bench/mm2.py's render_config does)."""
    lines = (BENCH / name).read_text(encoding="utf-8").splitlines(keepends=True)
    fill = re.compile(r"\$\{([^}:]+)\}")
    text = "".join(
        line if line.lstrip().startswith("#") else fill.sub(lambda m: _VALUES[m.group(1)], line)
        for line in lines
    )
    return _write(tmp_path, text, name)


@pytest.mark.parametrize("name", ["mm2-at-least-once.properties", "mm2-exactly-once.properties"])
def test_bench_files_give_yaml_k2k_validate_accepts(tmp_path: Path, name: str) -> None:
    path = _filled(tmp_path, name)
    done = subprocess.run([*K2K, "validate", "--mm2", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    documents = [d for d in done.stdout.split("\n---\n")[1:] if d.strip()]
    assert len(documents) == 1
    doc = yaml.safe_load(documents[0])
    assert doc["replication"][0]["source"]["topic"] == r"bench\-topic"
    assert doc["replication"][1]["sink"]["topic"] == {"policy": "alias"}
    eos = doc["features"].get("exactlyOnce", "disabled")
    assert eos == ("enabled" if "exactly" in name else "disabled")
    assert "max.poll.records" not in documents[0].split("\nname:")[1]
    yaml_file = tmp_path / "flow.yaml"
    yaml_file.write_text(documents[0], encoding="utf-8")
    checked = subprocess.run(
        [*K2K, "validate", "-f", str(yaml_file)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    assert flow_config(read_mm2(path), read_mm2(path).flows[0]).name == "mm2-mm7-tgt"


TRANSFORMS = (
    "transforms = dropTest, mask\n"
    "A->B.transforms.dropTest.type = org.apache.kafka.connect.transforms.Filter\n"
    "A->B.transforms.dropTest.predicate = isTest\n"
    "A->B.transforms.mask.type = org.apache.kafka.connect.transforms.MaskField$Value\n"
    "A->B.transforms.mask.fields = ssn\n"
    "A->B.predicates = isTest\n"
    "A->B.predicates.isTest.type = org.apache.kafka.connect.transforms.predicates."
    "TopicNameMatches\n"
    "A->B.predicates.isTest.pattern = .*test.*\n"
)
TRANSFORM_STEPS = [
    {"filter": {"drop": 'targetTopic.matches("^(?:.*test.*)$")'}},
    {"maskFields": {"fields": ["value.ssn"]}},
]


def test_supported_transforms_are_mapped_rather_than_refused(tmp_path: Path) -> None:
    """A file whose transforms k2k maps runs, with them as the flow's transforms stage
    (tests/unit/config/test_mm2_transforms.py covers each class and the refusal of others)."""
    path = _write(tmp_path, BASE + TRANSFORMS)
    done = subprocess.run([*K2K, "validate", "--mm2", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "#" not in done.stdout  # nothing to note: every transform property was mapped
    stages = yaml.safe_load(done.stdout)["replication"]
    assert stages[1] == {"transforms": TRANSFORM_STEPS}


def test_skipping_unsupported_transforms_keeps_the_supported_ones(tmp_path: Path) -> None:
    mm2 = read_mm2(_write(tmp_path, BASE + TRANSFORMS), skip_transforms=True)
    assert all_notes(mm2) == []
    assert mm2.flows[0].pipeline["replication"][1] == {"transforms": TRANSFORM_STEPS}


def test_overridden_properties_of_a_running_flow_are_called_overridden(tmp_path: Path) -> None:
    """A property that lost to a higher-precedence spelling is listed as overridden, not as
    belonging to a flow that does not run."""
    extra = (
        "A->B.source.consumer.fetch.min.bytes = 2\n"
        "A->B.consumer.fetch.min.bytes = 1\n"
        "A.consumer.fetch.min.bytes = 3\n"
        "B->A.topics = z\n"
    )
    pipeline, notes = _flow(tmp_path, extra)
    assert pipeline["source"]["kafka"]["consumer"]["fetch.min.bytes"] == "2"
    about = {line.split(": ")[1]: line.split(": ", 2)[2] for line in notes}
    assert about["A->B.consumer.fetch.min.bytes"].startswith("overridden: another spelling")
    assert about["A.consumer.fetch.min.bytes"].startswith("overridden: another spelling")
    assert about["B->A.topics"].startswith("a flow that does not run")
