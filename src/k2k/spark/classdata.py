"""The class-data archive of the Spark driver JVM that k2k starts: that JVM starts about a
second sooner (docs/spark.md#start-up).

The first start with a given Java, Spark and driver settings records the classes the JVM
loaded (``-XX:ArchiveClassesAtExit``); later starts map that archive
(``-XX:SharedArchiveFile``) instead of loading and verifying those classes again. A
truncated archive crashes the JVM that maps it, so a recording is published only once its
JVM exited with status 0, by a rename within the archive directory.

Runs on: driver, when k2k launches Spark's JVM itself (not under spark-submit).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from k2k.jvm.home import k2k_home

__all__ = ["ARCHIVE_DIR", "KEEP_ARCHIVES", "ClassData", "class_data", "publish", "release_archives"]

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
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_RECORDING = ".recording"
#: Archives kept, the most recently used: one per setup an operator runs side by side, while
#: those of replaced JDKs, Spark installations or settings (about 100 MB each) go. An archive
#: a running JVM maps is never removed (see _hold).
KEEP_ARCHIVES = 5
#: This process's shared locks on the archives its JVMs map: path -> open descriptor.
_HELD: dict[Path, int] = {}


@dataclass(frozen=True)
class ClassData:
    """The archive for one driver JVM, and where that JVM records one when there is none."""

    archive: Path
    #: Where the JVM writes its classes at exit; None when it maps :attr:`archive`.
    recording: Path | None

    @property
    def options(self) -> str:
        """The JVM options that map the archive, or record one."""
        if self.recording is None:
            return f"-XX:SharedArchiveFile={self.archive} {_QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.recording} {_QUIET}"


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
        _remove_orphans(directory)
    except OSError:
        return None
    if _hold(archive):
        with contextlib.suppress(OSError):
            os.utime(archive)  # its time says when it was last used (see _prune)
        return ClassData(archive, None)
    # The pid tells an orphan; the random part keeps two hosts sharing $K2K_HOME apart.
    recording = f".{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{_RECORDING}"
    return ClassData(archive, directory / recording)


def publish(data: ClassData, exit_code: int | None) -> None:
    """After the JVM of ``data`` ended with ``exit_code``: its complete recording becomes
    the archive (atomically), any other is removed."""
    if data.recording is None:
        return
    # Only a start-up optimisation: whatever fails here, a later start records again.
    with contextlib.suppress(OSError):
        try:
            if exit_code == 0 and data.recording.is_file() and data.recording.stat().st_size:
                _sync(data.recording)  # on disk before its name says it is complete
                os.replace(data.recording, data.archive)
                _sync(data.archive.parent)
                _prune(data.archive.parent, data.archive)
        finally:
            data.recording.unlink(missing_ok=True)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def _remove_orphans(directory: Path) -> None:
    """Recordings of k2k processes that died before publishing (their JVMs still wrote
    them, at exit): each is as large as an archive."""
    for path in directory.glob(f".*{_RECORDING}"):
        pid = path.name.removesuffix(_RECORDING).rsplit(".", 2)[-2]
        if pid.isdigit() and not _alive(int(pid)):
            path.unlink(missing_ok=True)


def _hold(archive: Path) -> bool:
    """Take a shared lock on ``archive`` for as long as this process lives (its JVM maps
    the file, which on a shared file system must not vanish under it); False when there is
    no archive, or it was just removed."""
    held = _HELD.get(archive)
    if held is not None:
        with contextlib.suppress(OSError):
            if os.fstat(held).st_nlink:
                return True
        os.close(held)  # deleted by hand: look again
        del _HELD[archive]
    try:
        fd = os.open(archive, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        if os.fstat(fd).st_nlink == 0:
            raise FileNotFoundError(archive)  # removed between the open and the lock
    except OSError:
        os.close(fd)
        return False
    _HELD[archive] = fd
    return True


def release_archives() -> None:
    """Let go of this process's locks on archives (tests; a process's end does it too)."""
    for fd in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


def _prune(directory: Path, published: Path) -> None:
    """Keep the :data:`KEEP_ARCHIVES` most recently used archives, and any archive a running
    k2k process holds (its JVM maps it), and ``published``."""
    archives = []
    for path in directory.glob("spark-*.jsa"):
        with contextlib.suppress(OSError):
            archives.append((path.stat().st_mtime_ns, path))
    for _, path in sorted(archives, reverse=True)[KEEP_ARCHIVES:]:
        if path != published:
            with contextlib.suppress(OSError):
                _remove_unless_held(path)


def _remove_unless_held(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while one is held
        path.unlink()
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
