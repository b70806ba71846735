"""The distribution as users get it: ``python -m build`` on the tracked files (what a clone
holds) makes an sdist and a wheel, and the wheel installs into a clean virtualenv (no
project path on it) where ``k2k`` runs. Needs the package index, like ``scripts/setup``."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO


def _run(args: list[str | Path], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the tracked files, so the build writes nothing into this tree
    (its egg-info would be a second ``k2k`` distribution next to the editable one)."""
    tmp = tmp_path_factory.mktemp("dist")
    tracked = _run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    tree = tmp / "tree"
    for name in filter(None, tracked):
        if (REPO / name).is_file():  # a file deleted but not yet committed is skipped
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes((REPO / name).read_bytes())
    _run([sys.executable, "-m", "build", "--outdir", tmp / "dist", tree])
    (found,) = (tmp / "dist").glob("k2k-*-py3-none-any.whl")
    return found


def test_wheel_carries_license_ranges_typing_marker_and_package_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(info).decode()
    assert {"k2k/py.typed", "k2k/local/pom.xml", "k2k/spark/log4j2.properties"} <= names
    static = "k2k/observability/http/static/"
    assert {static + f for f in ("index.html", "status.js", "uPlot.iife.min.js")} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert "Requires-Dist: pyspark<5,>=4.0" in requires
    pinned = [r for r in requires if "==" in r.split(";")[0]]
    assert not pinned, "exact pins belong in constraints.txt"


def test_wheel_installs_into_a_clean_venv_and_runs(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])
    python = venv / "bin" / "python"
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "-c", REPO / "constraints.txt", wheel])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"K2K_DEMO_SOURCE": "127.0.0.1:1", "K2K_DEMO_TARGET": "127.0.0.1:2"}

    where = _run(
        [python, "-c", "import k2k, pyspark, confluent_kafka; print(k2k.__file__)"],
        cwd=tmp_path,
        env=env,
    ).stdout.strip()
    assert Path(where).is_relative_to(venv), where
    for entry in ([venv / "bin" / "k2k"], [python, "-m", "k2k"]):
        helped = _run([*entry, "--help"], cwd=tmp_path, env=env).stdout
        assert helped.startswith("Usage: k2k ") and "start" in helped
    # The runtime dependencies are there: the config model loads and checks a pipeline.
    checked = _run(
        [venv / "bin" / "k2k", "validate", "-f", REPO / "examples" / "demo-pipeline.yaml"],
        cwd=tmp_path,
        env=env,
    ).stdout
    assert "name: demo-dr" in checked and "127.0.0.1:1" in checked
