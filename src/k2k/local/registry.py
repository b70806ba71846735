"""A local schema registry for the schema-mapping tests and demo: Apicurio Registry.

Apicurio Registry speaks the Confluent Schema Registry API under ``/apis/ccompat/v7`` and is on
Maven Central as a runnable Quarkus package, so it is installed like the Kafka jars
(:func:`k2k.local.install.maven_install`) into ``${K2K_HOME}/apicurio-<version>/libs`` and
started with ``java -jar quarkus-run.jar``, in-memory storage, on loopback ports. It needs Java
21+: :func:`find_java21` looks beside the default Java (``$K2K_REGISTRY_JAVA``,
``$JAVA_HOME``, ``PATH``, then the JDKs under ``/usr/lib/jvm``, ``/opt`` and
``/Library/Java/JavaVirtualMachines``). Two instances have separate id spaces.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from k2k.errors import LocalClusterError
from k2k.local.install import _java_banner, _java_major, k2k_home, maven_install
from k2k.local.process import start_watchdog

__all__ = [
    "APICURIO_VERSION",
    "LocalRegistry",
    "ensure_apicurio_installed",
    "find_java21",
    "start_registry",
]

APICURIO_VERSION = "3.3.3"
"""The Apicurio Registry release the local registries run."""

_MIN_JAVA = 21
_API = "/apis/ccompat/v7"
_JVM_ROOTS = ("/usr/lib/jvm", "/opt", "/Library/Java/JavaVirtualMachines")


def ensure_apicurio_installed(home: Path | None = None) -> Path:
    """The directory holding ``quarkus-run.jar``, installed from Maven Central once."""
    target = (home if home is not None else k2k_home()) / f"apicurio-{APICURIO_VERSION}"
    pom = resources.files("k2k.local").joinpath("apicurio-pom.xml").read_text(encoding="utf-8")
    tarball = f"apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz"

    def unpack(libs: Path) -> None:
        with tarfile.open(libs / tarball) as archive:
            archive.extractall(libs, filter="data")
        (libs / tarball).unlink()

    return maven_install(
        f"Apicurio Registry {APICURIO_VERSION}",
        pom,
        target,
        {"apicurio.version": APICURIO_VERSION},
        tarball,
        prune=unpack,
    )


def _candidates() -> list[str]:
    found = [os.environ.get("K2K_REGISTRY_JAVA", "")]
    if os.environ.get("JAVA_HOME"):
        found.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    found.append(shutil.which("java") or "")
    for root in _JVM_ROOTS:
        base = Path(root)
        if base.is_dir():
            found += [str(p) for p in sorted(base.glob("*/bin/java"), reverse=True)]
            found += [str(p) for p in sorted(base.glob("*/Contents/Home/bin/java"), reverse=True)]
    return [c for c in found if c and Path(c).is_file()]


def find_java21() -> str:
    """A ``java`` of version 21 or newer (Apicurio 3 needs it), searched as the module says.

    :raises LocalClusterError: none found; the message says what to install or set.
    """
    for java in _candidates():
        major = _java_major(_java_banner(java))
        if major is not None and major >= _MIN_JAVA:
            return java
    raise LocalClusterError(
        f"cannot run Apicurio Registry: no Java {_MIN_JAVA}+ found (looked at "
        f"$K2K_REGISTRY_JAVA, $JAVA_HOME, PATH and {', '.join(_JVM_ROOTS)}); install one "
        "(e.g. Temurin 21 or 25) or set K2K_REGISTRY_JAVA to its bin/java"
    )


@dataclass
class LocalRegistry:
    """One running Apicurio Registry; :attr:`url` is its Confluent-compatible API."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    watchdog: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{_API}"

    def is_running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s; the watchdog goes with it."""
        if self.is_running():
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.watchdog is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.watchdog.pid, signal.SIGTERM)
            self.watchdog.wait()
            self.watchdog = None

    def log_tail(self, lines: int = 20) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:])


def start_registry(
    name: str,
    data_dir: Path,
    port: int,
    management_port: int,
    *,
    owner_pid: int | None = None,
    heap: str = "256m",
) -> LocalRegistry:
    """Start one registry (not waiting for it: see :func:`wait_ready`)."""
    app = ensure_apicurio_installed()
    java = find_java21()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / f"{name}.log"
    env = {
        **os.environ,
        "QUARKUS_HTTP_HOST": "127.0.0.1",
        "QUARKUS_HTTP_PORT": str(port),
        "QUARKUS_MANAGEMENT_PORT": str(management_port),
        "QUARKUS_HTTP_ACCESS_LOG_ENABLED": "false",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [java, f"-Xmx{heap}", "-XX:+UseSerialGC", "-jar", str(app / "quarkus-run.jar")],
            cwd=data_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    registry = LocalRegistry(name, port, process, log)
    if owner_pid is not None:
        registry.watchdog = start_watchdog(owner_pid, process.pid)
    return registry


def wait_ready(registry: LocalRegistry, timeout: float = 120.0) -> None:
    """Poll ``GET /subjects`` until it answers 200.

    :raises LocalClusterError: the process died or did not answer in time (with its log).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not registry.is_running():
            raise LocalClusterError(
                f"Apicurio Registry {registry.name} exited: {registry.log_tail()}"
            )
        try:
            with urllib.request.urlopen(registry.url + "/subjects", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)  # polling a starting JVM; there is nothing to wait on instead
    raise LocalClusterError(
        f"Apicurio Registry {registry.name} did not answer within {timeout:.0f} s: "
        f"{registry.log_tail()}"
    )
