"""TLS on real brokers: replication over SSL (client certificates) and over SASL_SSL (SCRAM)
from a source whose principal may only read; a wrong CA, and a missing client certificate,
failing with one clear line; no password in any output, also at -vv.

The broker is the session's shared TLS broker (:mod:`tests.helpers.tlsbroker`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from tests.helpers.kafka import Rec, create_topic, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli, pipeline_dict, write_pipeline
from tests.helpers.tlsbroker import (
    READER_PASSWORD,
    SECRETS,
    WRITER_PASSWORD,
    TlsBroker,
    sasl_ssl_client,
    ssl_client,
)

pytestmark = pytest.mark.integration


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
