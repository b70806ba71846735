"""The class-data mechanism every JVM k2k launches shares (k2k.jvm.classdata): the options
that map or record an archive, and publishing a recording from another directory, as the
embedded brokers record into their data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from k2k.jvm.classdata import ClassData, publish


def test_options_map_an_archive_or_record_one(tmp_path: Path):
    archive, recording = tmp_path / "a.jsa", tmp_path / "a.tmp"
    assert ClassData(archive, None).options == (f"-XX:SharedArchiveFile={archive}",)
    assert ClassData(archive, recording).options == (f"-XX:ArchiveClassesAtExit={recording}",)


def test_a_recording_elsewhere_is_copied_next_to_the_archive_then_renamed(tmp_path: Path):
    recording = tmp_path / "data" / "classes.jsa.tmp"
    recording.parent.mkdir()
    recording.write_bytes(b"classes")
    archive = tmp_path / "cache" / "class-data" / "kafka-0123.jsa"
    assert publish(ClassData(archive, recording), clean=True)
    assert archive.read_bytes() == b"classes" and not recording.exists()
    assert sorted(archive.parent.iterdir()) == [archive]  # no staging copy left behind


@pytest.mark.parametrize(("content", "clean"), [(b"classes", False), (b"", True)])
def test_an_unclean_or_empty_recording_is_dropped(tmp_path: Path, content: bytes, clean: bool):
    recording = tmp_path / "classes.jsa.tmp"
    recording.write_bytes(content)
    archive = tmp_path / "class-data" / "kafka-0123.jsa"
    assert not publish(ClassData(archive, recording), clean=clean)
    assert not archive.exists() and not recording.exists()


def test_nothing_to_publish_when_the_archive_was_mapped(tmp_path: Path):
    archive = tmp_path / "kafka-0123.jsa"
    archive.write_bytes(b"classes")
    assert not publish(ClassData(archive, None), clean=True)
    assert archive.read_bytes() == b"classes"
