"""The embedded brokers' class-data archive (k2k.local.launch): the first start records into
its data dir, a clean stop (possibly in another process) publishes next to the jars, and
later starts and Kafka's tools map it. No JVM runs here."""

from __future__ import annotations

from pathlib import Path

import pytest

from k2k.local import launch
from k2k.local.launch import KafkaJvm, publish_class_data


@pytest.fixture
def jvm(tmp_path: Path, monkeypatch) -> KafkaJvm:
    monkeypatch.setattr(launch, "java_build_id", lambda java: "0123")
    (tmp_path / "kafka" / "libs").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    return KafkaJvm("java", tmp_path / "kafka" / "libs", "512m", (), tmp_path / "data")


def _class_data_options(command: list[str]) -> list[str]:
    return [part for part in command if "SharedArchiveFile" in part or "ArchiveClasses" in part]


def test_a_clean_stop_publishes_what_the_first_start_recorded(jvm: KafkaJvm, tmp_path: Path):
    archive = tmp_path / "kafka" / "class-data" / "kafka-0123.jsa"
    recording = jvm.data_dir / "classes.jsa.tmp"
    first = jvm.broker_command(jvm.data_dir / "server.properties")
    assert _class_data_options(first) == [f"-XX:ArchiveClassesAtExit={recording}"]
    assert first[-2:] == ["kafka.Kafka", str(jvm.data_dir / "server.properties")]
    recording.write_bytes(b"classes")  # what the JVM writes at exit
    publish_class_data(jvm.data_dir, complete=True)
    assert archive.read_bytes() == b"classes"
    assert sorted(jvm.data_dir.iterdir()) == []  # recording and its destination note gone
    again = jvm.broker_command(jvm.data_dir / "server.properties")
    assert _class_data_options(again) == [f"-XX:SharedArchiveFile={archive}"]
    publish_class_data(jvm.data_dir, complete=True)  # mapped: nothing to publish
    assert archive.read_bytes() == b"classes"


def test_an_unclean_stop_drops_the_recording(jvm: KafkaJvm, tmp_path: Path):
    jvm.broker_command(jvm.data_dir / "server.properties")
    (jvm.data_dir / "classes.jsa.tmp").write_bytes(b"trunc")
    publish_class_data(jvm.data_dir, complete=False)
    assert not (tmp_path / "kafka" / "class-data").exists()
    assert sorted(jvm.data_dir.iterdir()) == []
