"""The command line of a broker's JVM and of Kafka's command-line tools run beside it: heap,
GC/JIT options, logging, class path, and the class-data archive they share.

Start-up maps a class-data-sharing archive of the broker's classes (a faster start): the first
cluster that stops cleanly leaves one per JVM build next to the jars, and every later start
maps it. A JVM that cannot use it loads classes the normal way (and says so in ``broker.log``).
The mechanism is :mod:`k2k.jvm.classdata`'s; this module says where a broker's archive lives.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from k2k.errors import LocalClusterError
from k2k.jvm.classdata import ClassData, publish
from k2k.local.install import java_build_id

__all__ = ["DEFAULT_JVM_OPTIONS", "KafkaJvm", "RunTool", "publish_class_data"]

DEFAULT_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""JIT and GC flags for a fast start: the serial collector suits a small heap, and stopping at the
C1 compiler starts the broker sooner. C1 code is slower at peak throughput, so a
benchmark should pass its own ``jvm_options`` (e.g. ``()``) to measure the broker at full speed."""

RunTool = Callable[..., subprocess.CompletedProcess[str]]
"""Runs one of Kafka's tools: ``run_tool(main_class, *args, timeout_s=...)``."""


@dataclass(frozen=True)
class KafkaJvm:
    """How one cluster runs Java: ``java`` with the jars in ``libs``, ``heap`` as ``-Xmx``,
    its GC/JIT ``options``, and the ``log4j2.yaml`` in ``data_dir``."""

    java: str
    libs: Path
    heap: str
    options: Sequence[str]
    data_dir: Path

    def command(self, class_data: Sequence[str] = ()) -> list[str]:
        """``java`` and its options, up to (not including) the main class."""
        return [
            self.java,
            f"-Xmx{self.heap}",
            f"-Xms{min_heap(self.heap)}",
            *self.options,
            *class_data,
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
            "-cp",
            f"{self.libs}/*",
        ]

    def broker_command(self, server_properties: Path) -> list[str]:
        """The broker's whole command line, mapping the class-data archive or recording one
        at exit (see :func:`publish_class_data`)."""
        return [*self.command(self._class_data().options), "kafka.Kafka", str(server_properties)]

    def run_tool(self, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's command-line tools (main class and arguments in ``args``) with
        the cluster's JVM settings and the shared class data; its output is captured."""
        archive = self._class_data_archive()
        class_data = ClassData(archive, None).options if archive.is_file() else ()
        return subprocess.run(
            [*self.command(class_data), *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )

    def _class_data_archive(self) -> Path:
        """Where the class-data archive for this JVM build and these jars lives (may not
        exist). A JDK upgrade changes the build id and so starts a fresh archive instead of
        a rejected one."""
        return self.libs.parent / "class-data" / f"kafka-{java_build_id(self.java)}.jsa"

    def _class_data(self) -> ClassData:
        """The shared archive to map, or where to record one at exit.

        Recording goes to a file in our own data dir (two clusters may stop at the same time);
        :func:`publish_class_data` moves it into place after a clean exit, in whichever
        process stops the broker, which is why the archive's path is written down here.
        """
        archive = self._class_data_archive()
        recording, destination = _class_data_files(self.data_dir)
        recording.unlink(missing_ok=True)
        if archive.is_file():
            destination.unlink(missing_ok=True)
            return ClassData(archive, None)
        destination.write_text(f"{archive}\n", encoding="utf-8")
        return ClassData(archive, recording)


def publish_class_data(data_dir: Path, complete: bool) -> None:
    """After the broker of ``data_dir`` stopped (``complete``: cleanly), the class data its
    JVM recorded becomes the shared archive (:func:`k2k.jvm.classdata.publish`)."""
    recording, destination = _class_data_files(data_dir)
    try:
        archive = Path(destination.read_text(encoding="utf-8").strip())
    except OSError:  # it mapped the archive, or never started here: nothing to publish
        recording.unlink(missing_ok=True)
        return
    finally:
        destination.unlink(missing_ok=True)
    publish(ClassData(archive, recording), clean=complete)


def _class_data_files(data_dir: Path) -> tuple[Path, Path]:
    return data_dir / "classes.jsa.tmp", data_dir / "classes.jsa.destination"


def min_heap(heap: str) -> str:
    """Initial heap: 256m, or the maximum heap if that is smaller (the JVM refuses Xms > Xmx)."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = heap.strip().lower()
    try:
        size = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    except (ValueError, IndexError) as exc:
        raise LocalClusterError(
            f"invalid heap size {heap!r}: expected e.g. '512m' or '1g'"
        ) from exc
    return heap if size < 256 << 20 else "256m"
