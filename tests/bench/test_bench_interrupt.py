"""``bench/run`` ended early (SIGTERM from ``timeout`` or CI) leaves nothing running.

A real, short harness run on its own embedded brokers: the signal arrives while the k2k
contender (a driver, its Spark JVM and Python workers) is running, and afterwards no process
the run started is left, the brokers' ports are free and their data is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from k2k.local import port_is_free
from tests.helpers.kafka import eventually
from tests.helpers.paths import REPO


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _command(p: psutil.Process) -> str:
    """``p``'s command line; "" for a process that ended (a short-lived child may be a
    zombie by the time it is asked)."""
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def _spark_started(pid: int) -> bool:
    """The k2k contender's Spark JVM is up: the run is inside a contender's copy. (The
    brokers start after the contenders' setup, which starts and stops a Spark JVM too.)"""
    commands = list(map(_command, _tree(pid)))
    brokers = sum("kafka.Kafka" in cmd for cmd in commands)
    return brokers == 2 and any("org.apache.spark" in cmd or "pyspark" in cmd for cmd in commands)


def _listening_ports(procs: list[psutil.Process]) -> set[int]:
    ports = set()
    for p in procs:
        try:
            ports |= {
                c.laddr.port for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN
            }
        except psutil.Error:
            continue
    return ports


def _gone(p: psutil.Process) -> bool:
    """Ended (a recycled pid is another process: ``is_running`` compares start times)."""
    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_sigterm_stops_brokers_contenders_and_their_children(tmp_path: Path) -> None:
    harness = subprocess.Popen(
        # A short copy: the signal lands during it, and loading a longer one is wasted time.
        [
            sys.executable,
            "-m",
            "bench.harness",
            "--quick",
            "--only",
            "k2k",
            "--skip-steady",
            "--records",
            "300000",
        ],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # its scratch directory lands here
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # as under `timeout`: the signal goes to the harness alone
    )
    try:
        eventually(lambda: _spark_started(harness.pid), expected=True, timeout=300, interval=0.5)
        started = _tree(harness.pid)
        brokers = [p for p in started if "kafka.Kafka" in _command(p)]
        ports = _listening_ports(brokers)
        assert len(brokers) == 2 and len(ports) >= 4, (
            "two brokers, each a client and controller port"
        )
        harness.send_signal(signal.SIGTERM)
        out, _ = harness.communicate(timeout=180)
    finally:
        if harness.poll() is None:
            os.killpg(harness.pid, signal.SIGKILL)
            harness.wait()
    text = out.decode(errors="replace")
    assert harness.returncode == 128 + signal.SIGTERM, text
    assert "SIGTERM received; stopping what this run started" in text, text
    assert "stopped k2k at-least-once" in text and "stopped the source broker" in text, text
    left = [p for p in started if not _gone(p)]
    assert not left, f"left running: {[(p.pid, p.name()) for p in left]}\n{text}"
    assert all(port_is_free(port) for port in ports), text
    scratch = [d for d in tmp_path.iterdir() if d.name.startswith("k2k-bench-")]
    assert len(scratch) == 1 and not (scratch[0] / "clusters").exists(), text
