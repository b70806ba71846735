"""Several MM2 flows from one ``k2k start --mm2``: one child ``k2k`` process per flow.

A pipeline owns its process: its Spark driver, its signal handling, its exit code. Rather than
share one Spark session between several planners, the parent starts ``k2k start --mm2 FILE
--mm2-flow A->B`` once per flow, forwards SIGINT/SIGTERM to every child (each stops cleanly
as a single pipeline does), and exits with the worst child's code once all have ended.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Sequence

from k2k.cli.signals import on_stop_signals

__all__ = ["run_flow_processes"]

log = logging.getLogger(__name__)


def run_flow_processes(mm2_file: str, labels: Sequence[str], passthrough: Sequence[str]) -> int:
    """Run one child per flow label until all end; the highest exit code, 0 when all were 0."""
    command = [sys.executable, "-m", "k2k", "start", "--mm2", mm2_file]
    children = {
        label: subprocess.Popen([*command, "--mm2-flow", label, *passthrough]) for label in labels
    }
    started = ", ".join(f"{label} (pid {child.pid})" for label, child in children.items())
    log.info("one process per flow: %s", started)

    def forward(signum: int, _frame: object) -> None:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signum)

    with on_stop_signals(forward):
        # A child killed by a signal reports -N: count it as the shell does (128 + N).
        codes = {label: _shell_code(child.wait()) for label, child in children.items()}
    for label, code in codes.items():
        if code != 0:
            log.error("flow %s exited with code %d", label, code)
    return max(codes.values(), default=0)


def _shell_code(code: int) -> int:
    return 128 - code if code < 0 else code
