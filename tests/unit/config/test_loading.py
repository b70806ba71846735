"""Loading files: YAML errors, several files deep-merged in order, placeholders."""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path

import pytest
import yaml

from k2k.config import load_pipeline
from k2k.config.loader import deep_merge
from k2k.errors import ConfigError

DATA = Path(__file__).parent / "data"

BASE = """\
name: orders-dr
source:
  kafka:
    common:
      bootstrap.servers: src:9092
target:
  kafka:
    common:
      bootstrap.servers: tgt:9092
replication:
  - source:
      topic: "orders.*"
  - sink:
      topic: source
coordination:
  commit:
    batchSize: 100
    batchTimeout: 2 seconds
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_k2k_reference_file_loads_once_its_placeholder_topic_is_named(
    tmp_path: Path,
) -> None:
    """K2K's reference file as published, but for the one value that is a placeholder
    rather than a setting (``metrics.kafka.topic: "<metrics topic>"``): refused in one line,
    since no topic can have that name, and loaded once it names one."""
    with pytest.raises(ConfigError) as refused:
        load_pipeline([DATA / "k2k_reference.yaml"], env={})
    assert refused.value.problems == [
        "metrics.kafka.topic: invalid topic name, got '<metrics topic>'; expected a Kafka "
        "topic name: 1 to 249 of a-z A-Z 0-9 . _ -, not '.' or '..'"
    ]
    named = write(tmp_path, "named.yaml", "metrics: {kafka: {topic: __k2k-metrics}}\n")
    cfg = load_pipeline([DATA / "k2k_reference.yaml", named], env={})
    assert cfg.metrics.kafka.topic == "__k2k-metrics"
    assert cfg.name == "my-pipeline"
    assert cfg.license is not None and cfg.license["acceptEula"] is True
    assert cfg.replication.source.topic == "prod.*"
    assert cfg.coordination.commit.group == "k2k.eot"
    assert cfg.coordination.assignment.topic == "__k2k-assignment"
    assert cfg.commit_group == "k2k.eot"
    assert cfg.source_client("consumer") == {
        "bootstrap.servers": "src:9092",
        "group.id": "k2k.my-pipeline",
    }
    assert cfg.target_client("producer") == {"bootstrap.servers": "tgt:9092"}
    assert cfg.schema_mapping.facets("orders-eu") == (False, True)
    assert cfg.target.registry.url == "http://tgt-sr:8081"


def test_a_single_path_string_is_accepted(tmp_path: Path) -> None:
    cfg = load_pipeline(str(write(tmp_path, "p.yaml", BASE)), env={})
    assert cfg.coordination.commit.batch_size == 100


def test_later_files_win_and_mappings_merge(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml", BASE)
    overlay = write(
        tmp_path,
        "overlay.yaml",
        """\
        coordination:
          commit:
            batchSize: 5000
        source:
          kafka:
            consumer:
              auto.offset.reset: earliest
        """,
    )
    cfg = load_pipeline([base, overlay], env={})
    assert cfg.coordination.commit.batch_size == 5000
    assert cfg.coordination.commit.batch_timeout.total_seconds() == 2  # kept from base
    assert cfg.source_client("consumer") == {
        "bootstrap.servers": "src:9092",
        "auto.offset.reset": "earliest",
    }


def test_lists_are_replaced_not_appended(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml", BASE)
    overlay = write(
        tmp_path,
        "overlay.yaml",
        """\
        replication:
          - source:
              topic: [payments]
          - sink:
              topic: {prefix: "dr."}
        """,
    )
    cfg = load_pipeline([base, overlay], env={})
    assert cfg.replication.source.topic == ["payments"]


def test_deep_merge_does_not_modify_its_inputs() -> None:
    base = {"a": {"b": 1}}
    overlay = {"a": {"c": 2}}
    assert deep_merge(base, overlay) == {"a": {"b": 1, "c": 2}}
    assert base == {"a": {"b": 1}} and overlay == {"a": {"c": 2}}


def test_empty_overlay_file_changes_nothing(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml", BASE)
    empty = write(tmp_path, "empty.yaml", "# nothing here\n")
    assert load_pipeline([base, empty], env={}) == load_pipeline([base], env={})


def test_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as caught:
        load_pipeline([write(tmp_path, "base.yaml", BASE), missing], env={})
    assert caught.value.problems == [
        f"{missing}: cannot read the pipeline file (No such file or directory); expected an "
        "existing, readable YAML file"
    ]


def test_every_unreadable_file_is_reported(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", "name: [unclosed\n")
    with pytest.raises(ConfigError) as caught:
        load_pipeline([tmp_path / "a.yaml", bad], env={})
    assert len(caught.value.problems) == 2
    assert caught.value.problems[0].startswith(f"{tmp_path / 'a.yaml'}: cannot read")
    assert caught.value.problems[1].startswith(f"{bad}:2:1: YAML syntax error")


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "broken.yaml",
        """\
        name: orders-dr
        features:
          exactlyOnce: disabled
         headerReplication: enabled
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env={})
    (line,) = caught.value.problems
    assert line.startswith(f"{path}:4:")
    assert "YAML syntax error" in line


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.yaml", BASE + "coordination:\n  commit:\n    batchSize: 7\n")
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env={})
    (line,) = caught.value.problems
    assert line.startswith(f"{path}:19:1: YAML syntax error: duplicate key 'coordination'")
    assert "(first at line 15)" in line


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "anchors.yaml",
        BASE
        + """\
topicCreation:
  control: &defaults
    replicationFactor: 3
    partitions: 1
  replicated:
    <<: *defaults
    partitions: 12
""",
    )
    cfg = load_pipeline([path], env={})
    assert cfg.topic_creation.replicated.partitions == 12
    assert cfg.topic_creation.replicated.replication_factor == 3


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "list.yaml", "- a\n- b\n")
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env={})
    assert caught.value.problems == [
        f"{path}: the top level is a list; expected a mapping of pipeline keys (name, source, "
        "target, replication, ...)"
    ]


def test_no_file_given() -> None:
    with pytest.raises(ConfigError, match="no pipeline file given"):
        load_pipeline([], env={})


# --- mappings (programs that embed k2k) -----------------------------------------------------


def test_a_mapping_loads_like_the_same_file(tmp_path: Path) -> None:
    doc = yaml.safe_load(BASE)
    assert load_pipeline(doc, env={}) == load_pipeline(write(tmp_path, "p.yaml", BASE), env={})


def test_files_and_mappings_merge_in_order_without_modifying_the_mappings(
    tmp_path: Path,
) -> None:
    overlay = {"coordination": {"commit": {"batchSize": 7}}}
    last = {"name": "from-last"}
    cfg = load_pipeline([write(tmp_path, "base.yaml", BASE), overlay, last], env={})
    assert (cfg.name, cfg.coordination.commit.batch_size) == ("from-last", 7)
    assert cfg.coordination.commit.batch_timeout.total_seconds() == 2  # kept from the file
    assert overlay == {"coordination": {"commit": {"batchSize": 7}}} and last == {
        "name": "from-last"
    }


def test_a_mappings_placeholders_resolve_and_its_problems_name_the_key_path() -> None:
    doc = yaml.safe_load(BASE)
    doc["name"] = "${env:PIPELINE}"
    doc["coordination"]["commit"]["batchSize"] = 0
    doc["replication"][1]["sink"]["partitoin"] = "source"
    with pytest.raises(ConfigError) as caught:
        load_pipeline(doc, env={"PIPELINE": "from-env"})
    assert caught.value.problems == [
        "replication.sink.partitoin: unknown key; did you mean 'partition'?",
        "coordination.commit.batchSize: too small, got 0; expected a number >= 1",
    ]
    del doc["replication"][1]["sink"]["partitoin"]
    doc["coordination"]["commit"]["batchSize"] = 10
    assert load_pipeline(doc, env={"PIPELINE": "from-env"}).name == "from-env"


# --- placeholders ---------------------------------------------------------------------------


def test_env_and_file_placeholders_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret.txt").write_text("from-a-file\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    base = write(tmp_path, "base.yaml", BASE)
    overlay = write(
        tmp_path,
        "overlay.yaml",
        """\
target:
  kafka:
    common:
      bootstrap.servers: "${env:TARGET_HOST}:9092"
      sasl.mechanism: PLAIN
      sasl.username: k2k
      sasl.password: "${file:secret.txt}"
      client.id: "$${not-a-placeholder}"
""",
    )
    cfg = load_pipeline([base, overlay], env={"TARGET_HOST": "dr-1"})
    props = cfg.target_client("producer")
    assert props["bootstrap.servers"] == "dr-1:9092"
    assert props["sasl.password"] == "from-a-file"
    assert props["client.id"] == "${not-a-placeholder}"


def test_env_defaults_to_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K2K_TEST_NAME", "from-env")
    path = write(tmp_path, "p.yaml", BASE.replace("orders-dr", "${env:K2K_TEST_NAME}"))
    assert load_pipeline([path]).name == "from-env"


def test_placeholders_resolve_after_merging(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml", BASE.replace("name: orders-dr", "name: ${env:UNSET}"))
    overlay = write(tmp_path, "overlay.yaml", "name: overridden\n")
    assert load_pipeline([base, overlay], env={}).name == "overridden"


def test_unset_env_placeholder_names_key_and_placeholder(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        BASE + "spark:\n  conf:\n    spark.executor.memory: ${env:EXECUTOR_MEMORY}\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env={})
    assert caught.value.problems == [
        "spark.conf.spark.executor.memory: environment variable 'EXECUTOR_MEMORY' is not set, "
        "got '${env:EXECUTOR_MEMORY}'; expected the environment variable to be set where k2k runs"
    ]


def test_missing_file_placeholder_names_key_and_placeholder(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        BASE.replace("topic: source", "topic: ${file:/no/such/topic-name}"),
    )
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env={})
    assert caught.value.problems == [
        "replication[1].sink.topic: file '/no/such/topic-name' does not exist, "
        "got '${file:/no/such/topic-name}'; expected a readable UTF-8 file (a relative path "
        "starts at the current directory)"
    ]


def test_all_unresolved_placeholders_are_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        BASE.replace("orders-dr", "${env:A}-${env:B}") + "spark:\n  master: ${env:C}\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env={"B": "b"})
    assert [line.split(":", 1)[0] for line in caught.value.problems] == ["name", "spark.master"]


def test_resolved_values_are_validated_like_literals(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", BASE.replace("batchSize: 100", "batchSize: ${env:BATCH}"))
    assert load_pipeline([path], env={"BATCH": "250"}).coordination.commit.batch_size == 250
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env={"BATCH": "0"})
    assert caught.value.problems == [
        "coordination.commit.batchSize: too small, got '0'; expected a number >= 1"
    ]


# --- K2K's template engine: loaders, mappers, -g disabled -----------------------------------

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p-w";'
)
SASL = """\
target:
  kafka:
    common:
      bootstrap.servers: tgt:9092
      security.protocol: SASL_PLAINTEXT
      sasl.mechanism: PLAIN
      sasl.jaas.config: {placeholder}
"""


@pytest.mark.parametrize(
    ("placeholder", "env", "files"),
    [
        ("${env:string:JAAS}", {"JAAS": JAAS}, {}),
        ("${string:JAAS}", {"JAAS": JAAS}, {}),
        ("${JAAS}", {"JAAS": JAAS}, {}),
        ("${env:base64:JAAS64}", {"JAAS64": base64.b64encode(JAAS.encode()).decode()}, {}),
        ('"${file:raw:jaas.conf}"', {}, {"jaas.conf": JAAS + "\n"}),
        ("${file:jaas.conf}", {}, {"jaas.conf": JAAS}),
        (
            "${file:base64:raw:jaas.b64}",
            {},
            {"jaas.b64": base64.encodebytes(JAAS.encode()).decode()},
        ),
    ],
)
def test_k2k_placeholder_forms_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, placeholder: str, env: dict, files: dict
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    base = write(tmp_path, "base.yaml", BASE)
    overlay = write(tmp_path, "overlay.yaml", SASL.format(placeholder=placeholder))
    props = load_pipeline([base, overlay], env=env).target_client("producer")
    assert (props["sasl.username"], props["sasl.password"]) == ("u", "p-w")


def test_number_mapper_gives_numbers_and_chains_after_base64(tmp_path: Path) -> None:
    text = BASE.replace("batchSize: 100", "batchSize: ${env:number:BATCH}")
    text += (
        "spark:\n  parallelism: ${env:base64:number:PAR}\n  conf:\n    x: n=${env:number:BATCH}\n"
    )
    cfg = load_pipeline([write(tmp_path, "p.yaml", text)], env={"BATCH": " 250 ", "PAR": "Mw"})
    assert cfg.coordination.commit.batch_size == 250
    assert cfg.spark.parallelism == 3
    assert cfg.spark.conf["x"] == "n=250"


@pytest.mark.parametrize(
    ("placeholder", "env", "line"),
    [
        (
            "${env:strng:S}",
            {"S": "hunter2"},
            "spark.conf.x: unknown loader or mapper 'strng', got '${env:strng:S}'; expected "
            "${[loader:][mapper:...]NAME} with loader env or file and mappers base64, number, "
            "raw, string, e.g. ${env:base64:SASL_JAAS}",
        ),
        (
            "${env:base64:S}",
            {"S": "hunter2!"},
            "spark.conf.x: the value of environment variable 'S' is not valid Base64, got "
            "'${env:base64:S}'; expected Base64 text (standard alphabet)",
        ),
        (
            "${env:base64:S}",
            {"S": base64.b64encode(b"\xff\xfe").decode()},
            "spark.conf.x: the value of environment variable 'S' decodes to bytes that are not "
            "UTF-8 text, got '${env:base64:S}'; expected the Base64 encoding of UTF-8 text",
        ),
        (
            "${number:S}",
            {"S": "hunter2"},
            "spark.conf.x: the value of environment variable 'S' is not a number, got "
            "'${number:S}'; expected an integer or a decimal number",
        ),
        (
            "${file:}",
            {},
            "spark.conf.x: the placeholder names no file, got '${file:}'; expected "
            "${[loader:][mapper:...]NAME} with loader env or file and mappers base64, number, "
            "raw, string, e.g. ${env:base64:SASL_JAAS}",
        ),
    ],
)
def test_bad_placeholders_name_key_and_placeholder_never_the_value(
    tmp_path: Path, placeholder: str, env: dict, line: str
) -> None:
    path = write(tmp_path, "p.yaml", BASE + f"spark:\n  conf:\n    x: {placeholder}\n")
    with pytest.raises(ConfigError) as caught:
        load_pipeline([path], env=env)
    assert caught.value.problems == [line]
    assert "hunter2" not in line


def test_template_engine_disabled_keeps_placeholders_as_written(tmp_path: Path) -> None:
    text = BASE + "spark:\n  conf:\n    a: ${env:UNSET_ANYWHERE}\n    b: $${literal}\n"
    path = write(tmp_path, "p.yaml", text)
    with pytest.raises(ConfigError):
        load_pipeline([path], env={})
    cfg = load_pipeline([path], env={}, templates=False)
    assert cfg.spark.conf == {"a": "${env:UNSET_ANYWHERE}", "b": "$${literal}"}


def test_license_placeholders_need_not_resolve(tmp_path: Path) -> None:
    """K2K files take the license token from the environment; k2k ignores the block."""
    text = BASE + 'license:\n  acceptEula: true\n  token: "${env:K2K_LICENSE_TOKEN}"\n'
    cfg = load_pipeline([write(tmp_path, "p.yaml", text)], env={})
    assert cfg.name == "orders-dr"
