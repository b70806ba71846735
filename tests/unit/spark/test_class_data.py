"""The Spark driver JVM's class-data archive (k2k.spark.classdata, on k2k.jvm.classdata):
which archive a start maps or records, and that only a recording whose JVM exited cleanly
is published."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from k2k.jvm.classdata import ClassData, release_archives
from k2k.spark.classdata import ARCHIVE_DIR, KEEP_ARCHIVES, class_data, driver_options, publish


@pytest.fixture(autouse=True)
def java_home(tmp_path: Path, monkeypatch) -> Path:
    """A JDK as far as the archive's name looks at one."""
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "lib").mkdir()
    (jdk / "bin" / "java").write_text("")
    (jdk / "release").write_text('JAVA_VERSION="17.0.15"\n')
    (jdk / "lib" / "modules").write_bytes(b"m")
    monkeypatch.setenv("JAVA_HOME", str(jdk))
    for name in ("SPARK_CONF_DIR", "JAVA_TOOL_OPTIONS", "SPARK_DRIVER_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    return jdk


@pytest.fixture(autouse=True)
def no_held_archives():
    yield
    release_archives()


@pytest.fixture
def spark_home(tmp_path: Path) -> Path:
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"x" * 10)
    return tmp_path / "spark"


def test_first_start_records_then_starts_map_the_published_archive(tmp_path, spark_home):
    home = tmp_path / "home"
    first = class_data({}, spark_home, home)
    assert first is not None and first.recording is not None
    assert f"-XX:ArchiveClassesAtExit={first.recording}" in driver_options(first)
    assert first.recording.parent == first.archive.parent == home / ARCHIVE_DIR
    first.recording.write_bytes(b"classes")  # what the JVM writes at exit
    publish(first, exit_code=0)
    assert first.archive.read_bytes() == b"classes" and not first.recording.exists()
    again = class_data({}, spark_home, home)
    assert again == ClassData(first.archive, None)
    assert f"-XX:SharedArchiveFile={first.archive}" in driver_options(again)
    assert "-Xlog:cds=off" in driver_options(again)


@pytest.mark.parametrize("exit_code", [1, 137, None])
def test_a_recording_of_a_jvm_that_did_not_exit_cleanly_is_dropped(tmp_path, spark_home, exit_code):
    data = class_data({}, spark_home, tmp_path)
    assert data is not None and data.recording is not None
    data.recording.write_bytes(b"trunc")  # a JVM killed while writing leaves a partial file
    publish(data, exit_code)
    assert not data.archive.exists() and not data.recording.exists()


def test_an_empty_recording_is_not_published(tmp_path, spark_home):
    data = class_data({}, spark_home, tmp_path)
    assert data is not None and data.recording is not None
    data.recording.write_bytes(b"")
    publish(data, 0)
    assert not data.archive.exists()


@pytest.mark.parametrize(
    "settings",
    [
        {"spark.driver.extraClassPath": "/opt/extra.jar"},
        {"spark.jars": "/opt/udf.jar"},
        {"spark.driver.extraJavaOptions": "-Xss4m"},
        {"spark.driver.memory": "4g"},
    ],
)
def test_settings_that_change_the_jvm_name_another_archive(tmp_path, spark_home, settings):
    plain = class_data({}, spark_home, tmp_path)
    other = class_data(settings, spark_home, tmp_path)
    assert plain is not None and other is not None and plain.archive != other.archive


def test_system_properties_such_as_the_log_level_share_an_archive(tmp_path, spark_home):
    quiet = class_data(
        {"spark.driver.extraJavaOptions": "-Dk2k.spark.logLevel=ERROR"}, spark_home, tmp_path
    )
    chatty = class_data(
        {"spark.driver.extraJavaOptions": "-Dk2k.spark.logLevel=INFO"}, spark_home, tmp_path
    )
    assert quiet is not None and chatty is not None and quiet.archive == chatty.archive


def test_other_spark_jars_name_another_archive(tmp_path, spark_home):
    before = class_data({}, spark_home, tmp_path)
    (spark_home / "jars" / "spark-sql.jar").write_bytes(b"y")
    after = class_data({}, spark_home, tmp_path)
    assert before is not None and after is not None and before.archive != after.archive


@pytest.mark.parametrize(
    "option",
    ["-Xshare:off", "-XX:SharedArchiveFile=/x.jsa", "-XX:+AutoCreateSharedArchive"],
)
@pytest.mark.parametrize(
    "setting", ["spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions"]
)
def test_the_users_own_class_data_options_are_left_alone(tmp_path, spark_home, option, setting):
    assert class_data({setting: f"-Xss4m {option}"}, spark_home, tmp_path) is None


def test_without_java_there_is_no_archive(tmp_path, spark_home, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert class_data({}, spark_home, tmp_path) is None


@pytest.mark.parametrize("archive_exists", [False, True])
def test_recordings_of_dead_processes_are_removed(tmp_path, spark_home, archive_exists):
    directory = tmp_path / ARCHIVE_DIR
    directory.mkdir()
    if archive_exists:
        data = class_data({}, spark_home, tmp_path)
        assert data is not None
        data.archive.write_bytes(b"classes")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    orphan = directory / f".spark-0123.jsa.{dead.stdout.strip()}.0a1b2c3d.recording"
    mine = directory / f".spark-0123.jsa.{os.getppid()}.0a1b2c3d.recording"  # a live one's
    orphan.write_bytes(b"x")
    mine.write_bytes(b"x")
    class_data({}, spark_home, tmp_path)
    assert not orphan.exists() and mine.exists()


def test_two_recordings_in_one_process_do_not_share_a_file(tmp_path, spark_home):
    first, second = (class_data({}, spark_home, tmp_path) for _ in range(2))
    assert first is not None and second is not None
    assert first.recording is not None and first.recording != second.recording


def test_the_environment_that_shapes_the_jvm_names_another_archive(
    tmp_path, spark_home, monkeypatch
):
    plain = class_data({}, spark_home, tmp_path)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss4m")
    other = class_data({}, spark_home, tmp_path)
    assert plain is not None and other is not None and plain.archive != other.archive


def test_a_home_with_white_space_gets_no_archive(tmp_path, spark_home):
    """Spark splits the JVM options at white space: such a path would break the start."""
    assert class_data({}, spark_home, tmp_path / "my cache") is None


def _record(settings: dict[str, str], spark_home: Path, home: Path) -> Path:
    """Start with ``settings`` (recording when there is no archive yet), stop cleanly; the
    archive's path."""
    data = class_data(settings, spark_home, home)
    assert data is not None
    if data.recording is not None:
        data.recording.write_bytes(b"classes")
        publish(data, 0)
    return data.archive


def test_an_archive_a_running_process_maps_is_kept(tmp_path, spark_home):
    mapped = _record({"spark.driver.memory": "1g"}, spark_home, tmp_path)
    os.utime(mapped, ns=(0, 0))  # the oldest by far
    release_archives()
    assert class_data({"spark.driver.memory": "1g"}, spark_home, tmp_path) == ClassData(
        mapped, None
    )  # this process's JVM maps it now: held until the process ends
    os.utime(mapped, ns=(0, 0))
    for n in range(2, KEEP_ARCHIVES + 3):
        _record({"spark.driver.memory": f"{n}g"}, spark_home, tmp_path)
    assert mapped.exists()
    assert len(list((tmp_path / ARCHIVE_DIR).glob("*.jsa"))) == KEEP_ARCHIVES + 1
    release_archives()
    _record({"spark.driver.memory": "99g"}, spark_home, tmp_path)
    assert not mapped.exists()  # no longer held: the least recently used goes


def test_only_the_most_recently_used_archives_are_kept(tmp_path, spark_home):
    memories = [f"{n}g" for n in range(1, KEEP_ARCHIVES + 2)]
    archives = {}
    for tick, memory in enumerate(memories[:KEEP_ARCHIVES]):
        archives[memory] = _record({"spark.driver.memory": memory}, spark_home, tmp_path)
        os.utime(archives[memory], ns=(tick * 10**9, tick * 10**9))  # used in this order
    oldest, *rest = memories[:KEEP_ARCHIVES]
    _record({"spark.driver.memory": oldest}, spark_home, tmp_path)  # used again: now newest
    newest = _record({"spark.driver.memory": memories[-1]}, spark_home, tmp_path)
    kept = sorted((tmp_path / ARCHIVE_DIR).glob("*.jsa"))
    assert kept == sorted([archives[oldest], *(archives[m] for m in rest[1:]), newest])
    assert not archives[rest[0]].exists()  # the least recently used went
