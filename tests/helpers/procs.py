"""Running ``k2k start`` as real processes for the crash, takeover and zombie tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import psutil

from tests.helpers.pipelines import K2K


class K2KProcess:
    """One ``k2k start`` in its own session (driver, Spark JVM and Python workers), its
    output in a file (a pipe nobody reads would block a long run)."""

    def __init__(
        self,
        path: Path,
        log: Path,
        *args: str,
        env: dict[str, str] | None = None,
        flag: str = "-f",
    ):
        """``flag``: how ``path`` is given (``--mm2`` for a MirrorMaker 2 file)."""
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            [*K2K, "start", "-v", flag, str(path), *args],
            start_new_session=True,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    def tree(self) -> list[psutil.Process]:
        """The driver and every descendant (JVM, Python workers)."""
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def driver_cpu_s(self) -> float:
        """CPU seconds the driver process (the ``k2k start`` Python process and its
        librdkafka threads, not the JVM or the workers) used so far."""
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)

    def signal_tree(self, sig: int) -> None:
        """``sig`` to the whole process group at once, then to every descendant found (in
        case one left the group), so a freeze or a resume is never partial."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return
        for p in self.tree():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL to the whole process group at once, like a machine dying."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        self._out.close()

    def stop(self, timeout: float = 90) -> int:
        """SIGTERM (clean stop); returns the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            self._out.close()
        return code

    def output(self) -> str:
        return self.log.read_text(errors="replace")
