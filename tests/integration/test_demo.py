"""The demo's replication path ends cleanly: ``scripts/demo.py`` against the test clusters
(as ``scripts/demo`` runs it, with fewer records), then ``k2k verify`` of its pipeline, with
no traceback in anything either prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.pipelines import k2k_cli

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "demo-pipeline.yaml"


def test_demo_ends_without_a_traceback(clusters) -> None:
    env = {**os.environ, "K2K_DEMO_SOURCE": clusters.source, "K2K_DEMO_TARGET": clusters.target}
    demo = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--records", "4000"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr
    assert "replication finished" in demo.stdout
    assert "4,000 records" in demo.stdout
    assert "NO " not in demo.stdout  # every topic's per-partition counts equal
    assert "Traceback" not in demo.stdout + demo.stderr

    verify = k2k_cli("verify", "-f", str(PIPELINE), env=env)
    assert verify.returncode == 0, verify.stderr
    assert "Traceback" not in verify.stdout + verify.stderr
