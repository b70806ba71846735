"""Step-by-step connection checks (``k2k validate --check``, and ``k2k start`` with
``features.checkKafkaConnectionOnStartup``) on the shared TLS broker: each fault stops its
cluster's steps at the right one, with the fix, one ``error:`` line and no secret.

The broker serves as source and target at once (its listeners differ per case), so these
tests start no broker of their own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from k2k.local import free_port
from tests.helpers.kafka import create_topic, list_topics
from tests.helpers.pipelines import k2k_cli, pipeline_dict, write_pipeline
from tests.helpers.tlsbroker import (
    READER_PASSWORD,
    SECRETS,
    WRITER_PASSWORD,
    TlsBroker,
    sasl_ssl_client,
    ssl_client,
)

pytestmark = pytest.mark.integration

STEPS = ("DNS", "TCP connect", "TLS handshake", "SASL authentication", "metadata", "topics")


@pytest.fixture
def topic(tls_broker: TlsBroker, topic_name) -> str:
    name = topic_name("diag")
    create_topic(tls_broker.plaintext, name, 2)
    return name


def _doc(broker: TlsBroker, topic: str, name: str) -> dict[str, Any]:
    """Source: the read-only SCRAM user over SASL_SSL; target: the client certificate over
    SSL. Missing control and target topics are fine: the pipeline creates them."""
    same = SimpleNamespace(source=broker.sasl_ssl, target=broker.ssl)
    doc = pipeline_dict(same, name, [topic])
    doc["replication"][1]["sink"]["topic"] = {"prefix": "copy."}
    doc["source"]["kafka"]["common"] = sasl_ssl_client(broker, "reader", READER_PASSWORD)
    doc["target"]["kafka"]["common"] = ssl_client(broker)
    for side in ("source", "target"):
        doc[side]["connectTimeout"] = "5 seconds"
    return doc


def _check(tmp_path: Path, doc: dict[str, Any]) -> subprocess.CompletedProcess:
    result = k2k_cli("validate", "--check", "-f", str(write_pipeline(tmp_path, doc)), timeout=120)
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown
    for secret in SECRETS:
        assert secret not in shown, f"a secret appears in the output: {secret[:3]}..."
    return result


def _failed_at(result: subprocess.CompletedProcess, cluster: str, step: str) -> str:
    """The run failed at ``cluster``'s ``step``, every earlier step of it passed, nothing
    was tried after it, and stderr is one ``error:`` line saying so; returns the step line."""
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith(f"{cluster} ")]
    failed = [ln for ln in lines if ": FAILED: " in ln]
    assert len(failed) == 1 and failed[0] == lines[-1], lines
    assert failed[0].startswith(f"{cluster} {step}: FAILED: "), failed[0]
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"error: {cluster} cluster at "), errors[0]
    assert f"failed the connection check at {step}: " in errors[0], errors[0]
    return failed[0]


def test_healthy_clusters_pass_every_step(tls_broker, topic, tmp_path, topic_name):
    result = _check(tmp_path, _doc(tls_broker, topic, topic_name("pdiag")))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for cluster in ("source", "target"):
        steps = [ln for ln in lines if ln.startswith(f"{cluster} ")]
        assert all(": ok (" in ln for ln in steps), steps
        names = [ln.split(":")[0].removeprefix(f"{cluster} ") for ln in steps]
        expected = [s for s in STEPS if cluster == "source" or s != "SASL authentication"]
        assert names == expected, steps
    assert any(ln.startswith("source SASL authentication: ok (SCRAM-SHA-512)") for ln in lines)
    assert f"source topics: ok (1 checked: {topic})" in lines
    assert result.stderr == ""


def test_wrong_port_fails_at_tcp_connect(tls_broker, topic, tmp_path, topic_name):
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    port = free_port()
    doc["target"]["kafka"]["common"]["bootstrap.servers"] = f"127.0.0.1:{port}"
    line = _failed_at(_check(tmp_path, doc), "target", "TCP connect")
    assert f"127.0.0.1:{port} refused the connection" in line
    assert "check the port" in line


def test_wrong_password_fails_at_sasl_authentication(tls_broker, topic, tmp_path, topic_name):
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    wrong = sasl_ssl_client(tls_broker, "reader", WRITER_PASSWORD)  # another user's password
    doc["source"]["kafka"]["common"] = wrong
    line = _failed_at(_check(tmp_path, doc), "source", "SASL authentication")
    assert "Authentication failed" in line and "sasl.jaas.config" in line, line


def test_client_without_the_ca_fails_at_tls_handshake(tls_broker, topic, tmp_path, topic_name):
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    doc["target"]["kafka"]["common"] = ssl_client(tls_broker, ca=tls_broker.wrong_ca)
    line = _failed_at(_check(tmp_path, doc), "target", "TLS handshake")
    assert "certificate is not trusted" in line and "ssl.truststore.location" in line, line


def test_plaintext_client_on_a_tls_listener_fails_at_tls(tls_broker, topic, tmp_path, topic_name):
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    doc["target"]["kafka"]["common"] = {"bootstrap.servers": tls_broker.ssl}
    line = _failed_at(_check(tmp_path, doc), "target", "TLS")
    assert "does not answer a plaintext Kafka request" in line, line
    assert "security.protocol to SSL" in line, line


def test_tls_client_on_a_plaintext_listener_fails_at_tls_handshake(
    tls_broker, topic, tmp_path, topic_name
):
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    doc["target"]["kafka"]["common"] = {
        **ssl_client(tls_broker),
        "bootstrap.servers": tls_broker.plaintext,
    }
    line = _failed_at(_check(tmp_path, doc), "target", "TLS handshake")
    assert "is a plaintext listener" in line, line


def _read_only_target(broker: TlsBroker, topic: str, name: str) -> dict[str, Any]:
    """The read-only user as the target's principal, with control topics of the test's own."""
    doc = _doc(broker, topic, name)
    doc["target"]["kafka"]["common"] = sasl_ssl_client(broker, "reader", READER_PASSWORD)
    doc["coordination"]["assignment"] = {"topic": f"__k2k_assignment-{name}"}
    return doc


def test_a_principal_that_may_not_create_fails_at_topics(tls_broker, topic, tmp_path, topic_name):
    """Missing control topics, to be created: a validate-only creation says it may not."""
    doc = _read_only_target(tls_broker, topic, topic_name("pdiag"))
    line = _failed_at(_check(tmp_path, doc), "target", "topics")
    assignment = doc["coordination"]["assignment"]["topic"]
    assert f"may not Create topic {assignment!r}" in line and "grant it ACLs" in line, line
    assert assignment not in list_topics(tls_broker.plaintext)  # the check created nothing


def test_a_principal_that_may_not_write_fails_at_topics(tls_broker, topic, tmp_path, topic_name):
    doc = _read_only_target(tls_broker, topic, topic_name("pdiag"))
    for name in (doc["coordination"]["assignment"]["topic"], f"copy.{topic}"):
        create_topic(tls_broker.plaintext, name, 1)
    create_topic(tls_broker.plaintext, doc["coordination"]["commit"]["topic"], 1)
    line = _failed_at(_check(tmp_path, doc), "target", "topics")
    assert "may not Write topic" in line and "grant it ACLs" in line, line


def test_start_explains_a_failed_connection_step_by_step(tls_broker, topic, tmp_path, topic_name):
    """``k2k start`` with the feature: the step lines in the log, then one ``error:`` line
    naming the failing step; without it, the usual one line and no steps."""
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    doc["target"]["kafka"]["common"]["bootstrap.servers"] = f"127.0.0.1:{free_port()}"
    doc["target"]["connectTimeout"] = "2 seconds"
    plain = k2k_cli("start", "-f", str(write_pipeline(tmp_path, doc, "plain.yaml")), timeout=120)
    doc["features"]["checkKafkaConnectionOnStartup"] = "enabled"
    checked = k2k_cli("start", "-f", str(write_pipeline(tmp_path, doc)), timeout=120)
    for result in (plain, checked):
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert len([ln for ln in result.stderr.splitlines() if ln.startswith("error:")]) == 1
    assert "TCP connect" not in plain.stderr
    assert "source topics: ok (1 checked" in checked.stderr
    assert "target TCP connect: FAILED: " in checked.stderr
    error = next(ln for ln in checked.stderr.splitlines() if ln.startswith("error:"))
    assert "failed the connection check at TCP connect" in error, error


def test_heartbeats_topic_is_checked_on_the_target(tls_broker, topic, tmp_path, topic_name):
    """With ``features.heartbeats`` the target's ``heartbeats`` topic is one the pipeline
    writes (and creates when missing), so the check covers it; the source's is not."""
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    doc["features"]["heartbeats"] = "enabled"
    doc["source"]["alias"], doc["target"]["alias"] = "A", "B"
    result = _check(tmp_path, doc)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    checked = {
        cluster: line.split(" checked: ")[1].rstrip(")").split(", ")
        for line in lines
        for cluster in ("source", "target")
        if line.startswith(f"{cluster} topics: ok (")
    }
    assert "heartbeats" in checked["target"] and "heartbeats" not in checked["source"], lines


def test_checkpoints_topic_is_checked_on_the_target(tls_broker, topic, tmp_path, topic_name):
    """With ``features.checkpoints`` the target's ``<source alias>.checkpoints.internal`` is
    one the pipeline writes (and creates when missing), so the check covers it."""
    doc = _doc(tls_broker, topic, topic_name("pdiag"))
    doc["features"]["checkpoints"] = doc["features"]["offsetMapping"] = "enabled"
    doc["source"]["alias"], doc["target"]["alias"] = "A", "B"
    result = _check(tmp_path, doc)
    assert result.returncode == 0, result.stdout + result.stderr
    target = next(
        line for line in result.stdout.splitlines() if line.startswith("target topics: ok (")
    )
    assert "A.checkpoints.internal" in target.split(" checked: ")[1], target
