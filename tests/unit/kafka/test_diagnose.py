"""The connection-check steps without a broker: real sockets on loopback, real files.

That each step fails on the right fault of a real broker (wrong port, wrong password, TLS
mismatches, ACLs) is tests/integration/test_connection_check.py.
"""

from __future__ import annotations

import socket
from pathlib import Path

from k2k.kafka.diagnose import Diagnosis, Step, diagnose_cluster, summary
from k2k.kafka.probe import Failure, kafka_answers, resolve, tcp_connect, tls_context
from k2k.local import free_port


def test_a_missing_ca_file_names_the_truststore_setting(tmp_path: Path):
    failure = tls_context({"ssl.ca.location": str(tmp_path / "absent.pem")})
    assert isinstance(failure, Failure)
    assert failure.what.startswith("cannot load the CA certificates: ")
    assert "ssl.truststore.location" in failure.fix


def test_an_unencrypted_key_password_error_names_the_key_settings(tmp_path: Path):
    cert = tmp_path / "cert.pem"
    cert.write_text("not a certificate")
    failure = tls_context({"ssl.certificate.location": str(cert), "ssl.key.password": "pw"})
    assert isinstance(failure, Failure)
    assert "ssl.key.password" in failure.fix and "pw" not in failure.what


def test_an_unknown_host_fails_to_resolve():
    failure = resolve("no-such-host.invalid", 9092)
    assert isinstance(failure, Failure) and "does not resolve" in failure.what


def test_a_closed_port_refuses_the_connection():
    port = free_port()
    failure = tcp_connect("127.0.0.1", port, 2.0)
    assert isinstance(failure, Failure)
    assert failure.what == f"127.0.0.1:{port} refused the connection"


def test_a_peer_that_closes_is_no_kafka_listener():
    ours, theirs = socket.socketpair()
    theirs.close()
    with ours:
        assert kafka_answers(ours) is False


def test_steps_stop_at_the_first_failure():
    port = free_port()
    diagnosis = diagnose_cluster(
        "target", {"bootstrap.servers": f"127.0.0.1:{port}"}, 2.0, lambda _m: None
    )
    assert [s.name for s in diagnosis.steps] == ["DNS", "TCP connect"]
    assert diagnosis.failed is diagnosis.steps[-1]


def test_summary_is_one_line_naming_each_failed_cluster():
    ok = Diagnosis("source", "a:1", [Step("source", "DNS", "a resolves")])
    bad = Diagnosis("target", "b:2", [Step("target", "TCP connect", "b:2 refused", "fix it")])
    assert summary([ok]) is None
    assert summary([ok, bad]) == (
        "target cluster at b:2 failed the connection check at TCP connect: b:2 refused; "
        "fix it (target.kafka.common)"
    )
    assert bad.steps[0].line() == "target TCP connect: FAILED: b:2 refused; fix it"
