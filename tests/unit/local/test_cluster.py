"""The embedded clusters' checks that need no broker: installation errors (no Java, no Maven),
the pinned Kafka version, ports already taken and storage ``k2k local up`` refuses to format
again. Each fails before a broker starts."""

from __future__ import annotations

import os
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from k2k.cli.local import local
from k2k.errors import LocalClusterError
from k2k.local import KAFKA_VERSION, LocalCluster, ensure_kafka_installed, find_java, free_port
from tests.helpers.local import local_up_args
from tests.helpers.paths import REPO


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port with a live listener that is not Kafka (what a user's other service looks like)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def test_pom_pins_the_kafka_version_of_the_python_constant() -> None:
    pom = REPO / "src" / "k2k" / "local" / "pom.xml"
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    assert ET.parse(pom).getroot().findtext("m:properties/m:kafka.version", namespaces=ns) == (
        KAFKA_VERSION
    )


def test_missing_maven_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    java = os.path.realpath(find_java())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(java)  # Java present, Maven absent
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("K2K_HOME", str(tmp_path / "home"))

    with pytest.raises(LocalClusterError, match=r"'mvn' \(Apache Maven 3.6\+\) is not on PATH"):
        ensure_kafka_installed()
    assert not (tmp_path / "home" / f"kafka-{KAFKA_VERSION}").exists()


def test_missing_java_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("K2K_HOME", str(tmp_path / "home"))

    with pytest.raises(LocalClusterError, match=r"no 'java' on PATH .* Java 17\+ runtime"):
        ensure_kafka_installed()


def test_taken_port_fails_before_anything_starts(tmp_path: Path, taken_port: int) -> None:
    cluster = LocalCluster("source", taken_port, tmp_path / "source")
    with pytest.raises(
        LocalClusterError, match=rf"port {taken_port} on 127.0.0.1 is already in use"
    ):
        cluster.start()
    assert not cluster.server_properties.exists()
    assert not cluster.is_running()


@pytest.mark.parametrize("flag", ["--source-port", "--target-port"])
def test_cli_up_names_the_taken_port_and_the_flag(
    tmp_path: Path, taken_port: int, flag: str
) -> None:
    other = "--target-port" if flag == "--source-port" else "--source-port"
    args = ["up", flag, str(taken_port), other, str(free_port()), "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(local, args)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: port {taken_port} on 127.0.0.1 is already in use by another process; "
        f"choose a free port with {flag}"
    ]
    assert "Traceback" not in result.output
    assert not (tmp_path / "source" / "broker.pid").exists()


@pytest.mark.parametrize(
    "meta", [None, "#\n#Wed Nov 25 09:03:12 UTC 2026\nnode.id=1\n"], ids=["missing", "truncated"]
)
def test_cli_up_refuses_storage_with_data_but_no_valid_meta_properties(
    tmp_path: Path, meta: str | None
) -> None:
    """Formatting again would put a new cluster id over the old topics: refused before any
    broker starts, with one line saying what to do."""
    data = tmp_path / "local"
    kraft = data / "target" / "kraft"
    (kraft / "__cluster_metadata-0").mkdir(parents=True)
    (kraft / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"\0" * 100)
    if meta is not None:
        (kraft / "meta.properties").write_text(meta)
    result = CliRunner().invoke(local, local_up_args(data, free_port(), free_port()))
    assert result.exit_code == 1
    problem = "is missing" if meta is None else "is incomplete (no version, cluster.id)"
    assert result.stderr.splitlines() == [
        f"error: the target cluster's storage {kraft} holds data but its meta.properties "
        f"{problem}; restore {kraft / 'meta.properties'}, or delete {kraft} to start this "
        "cluster empty (its topics are lost)"
    ]
    assert "Traceback" not in result.output
    assert not (data / "source" / "broker.pid").exists()  # nothing was started
    assert (kraft / "__cluster_metadata-0" / "00000000000000000000.log").stat().st_size == 100
