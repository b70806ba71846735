"""Which class-data archive the Spark driver JVM that k2k starts maps or records: that JVM
starts about a second sooner (docs/spark.md#start-up). The mechanism (recording, publishing,
locks, pruning) is :mod:`k2k.jvm.classdata`'s; this module names an archive after what the
driver JVM loads: the JDK, Spark's jars and configuration, and the driver's settings.

Archives live under ``$K2K_HOME`` and are shared by every k2k process on the machine; the
most recently used are kept.

Runs on: driver, when k2k launches Spark's JVM itself (not under spark-submit).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from k2k.jvm import classdata
from k2k.jvm.classdata import ClassData
from k2k.jvm.home import k2k_home

__all__ = ["ARCHIVE_DIR", "KEEP_ARCHIVES", "class_data", "driver_options", "publish"]

#: Under ``$K2K_HOME``: the archives, and recordings in progress (dot files).
ARCHIVE_DIR = "spark-class-data"
#: Settings that change what the driver JVM loads, or how: part of an archive's name.
_KEYED_SETTINGS = (
    "spark.driver.defaultJavaOptions",
    "spark.driver.extraJavaOptions",
    "spark.driver.extraClassPath",
    "spark.driver.extraLibraryPath",
    "spark.driver.memory",
    "spark.jars",
    "spark.jars.packages",
)
#: The same, from the environment (Spark's launcher and the JVM read them).
_KEYED_ENVIRONMENT = (
    "SPARK_CONF_DIR",
    "HADOOP_CONF_DIR",
    "YARN_CONF_DIR",
    "SPARK_DIST_CLASSPATH",
    "SPARK_DRIVER_MEMORY",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
)
_JAVA_OPTION_SETTINGS = ("spark.driver.defaultJavaOptions", "spark.driver.extraJavaOptions")
#: Options by which the user decides class-data sharing already: k2k then adds none.
_USERS_OWN = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "AutoCreateSharedArchive")
#: The JVM's notes about archives (one it rejects, classes it cannot archive) mean nothing
#: to an operator: without the archive the JVM only starts as it would have anyway.
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
#: Archives kept, the most recently used: one per setup an operator runs side by side, while
#: those of replaced JDKs, Spark installations or settings (about 100 MB each) go. An archive
#: a running JVM maps is never removed (see :func:`k2k.jvm.classdata.hold`).
KEEP_ARCHIVES = 5


def class_data(
    settings: Mapping[str, str], spark_home: Path, home: Path | None = None
) -> ClassData | None:
    """The archive for a driver JVM started with ``settings`` from ``spark_home``; None
    when the user's options decide class-data sharing, no Java is found, or the archive
    directory cannot be written."""
    java_options = " ".join(settings.get(name, "") for name in _JAVA_OPTION_SETTINGS)
    if any(option in java_options for option in _USERS_OWN):
        return None
    java = _spark_java()
    directory = (home if home is not None else k2k_home()) / ARCHIVE_DIR
    if java is None or any(c.isspace() for c in str(directory)):
        return None  # Spark splits the JVM options at white space
    archive = directory / f"spark-{_key(java, spark_home, settings)}.jsa"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        classdata.remove_orphans(directory)
    except OSError:
        return None
    if classdata.hold(archive):
        return ClassData(archive, None)
    return ClassData(archive, classdata.recording_for(archive))


def driver_options(data: ClassData) -> str:
    """The driver's Java options for ``data``, in the one string Spark's setting takes."""
    return " ".join((*data.options, *_QUIET))


def publish(data: ClassData, exit_code: int | None) -> None:
    """After the JVM of ``data`` ended with ``exit_code``: its complete recording becomes
    the archive (atomically), any other is removed; the least recently used archives go."""
    if classdata.publish(data, clean=exit_code == 0):
        with contextlib.suppress(OSError):
            classdata.prune(data.archive.parent, "spark-*.jsa", KEEP_ARCHIVES, data.archive)


def _spark_java() -> str | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.isfile(java) else None


def _key(java: str, spark_home: Path, settings: Mapping[str, str]) -> str:
    """What must match for a JVM to accept an archive: the JDK's files, Spark's jars and
    the driver's settings. A change starts a new archive instead of a rejected one."""
    jdk = Path(java).parents[1]
    home = spark_home.resolve()
    conf = Path(os.environ.get("SPARK_CONF_DIR") or home / "conf")
    parts = [java, *(_stamp(jdk / name) for name in ("release", "lib/modules")), str(home)]
    with contextlib.suppress(OSError):  # the JVM checks each jar's size and time
        parts += sorted(_stamp(Path(entry.path)) for entry in os.scandir(home / "jars"))
    with contextlib.suppress(OSError):
        parts += sorted(_stamp(Path(entry.path)) for entry in os.scandir(conf))
    parts += [f"{name}={_keyed(name, settings.get(name, ''))}" for name in _KEYED_SETTINGS]
    parts += [f"{name}={os.environ.get(name, '')}" for name in _KEYED_ENVIRONMENT]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _keyed(name: str, value: str) -> str:
    """A setting as far as it matters to an archive: system properties (``-D…``, such as
    the log level) do not."""
    if name not in _JAVA_OPTION_SETTINGS:
        return value
    return " ".join(option for option in value.split() if not option.startswith("-D"))


def _stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path}:-"
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
