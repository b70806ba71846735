"""Command lines for ``k2k local``, shared by the tests that start pairs and those refused
before any broker starts."""

from __future__ import annotations

from pathlib import Path


def local_up_args(data: Path, source_port: int, target_port: int) -> list[str]:
    """``k2k local up`` of a pair on these ports with its data under ``data``."""
    ports = ["--source-port", str(source_port), "--target-port", str(target_port)]
    return ["up", *ports, "--data-dir", str(data)]
