"""Small Java programs against MirrorMaker 2's own client library (connect-mirror-client
from Maven Central, the brokers' release), compiled by the tests with the JDK they find."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from k2k.local import KAFKA_VERSION, k2k_home
from k2k.local.install import maven_install


def _jdk_tool(name: str) -> str:
    """``javac``/``java`` of the JDK on JAVA_HOME, else on PATH; skips without a JDK."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"no {name} (a JDK) on JAVA_HOME or PATH")
    return found


def compile_program(out: Path, class_name: str, source: str) -> list[str]:
    """Compile ``source`` (public class ``class_name``) into ``out`` against MM2's client;
    the command that runs it (append its arguments)."""
    pom = (Path(__file__).parent / "mm2client" / "pom.xml").read_text(encoding="utf-8")
    libs = maven_install(
        "MirrorMaker 2's client library",
        pom,
        k2k_home() / f"mm2-client-{KAFKA_VERSION}",
        {"kafka.version": KAFKA_VERSION},
        f"connect-mirror-client-{KAFKA_VERSION}.jar",
    )
    classpath = f"{libs}/*"
    java = out / f"{class_name}.java"
    java.write_text(source, encoding="utf-8")
    subprocess.run(
        [_jdk_tool("javac"), "-cp", classpath, "-d", str(out), str(java)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return [_jdk_tool("java"), "-cp", f"{out}:{classpath}", class_name]


def run_program(command: list[str], *args: str) -> list[str]:
    """Run a compiled program; its output lines (fails the test on a non-zero exit)."""
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()
