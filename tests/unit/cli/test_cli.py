"""The CLI as users meet it: --help everywhere, and bad input -> one clear line per problem."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

K2K = [sys.executable, "-m", "k2k"]

GOOD = {
    "name": "demo",
    "source": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:19092"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:29092"}}},
    "replication": [
        {"source": {"topic": "orders.*"}},
        {"sink": {"topic": "source", "partition": "source"}},
    ],
}


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*K2K, *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


def with_changes(tmp_path: Path, mutate) -> Path:
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    mutate(doc)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["start", "--help"],
        ["validate", "--help"],
        ["local", "--help"],
        ["local", "up", "--help"],
        ["local", "down", "--help"],
        ["local", "status", "--help"],
    ],
)
def test_every_command_has_help(argv):
    result = run(*argv)
    assert result.returncode == 0
    assert "Usage:" in result.stdout
    assert "--help" in result.stdout


def test_validate_prints_effective_config_with_secrets_masked(tmp_path):
    def add_secret(doc):
        doc["source"]["kafka"]["common"].update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2-secret";',
            }
        )

    result = run("validate", "-f", str(with_changes(tmp_path, add_secret)))
    assert result.returncode == 0, result.stderr
    assert "hunter2-secret" not in result.stdout + result.stderr
    effective = yaml.safe_load(result.stdout)
    assert effective["name"] == "demo"
    assert effective["coordination"]["kafka"]["commit"]["batchSize"] == 1000


def _set(path: str, value):
    def mutate(doc):
        node = doc
        keys = path.split("/")
        for k in keys[:-1]:
            node = node.setdefault(k, {}) if not k.isdigit() else node[int(k)]
        node[keys[-1] if not keys[-1].isdigit() else int(keys[-1])] = value

    return mutate


def _chain(*mutations):
    def mutate(doc):
        for m in mutations:
            m(doc)

    return mutate


BAD_INPUTS = {
    "unknown-top-level-key": (_set("nmae", "x"), ["nmae", "did you mean 'name'"]),
    "unknown-feature": (
        _set("features/exactlyOnse", "enabled"),
        ["features.exactlyOnse", "exactlyOnce"],
    ),
    "wrong-type": (
        _set("coordination/commit/batchSize", "many"),
        ["coordination.commit.batchSize", "many"],
    ),
    "batch-size-zero": (
        _set("coordination/commit/batchSize", 0),
        ["coordination.commit.batchSize", "0"],
    ),
    "invalid-regex": (_set("replication/0/source/topic", "orders["), ["source.topic", "orders["]),
    "bad-duration": (
        _set("coordination/commit/batchTimeout", "2 parsecs"),
        ["coordination.commit.batchTimeout", "2 parsecs"],
    ),
    "bare-number-duration": (
        _set("coordination/commit/batchTimeout", 2000),
        ["coordination.commit.batchTimeout", "2000"],
    ),
    "missing-bootstrap": (
        _set("target/kafka/common", {}),
        ["target.kafka.common.bootstrap.servers", "missing"],
    ),
    "unsupported-client-property": (
        _set("source/kafka/consumer", {"max.poll.records": 500}),
        ["source.kafka.consumer.max.poll.records", "not supported"],
    ),
    "acks-not-all": (
        _set("target/kafka/producer", {"acks": "1"}),
        ["target.kafka.producer.acks", "acks must be all"],
    ),
    "idempotence-off": (
        _set("target/kafka/producer", {"enable.idempotence": "false"}),
        ["target.kafka.producer.enable.idempotence", "order"],
    ),
    "auto-commit": (
        _set("source/kafka/consumer", {"enable.auto.commit": "true"}),
        ["source.kafka.consumer.enable.auto.commit"],
    ),
    "jks-truststore": (
        _set("source/kafka/common/ssl.truststore.location", "/x/trust.jks"),
        ["ssl.truststore"],
    ),
    "read-uncommitted": (
        _set("source/kafka/consumer", {"isolation.level": "read_uncommitted"}),
        ["source.kafka.consumer.isolation.level", "aborted source transactions"],
    ),
    "manual-transactional-id": (
        _set("target/kafka/producer", {"transactional.id": "mine"}),
        ["target.kafka.producer.transactional.id", "per runner group itself"],
    ),
    "bad-feature-value": (
        _set("features/headerReplication", "maybe"),
        ["features.headerReplication", "maybe", "enabled"],
    ),
    "bad-partition-mapping": (
        _set("replication/1/sink/partition", "random"),
        ["sink.partition", "random"],
    ),
    "bad-static-topic": (
        _set("replication/1/sink/topic", "bad topic!"),
        ["sink.topic", "bad topic!"],
    ),
    "unset-env-placeholder": (
        _set("source/kafka/common/sasl.username", "${env:K2K_TEST_SURELY_UNSET}"),
        ["source.kafka.common.sasl.username", "K2K_TEST_SURELY_UNSET"],
    ),
    "missing-file-placeholder": (
        _set("source/kafka/common/sasl.password", "${file:/nonexistent/k2k-secret}"),
        ["source.kafka.common.sasl.password", "/nonexistent/k2k-secret"],
    ),
    "duplicate-tracing-headers": (
        _set("tracing/headers", {"topic": "same", "offset": "same"}),
        ["tracing.headers", "same"],
    ),
    "conflicting-commit-spellings": (
        _chain(
            _set("coordination/commit/batchSize", 10),
            _set("coordination/kafka/commit/batchSize", 20),
        ),
        ["coordination.commit", "coordination.kafka.commit"],
    ),
    "two-sources": (
        lambda d: d["replication"].append({"source": {"topic": "x"}}),
        ["replication", "source"],
    ),
    "missing-sink": (lambda d: d["replication"].pop(), ["replication", "sink"]),
    "missing-name": (lambda d: d.pop("name"), ["name"]),
    "bad-on-commit-sync-timeout": (
        _set("errorHandling/onCommitSyncTimeout", "retry"),
        ["errorHandling.onCommitSyncTimeout", "retry"],
    ),
    "negative-parallelism": (_set("spark/parallelism", -1), ["spark.parallelism", "-1"]),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gets_one_clear_line(tmp_path, case):
    mutate, needles = BAD_INPUTS[case]
    result = run("validate", "-f", str(with_changes(tmp_path, mutate)))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"


def test_missing_file_and_bad_yaml(tmp_path):
    result = run("validate", "-f", str(tmp_path / "nope.yaml"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "nope.yaml" in result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsource: [unclosed\n")
    result = run("validate", "-f", str(bad))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert re.search(r"bad\.yaml:\d+", result.stderr)  # file:line of the syntax error
    assert len(result.stderr.strip().splitlines()) == 1


def test_several_problems_are_all_reported(tmp_path):
    mutate = _chain(
        _set("nmae", "x"),
        _set("coordination/commit/batchSize", 0),
        _set("features/headerReplication", "maybe"),
    )
    result = run("validate", "-f", str(with_changes(tmp_path, mutate)))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3 and all(ln.startswith("error: ") for ln in lines)


def test_files_deep_merge_in_order(tmp_path):
    base = with_changes(tmp_path, lambda d: None)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("coordination:\n  commit:\n    batchSize: 42\nname: merged\n")
    result = run("validate", "-f", str(base), "-f", str(overlay))
    assert result.returncode == 0, result.stderr
    effective = yaml.safe_load(result.stdout)
    assert effective["name"] == "merged"
    assert effective["coordination"]["kafka"]["commit"]["batchSize"] == 42
    assert effective["source"]["kafka"]["common"]["bootstrap.servers"] == "127.0.0.1:19092"


def test_unknown_flag_is_a_clear_error():
    result = run("start", "--until-caught", "-f", "x.yaml")
    assert result.returncode == 2
    assert "No such option" in result.stderr and "Traceback" not in result.stderr


def test_instance_name_unusable_in_transactional_ids_is_refused_before_connecting(tmp_path):
    """Checked before any client starts: the GOOD file's clusters are not running."""
    result = run(
        "start", "--instance", "host a/1", "-f", str(with_changes(tmp_path, lambda d: None))
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    # Click's usage-error layout, as for an unknown flag: usage, hint, one "Error:" line.
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    assert "'--instance'" in errors[0] and "'host a/1'" in errors[0], errors[0]
    assert "letters, digits" in errors[0], errors[0]


def test_instance_name_of_the_offsets_tool_is_reserved(tmp_path):
    """k2k offsets claims as member k2k-offsets: a pipeline instance of that name would be
    fenced by it, and never refused as a live member."""
    result = run(
        "start", "--instance", "k2k-offsets", "-f", str(with_changes(tmp_path, lambda d: None))
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1 and "reserved for k2k offsets" in errors[0], result.stderr


# --- K2K's launch flags: -g, -l, -w --------------------------------------------------------


def test_start_help_documents_k2k_launch_flags():
    out = run("start", "--help").stdout
    for flag in ("-g, --template-engine", "-l, --termination-log", "-w, --termination-log-enabled"):
        assert flag in out, flag
    assert "/dev/termination-log" in out


def test_failed_start_writes_its_one_line_reason_to_the_termination_log(tmp_path):
    log = tmp_path / "termination-log"
    bad = with_changes(tmp_path, _set("coordination/commit/batchSize", 0))
    result = run("start", "-f", str(bad), "-l", str(log))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert log.read_text() == line.removeprefix("error: ") + "\n"
    assert "coordination.commit.batchSize" in log.read_text()


def test_several_problems_are_one_line_in_the_termination_log(tmp_path):
    log = tmp_path / "termination-log"
    bad = with_changes(
        tmp_path, _chain(_set("nmae", "x"), _set("coordination/commit/batchSize", 0))
    )
    result = run("offset-mapping", "start", "-f", str(bad), "--termination-log", str(log))
    assert result.returncode == 2
    text = log.read_text()
    assert text.count("\n") == 1 and "nmae" in text and "; " in text


def test_termination_log_disabled_writes_nothing(tmp_path):
    log = tmp_path / "termination-log"
    bad = with_changes(tmp_path, _set("coordination/commit/batchSize", 0))
    result = run("start", "-f", str(bad), "-l", str(log), "-w", "disabled")
    assert result.returncode == 2
    assert not log.exists()


def test_unwritable_termination_log_is_refused_before_anything_starts(tmp_path):
    good = with_changes(tmp_path, lambda d: None)
    result = run("start", "-f", str(good), "-l", str(tmp_path / "no-such-dir" / "log"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    assert "'-l' / '--termination-log'" in errors[0] and "no-such-dir" in errors[0]


@pytest.mark.parametrize("flag", ["-g", "-w"])
def test_k2k_switch_flags_take_enabled_or_disabled(tmp_path, flag):
    good = with_changes(tmp_path, lambda d: None)
    result = run("start", "-f", str(good), flag, "maybe")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1 and "'maybe'" in errors[0] and "enabled or disabled" in errors[0]


def test_template_engine_disabled_keeps_placeholders(tmp_path):
    doc = with_changes(tmp_path, _set("spark/conf", {"x": "${env:K2K_TEST_SURELY_UNSET}"}))
    assert run("validate", "-f", str(doc)).returncode == 2
    result = run("validate", "-f", str(doc), "--template-engine", "disabled")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["spark"]["conf"] == {"x": "${env:K2K_TEST_SURELY_UNSET}"}


@pytest.mark.parametrize("listen", ["localhost", "127.0.0.1:http", "127.0.0.1:70000"])
def test_status_serve_refuses_a_bad_listen_address_in_one_line(tmp_path, listen):
    result = run("status", "-f", str(with_changes(tmp_path, lambda d: None)), "--serve",
                 "--listen", listen)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: --listen: not HOST:PORT, got {listen!r}; expected e.g. 127.0.0.1:9465"
    ]


def test_status_serve_names_an_address_in_use_in_one_line(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = with_changes(tmp_path, lambda d: None)
        result = run("status", "-f", str(path), "--serve", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: status: cannot serve on 127.0.0.1:{port}: Address already in use; choose "
        "another address with --listen HOST:PORT"
    ]
