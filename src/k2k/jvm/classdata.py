"""Class-data sharing for the JVMs k2k launches (Spark's driver, the embedded brokers): a
JVM maps an archive of the classes an earlier run loaded instead of loading and verifying
them again, and starts sooner.

A JVM started with ``-XX:ArchiveClassesAtExit=<recording>`` writes the classes it loaded
when it exits; later JVMs of the same build and class path map that file
(``-XX:SharedArchiveFile``). A truncated archive crashes the JVM that maps it, so a
recording becomes the archive only once its JVM exited cleanly: on disk first, then by a
rename within the archive's directory.

Where several processes share a directory of archives and old ones are pruned, a process
holds a shared lock on each archive its JVMs map (:func:`hold`), so pruning never removes an
archive in use (on a shared file system it would vanish under the JVM).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ClassData",
    "hold",
    "prune",
    "publish",
    "recording_for",
    "release_archives",
    "remove_orphans",
]

_RECORDING = ".recording"
#: This process's shared locks on the archives its JVMs map: path -> open descriptor.
_HELD: dict[Path, int] = {}


@dataclass(frozen=True)
class ClassData:
    """The archive for one JVM, and where that JVM records one when there is none."""

    archive: Path
    #: Where the JVM writes its classes at exit; None when it maps :attr:`archive`.
    recording: Path | None

    @property
    def options(self) -> tuple[str, ...]:
        """The JVM options that map the archive, or record one."""
        if self.recording is None:
            return (f"-XX:SharedArchiveFile={self.archive}",)
        return (f"-XX:ArchiveClassesAtExit={self.recording}",)


def recording_for(archive: Path) -> Path:
    """A recording beside ``archive`` that no other JVM writes: the pid tells an orphan
    (:func:`remove_orphans`), the random part keeps two hosts sharing a directory apart."""
    return archive.with_name(f".{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{_RECORDING}")


def publish(data: ClassData, clean: bool) -> bool:
    """After the JVM of ``data`` ended (``clean``: with status 0), its complete recording
    becomes the archive, atomically; the recording is removed either way. True when an
    archive was published."""
    recording = data.recording
    if recording is None:
        return False
    # Only a start-up optimisation: whatever fails here, a later start records again.
    try:
        if clean and recording.is_file() and recording.stat().st_size:
            _move_into_place(recording, data.archive)
            return True
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            recording.unlink(missing_ok=True)
    return False


def _move_into_place(recording: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    staging = recording
    if recording.parent != archive.parent:
        # A rename works within one file system only, and a data dir is often on another
        # (tmpfs) than the archives: copy next to the archive first.
        staging = archive.with_name(f".{archive.name}.{os.getpid()}")
        shutil.copyfile(recording, staging)
    try:
        _sync(staging)  # on disk before its name says it is complete
        os.replace(staging, archive)
        _sync(archive.parent)
    finally:
        if staging != recording:
            staging.unlink(missing_ok=True)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def hold(archive: Path) -> bool:
    """Take a shared lock on ``archive`` for as long as this process lives (its JVM maps
    the file) and mark it as just used (:func:`prune` keeps the most recently used); False
    when there is no archive, or it was just removed."""
    if not _lock(archive):
        return False
    with contextlib.suppress(OSError):
        os.utime(archive)
    return True


def _lock(archive: Path) -> bool:
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


def prune(directory: Path, pattern: str, keep: int, published: Path) -> None:
    """Keep the ``keep`` most recently used archives matching ``pattern``, any archive a
    running process holds (its JVM maps it), and ``published``."""
    archives = []
    for path in directory.glob(pattern):
        with contextlib.suppress(OSError):
            archives.append((path.stat().st_mtime_ns, path))
    for _, path in sorted(archives, reverse=True)[keep:]:
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


def remove_orphans(directory: Path) -> None:
    """Remove recordings (:func:`recording_for`) of processes that died before publishing:
    their JVMs still wrote them, at exit, each as large as an archive."""
    for path in directory.glob(f".*{_RECORDING}"):
        pid = path.name.removesuffix(_RECORDING).rsplit(".", 2)[-2]
        if pid.isdigit() and not _alive(int(pid)):
            path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
