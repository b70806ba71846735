"""Client property translation (Java names -> librdkafka) and secret masking."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from k2k.config import PipelineConfig, render_effective
from k2k.config.client_rules import JAVA_ONLY, RENAMES, SUGGESTIONS
from k2k.config.clients import librdkafka_verdict
from k2k.config.loader import build_pipeline
from k2k.errors import ConfigError
from tests.helpers.config import pipeline

PASSWORD = "hunter2-do-not-show"
PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="alice" password="{PASSWORD}";'
)


def target(common: dict[str, Any], **roles: dict[str, Any]) -> dict[str, Any]:
    return {"target": {"kafka": {"common": {"bootstrap.servers": "tgt:9092", **common}, **roles}}}


def test_role_map_wins_over_common_and_result_is_a_new_dict(build: Any) -> None:
    cfg: PipelineConfig = build(
        target({"client.id": "k2k", "linger.ms": 10}, producer={"linger.ms": 5}, consumer={})
    )
    first = cfg.target_client("producer")
    assert first == {"bootstrap.servers": "tgt:9092", "client.id": "k2k", "linger.ms": "5"}
    first["linger.ms"] = "999"
    assert cfg.target_client("producer")["linger.ms"] == "5"
    assert cfg.target_client("consumer")["linger.ms"] == "10"


@pytest.mark.parametrize(
    ("java", "librdkafka"),
    [
        ({"max.request.size": 2097152}, {"message.max.bytes": "2097152"}),
        ({"fetch.max.wait.ms": 100}, {"fetch.wait.max.ms": "100"}),
        ({"buffer.memory": 33554432}, {"queue.buffering.max.kbytes": "32768"}),
        ({"send.buffer.bytes": -1}, {"socket.send.buffer.bytes": "0"}),
        ({"receive.buffer.bytes": 65536}, {"socket.receive.buffer.bytes": "65536"}),
        ({"delivery.timeout.ms": 120000}, {"message.timeout.ms": "120000"}),
        (
            {"ssl.endpoint.identification.algorithm": ""},
            {"ssl.endpoint.identification.algorithm": "none"},
        ),
        (
            {"enable.idempotence": True, "acks": "all"},
            {"enable.idempotence": "true", "acks": "all"},
        ),
        ({"client.dns.lookup": "use_all_dns_ips"}, {"client.dns.lookup": "use_all_dns_ips"}),
        ({"enable.auto.commit": False}, {"enable.auto.commit": "false"}),
        ({"isolation.level": "read_committed"}, {"isolation.level": "read_committed"}),
    ],
)
def test_java_names_are_translated(
    build: Any, java: dict[str, Any], librdkafka: dict[str, str]
) -> None:
    cfg = build(target(java))
    assert cfg.target_client("producer") == {"bootstrap.servers": "tgt:9092", **librdkafka}


@pytest.mark.parametrize(
    ("module", "mechanism"),
    [
        ("org.apache.kafka.common.security.plain.PlainLoginModule", "PLAIN"),
        ("org.apache.kafka.common.security.scram.ScramLoginModule", "SCRAM-SHA-512"),
    ],
)
def test_jaas_becomes_username_and_password(build: Any, module: str, mechanism: str) -> None:
    jaas = f'{module} required username="alice" password="{PASSWORD}";'
    cfg = build(
        target(
            {"sasl.jaas.config": jaas, "sasl.mechanism": mechanism, "security.protocol": "SASL_SSL"}
        )
    )
    props = cfg.target_client("admin")
    assert props["sasl.username"] == "alice"
    assert props["sasl.password"] == PASSWORD
    assert props["sasl.mechanism"] == mechanism
    assert "sasl.jaas.config" not in props


def test_jaas_with_escaped_quotes(build: Any) -> None:
    module = "org.apache.kafka.common.security.plain.PlainLoginModule"
    jaas = f'{module} required username="a" password="p\\"q";'
    props = build(target({"sasl.jaas.config": jaas, "sasl.mechanism": "PLAIN"})).target_client(
        "admin"
    )
    assert props["sasl.password"] == 'p"q'


def test_jaas_and_explicit_credentials_together_are_refused(problems: Any) -> None:
    lines = problems(
        target({"sasl.jaas.config": PLAIN, "sasl.mechanism": "PLAIN", "sasl.username": "bob"})
    )
    assert lines[0].startswith(
        "target.kafka.common.sasl.jaas.config: given together with sasl.username, got '******'"
    )


def test_pem_truststore_becomes_ca_location(build: Any) -> None:
    props = build(
        target(
            {
                "security.protocol": "SSL",
                "ssl.truststore.location": "/etc/k2k/ca.pem",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.password": "unused",
            }
        )
    ).target_client("consumer")
    assert props == {
        "bootstrap.servers": "tgt:9092",
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/k2k/ca.pem",
    }


def test_pkcs12_keystore_passes(build: Any) -> None:
    props = build(
        target(
            {
                "ssl.keystore.location": "/etc/k2k/client.p12",
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.password": PASSWORD,
                "ssl.key.password": PASSWORD,
            }
        )
    ).target_client("producer")
    assert props["ssl.keystore.location"] == "/etc/k2k/client.p12"
    assert props["ssl.keystore.password"] == PASSWORD
    assert "ssl.keystore.type" not in props


def test_unknown_role_is_a_programming_error(build: Any) -> None:
    with pytest.raises(ValueError, match="unknown source client role 'producer'"):
        build().source_client("producer")


def test_bootstrap_may_live_in_every_role_map(build: Any) -> None:
    source = {
        "kafka": {"consumer": {"bootstrap.servers": "a:1"}, "admin": {"bootstrap.servers": "a:1"}}
    }
    assert build(source=source).source_client("admin") == {"bootstrap.servers": "a:1"}


# --- the librdkafka probe -------------------------------------------------------------------


def test_suggested_and_renamed_names_exist_in_the_installed_librdkafka() -> None:
    """The translation tables and "did you mean" names must be real librdkafka properties."""
    names = set(SUGGESTIONS) - set(RENAMES) | {rename.target for rename in RENAMES.values()}
    unknown = [
        name
        for name in sorted(names)
        if (librdkafka_verdict(name, "not-a-valid-value") or ("", ""))[0] == "unknown"
    ]
    assert unknown == []


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_the_probe_never_starts_a_client() -> None:
    """A started librdkafka client runs native threads; the probe must leave none behind."""
    threads_before = len(list(Path("/proc/self/task").iterdir()))
    for _ in range(20):
        assert librdkafka_verdict("linger.ms", "5") is None
        assert librdkafka_verdict("client.id", "k2k") is None
    assert len(list(Path("/proc/self/task").iterdir())) == threads_before


def test_java_only_names_are_refused_even_if_librdkafka_knows_them(problems: Any) -> None:
    for name in JAVA_ONLY:
        lines = problems(target({name: "x"}))
        assert lines[0].startswith(
            f"target.kafka.common.{name}: not supported by k2k's Kafka client"
        )


def test_loading_is_fast() -> None:
    data = pipeline(
        target(
            {"acks": "all", "linger.ms": 5, "compression.type": "zstd"},
            producer={"max.request.size": 2097152},
        )
    )
    build_pipeline(data, {})  # warm-up: imports
    fastest = min(_timed(lambda: build_pipeline(data, {})) for _ in range(5))
    assert fastest < 0.05, f"validating a pipeline took {fastest * 1000:.1f} ms"


def _timed(action: Any) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


# --- secrets ----------------------------------------------------------------------------------


def _secret_pipeline() -> dict[str, Any]:
    return pipeline(
        {
            "license": {"token": PASSWORD},
            "source": {
                "kafka": {"common": {"sasl.jaas.config": PLAIN, "sasl.mechanism": "PLAIN"}},
                "registry": {"config": {"basic.auth.user.info": f"u:{PASSWORD}"}},
            },
            "target": {
                "kafka": {
                    "common": {
                        "sasl.username": "bob",
                        "sasl.password": PASSWORD,
                        "ssl.key.pem": PASSWORD,
                    },
                    "producer": {"sasl.oauthbearer.client.secret": PASSWORD},
                }
            },
        }
    )


def test_secrets_never_show_in_repr_str_render_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    cfg = build_pipeline(_secret_pipeline(), {})
    assert cfg.source_client("consumer")["sasl.password"] == PASSWORD  # usable ...
    rendered = render_effective(cfg)
    for text in (repr(cfg), str(cfg), rendered, repr(cfg.source), str(cfg.target.kafka)):
        assert PASSWORD not in text  # ... but never shown
    assert "sasl.jaas.config: '******'" in rendered
    assert "sasl.password: '******'" in rendered
    with caplog.at_level(logging.INFO):
        logging.getLogger("k2k.test").info("config: %s / %r", cfg, cfg)
    assert PASSWORD not in caplog.text


def test_secrets_never_show_in_error_messages() -> None:
    data = _secret_pipeline()
    data["source"]["kafka"]["common"]["sasl.jaas.config"] = PLAIN.replace(
        "plain.PlainLoginModule", "Krb5LoginModule"
    )
    data["target"]["kafka"]["common"]["sasl.password"] = {"nested": PASSWORD}
    data["target"]["kafka"]["producer"]["ssl.keystore.password"] = [PASSWORD]
    data["spark"] = {"zzz": PASSWORD}
    with pytest.raises(ConfigError) as caught:
        build_pipeline(data, {})
    message = str(caught.value)
    assert "source.kafka.common.sasl.jaas.config" in message
    assert "target.kafka.common.sasl.password: wrong type, got '******'" in message
    assert PASSWORD not in message
    assert PASSWORD not in repr(caught.value)
