"""SASL on real brokers: replication into a SASL_PLAINTEXT target with PLAIN and SCRAM, and a
wrong password failing with one clear line that never shows the password."""

from __future__ import annotations

import base64

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from k2k.local import LocalCluster, free_port
from tests.helpers.kafka import create_topic, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="{u}" password="{p}";'
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{u}" password="{p}";'
PASSWORD = "s3cret-Pa55word"


@pytest.fixture(scope="module")
def sasl_target(tmp_path_factory):
    """A target broker with a SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256) next to the
    PLAINTEXT one the fixture uses to check readiness and to create SCRAM credentials."""
    port, sasl_port, controller = free_port(), free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
        ),
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
    }
    cluster = LocalCluster(
        "sasl-target",
        port,
        tmp_path_factory.mktemp("sasl"),
        controller_port=controller,
        broker_overrides=overrides,
    )
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode()
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result()
        yield cluster.bootstrap, f"127.0.0.1:{sasl_port}"
    finally:
        cluster.stop()


@pytest.mark.parametrize(
    ("mechanism", "user", "jaas"),
    [("PLAIN", "alice", PLAIN_JAAS), ("SCRAM-SHA-256", "bob", SCRAM_JAAS)],
)
def test_replicates_into_a_sasl_target(
    clusters, sasl_target, tmp_path, topic_name, mechanism, user, jaas
):
    plain_bootstrap, sasl_bootstrap = sasl_target
    t = topic_name("sasl")
    create_topic(clusters.source, t, 2)
    produce(
        clusters.source,
        t,
        [
            (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("h", b"1")], BASE_TS + i)
            for i in range(200)
        ],
    )
    secret = tmp_path / "jaas"
    secret.write_text(jaas.format(u=user, p=PASSWORD))
    doc = pipeline_dict(clusters, topic_name("psasl"), [t])
    doc["target"]["kafka"]["common"] = {
        "bootstrap.servers": sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f"${{file:{secret}}}",
    }
    result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
    assert result.returncode == 0, result.stderr
    assert PASSWORD not in result.stderr + result.stdout
    src, dst = read_all(clusters.source, t), read_all(plain_bootstrap, t)
    assert {p: [r.content() for r in v] for p, v in dst.items()} == {
        p: [r.content() for r in v] for p, v in src.items()
    }


@pytest.mark.parametrize("form", ["env-base64", "file-raw"])
def test_sasl_secret_through_k2k_placeholders(clusters, sasl_target, tmp_path, topic_name, form):
    """K2K's template engine end to end: the JAAS line comes Base64-encoded from the
    environment (``${env:base64:...}``) or verbatim from a file (``${file:raw:...}``), and
    neither the password nor its encoding is ever printed."""
    plain_bootstrap, sasl_bootstrap = sasl_target
    t = topic_name("tpl")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, f"k{i}", f"v{i}", [], BASE_TS + i) for i in range(50)])
    jaas = PLAIN_JAAS.format(u="alice", p=PASSWORD)
    encoded = base64.b64encode(jaas.encode()).decode()
    env = {}
    if form == "env-base64":
        env["K2K_TEST_SASL_JAAS"] = encoded
        placeholder = "${env:base64:K2K_TEST_SASL_JAAS}"
    else:
        secret = tmp_path / "jaas.conf"
        secret.write_text(jaas + "\n")
        placeholder = f"${{file:raw:{secret}}}"
    doc = pipeline_dict(clusters, topic_name("ptpl"), [t])
    doc["target"]["kafka"]["common"] = {
        "bootstrap.servers": sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": placeholder,
    }
    path = str(write_pipeline(tmp_path, doc))
    result = k2k_cli("start", "--until-caught-up", "-f", path, env=env)
    assert result.returncode == 0, result.stderr
    shown = result.stderr + result.stdout
    assert PASSWORD not in shown and encoded not in shown
    src, dst = read_all(clusters.source, t), read_all(plain_bootstrap, t)
    assert [r.content() for r in dst[0]] == [r.content() for r in src[0]]
    # With the template engine off the placeholder is taken as the JAAS line itself: refused
    # before anything connects, naming the key, never echoing the value.
    off = k2k_cli("start", "--until-caught-up", "-f", path, "-g", "disabled", env=env)
    assert off.returncode == 2 and "Traceback" not in off.stderr
    assert "target.kafka.common.sasl.jaas.config" in off.stderr
    assert encoded not in off.stderr + off.stdout


def test_wrong_password_is_one_clear_line_without_the_password(
    clusters, sasl_target, tmp_path, topic_name
):
    _, sasl_bootstrap = sasl_target
    wrong = "not-the-Pa55word"
    doc = pipeline_dict(clusters, topic_name("pbadpw"), ["x"])
    doc["target"]["kafka"]["common"] = {
        "bootstrap.servers": sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS.format(u="alice", p=wrong),
    }
    doc["target"]["connectTimeout"] = "5 seconds"
    result = k2k_cli(
        "start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)), timeout=60
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    assert "target cluster" in lines[0] and sasl_bootstrap in lines[0]
    assert "authentication" in lines[0].lower(), lines[0]
    assert wrong not in result.stderr + result.stdout
