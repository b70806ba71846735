"""Install the Apache Kafka jars that the embedded clusters run, from Maven Central.

Why Maven and not the distribution tarball: Maven Central carries every Kafka jar, keeps a
checksum for each, honours the user's mirror and proxy settings (``~/.m2/settings.xml``), and
shares its local repository with any other JVM work on the machine. The broker needs no scripts
from the tarball: ``java -cp "<libs>/*" kafka.Kafka server.properties`` is all it takes.

Layout under ``${K2K_HOME:-~/.cache/k2k}``::

    kafka-4.3.1/
      libs/*.jar          what `java -cp` gets
      pom.xml             the pom that resolved them (for the curious)
      INSTALL_COMPLETE    written last, before the directory gets its final name
    kafka-4.3.1.lock      serialises concurrent installs (two terminals, parallel test workers)
    install-kafka-4.3.1.log   mvn's output of the last download (kept when it fails)

The directory is filled under a temporary name and renamed into place, so a crash or Ctrl-C
half-way never leaves a directory that looks installed.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from k2k.errors import LocalClusterError
from k2k.jvm.home import k2k_home

__all__ = [
    "KAFKA_VERSION",
    "MIN_JAVA_MAJOR",
    "ensure_kafka_installed",
    "find_java",
    "java_build_id",
    "k2k_home",
    "kafka_dir",
    "maven_install",
]

KAFKA_VERSION = "4.3.1"
"""The Apache Kafka release the embedded clusters run (the README and pom.xml state the same)."""

MIN_JAVA_MAJOR = 17
"""Kafka 4.x brokers need Java 17 or newer."""

_MARKER = "INSTALL_COMPLETE"
_MAVEN_TIMEOUT_S = 900.0  # a cold download is ~50 s on a good link; allow slow mirrors


def kafka_dir(home: Path | None = None) -> Path:
    """Return the installation directory of :data:`KAFKA_VERSION` (it may not exist yet)."""
    return (home if home is not None else k2k_home()) / f"kafka-{KAFKA_VERSION}"


def ensure_kafka_installed(
    home: Path | None = None, *, announce: Callable[[str], None] | None = None
) -> Path:
    """Make sure the Kafka jars are installed and return their ``libs`` directory.

    Idempotent and cheap once installed (one ``stat``). The first call runs Maven (about a
    minute with a cold Maven cache), holding a file lock so that concurrent callers download
    once and the others wait for the result.

    :param home: the k2k home directory; defaults to :func:`k2k_home`.
    :param announce: called with a one-line message just before a download starts, so a CLI can
        tell the user why the first run is slow. Not called when the jars are already there.
    :raises LocalClusterError: ``mvn`` or ``java`` is missing, or the download fails; the message
        says what to install or check.
    """
    target = kafka_dir(home)
    if (target / _MARKER).is_file():
        return target / "libs"
    find_java()  # fail before a minute of downloading if the jars could never run
    pom = resources.files("k2k.local").joinpath("pom.xml").read_text(encoding="utf-8")
    return maven_install(
        f"Apache Kafka {KAFKA_VERSION}",
        pom,
        target,
        {"kafka.version": KAFKA_VERSION},
        f"kafka_2.13-{KAFKA_VERSION}.jar",
        announce=announce,
    )


def maven_install(
    what: str,
    pom: str,
    target: Path,
    properties: Mapping[str, str],
    expect_jar: str,
    *,
    announce: Callable[[str], None] | None = None,
    prune: Callable[[Path], None] | None = None,
) -> Path:
    """Resolve ``pom``'s runtime dependencies into ``target/libs`` once; return that directory.

    The one way k2k (and its benchmark) fetches jars: ``mvn dependency:copy-dependencies``
    with ``-D`` ``properties`` into a scratch directory next to ``target``, checked for
    ``expect_jar``, optionally pruned by ``prune``, stamped and renamed into place, all
    under a file lock so concurrent callers download once. ``what`` names the jars in
    messages.

    :raises LocalClusterError: ``mvn`` is missing, times out or fails; the message says why
        and where Maven's full output is.
    """
    if (target / _MARKER).is_file():
        return target / "libs"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalClusterError(
            f"cannot install {what}: 'mvn' (Apache Maven 3.6+) is not on PATH; install it "
            "(e.g. `apt-get install maven` or `brew install maven`) and retry"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(target.parent / f"{target.name}.lock"):
        if not (target / _MARKER).is_file():  # nobody installed it while we waited
            if announce is not None:
                announce(
                    f"Installing {what} jars from Maven Central into {target} "
                    "(one time, about a minute)"
                )
            _download(mvn, what, pom, target, properties, expect_jar, prune)
    return target / "libs"


def _download(
    mvn: str,
    what: str,
    pom: str,
    target: Path,
    properties: Mapping[str, str],
    expect_jar: str,
    prune: Callable[[Path], None] | None,
) -> None:
    """Resolve the jars into a scratch directory next to ``target``, then rename it into place."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    log_path = target.parent / f"install-{target.name}.log"
    try:
        (scratch / "pom.xml").write_text(pom, encoding="utf-8")
        command = [
            mvn,
            "-q",
            "-B",
            "-Dstyle.color=never",
            "dependency:copy-dependencies",
            *(f"-D{key}={value}" for key, value in properties.items()),
            "-DincludeScope=runtime",
            f"-DoutputDirectory={scratch / 'libs'}",
        ]
        try:
            done = subprocess.run(
                command,
                cwd=scratch,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_MAVEN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise LocalClusterError(
                f"downloading {what} with mvn took longer than {_MAVEN_TIMEOUT_S:.0f} s; "
                "check access to Maven Central (or the mirror in ~/.m2/settings.xml) and retry"
            ) from exc
        log_path.write_text(done.stdout + done.stderr, encoding="utf-8")
        if done.returncode != 0 or not (scratch / "libs" / expect_jar).is_file():
            raise LocalClusterError(
                f"downloading {what} from Maven Central failed "
                f"(mvn exit {done.returncode}): {_first_maven_error(done.stdout + done.stderr)}; "
                "check network access to https://repo.maven.apache.org (or the mirror in "
                f"~/.m2/settings.xml) and retry; full output in {log_path}"
            )
        if prune is not None:
            prune(scratch / "libs")
        jars = sorted(p.name for p in (scratch / "libs").glob("*.jar"))
        (scratch / _MARKER).write_text(
            f"what={what}\njars={len(jars)}\ninstalled={time.strftime('%FT%T%z')}\n",
            encoding="utf-8",
        )
        scratch.chmod(0o755)  # mkdtemp makes it private; the jars are not secret
        if target.exists():  # a directory without the marker: left by something else; replace it
            shutil.rmtree(target)
        os.rename(scratch, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _first_maven_error(output: str) -> str:
    """Pick the line of mvn's output that best explains a failure, for a one-line message."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("[ERROR]") and len(line) > len("[ERROR]")]
    chosen = errors[0] if errors else (lines[-1] if lines else "no output")
    return chosen.removeprefix("[ERROR]").strip()[:400]


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (released by the OS even if we crash)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_java() -> str:
    """Return the ``java`` executable to run brokers with: ``$JAVA_HOME/bin/java``, else PATH.

    :raises LocalClusterError: no Java, or a Java older than :data:`MIN_JAVA_MAJOR`.
    """
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
    if java is None:
        raise LocalClusterError(
            f"cannot run Apache Kafka: no 'java' on PATH (and JAVA_HOME is not set); install a "
            f"Java {MIN_JAVA_MAJOR}+ runtime (e.g. `apt-get install openjdk-17-jre-headless`) "
            "or set JAVA_HOME"
        )
    major = _java_major(_java_banner(java))
    if major is not None and major < MIN_JAVA_MAJOR:
        raise LocalClusterError(
            f"cannot run Apache Kafka {KAFKA_VERSION}: {java} is Java {major}, Kafka needs Java "
            f"{MIN_JAVA_MAJOR}+; install a newer JDK or point JAVA_HOME at one"
        )
    return java


@functools.cache
def _java_banner(java: str) -> str:
    """Return what ``java -version`` prints (it identifies the exact JVM build).

    Cached: the answer cannot change within a process, and each probe starts a JVM.
    """
    try:
        return subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LocalClusterError(f"cannot run {java} -version: {exc}") from exc


def java_build_id(java: str) -> str:
    """A short stable id of the JVM build behind ``java`` (names its class-data archive)."""
    text = f"{os.path.realpath(java)}\n{_java_banner(java)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _java_major(banner: str) -> int | None:
    """Return the major Java version in a ``java -version`` banner (None if unparseable)."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if match is None:
        return None
    first = int(match.group(1))
    # Java 8 and older report "1.8.0_x"; from 9 on the first number is the major version.
    return int(match.group(2) or 0) if first == 1 else first
