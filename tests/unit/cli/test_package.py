"""``k2k package`` and ``python -m k2k``: what goes into the executors' archive, and the
entry points spark-submit and users run (the archive itself is built and used on a real
standalone cluster in tests/integration/test_standalone.py)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import k2k
from k2k.cli.package import SPARK_PROVIDED, runtime_requirements


def test_archive_requirements_are_k2k_s_own_pinned_here_without_spark() -> None:
    """Every runtime dependency at the version installed here; pyspark and py4j come from
    the cluster's Spark instead."""
    pins = dict(r.split("==") for r in runtime_requirements())
    names = {n.lower() for n in pins}
    assert not names & SPARK_PROVIDED
    assert {"confluent-kafka", "pydantic", "pyyaml", "click"} <= names
    for name, version in pins.items():
        assert importlib.metadata.version(name) == version
    assert not any(n in names for n in ("pytest", "ruff", "venv-pack"))  # dev extras


def _k2k(*args: str, entry: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *entry, *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


@pytest.mark.parametrize(
    "entry",
    [["-m", "k2k"], [str(Path(k2k.__file__).parent / "__main__.py")]],
    ids=["python -m k2k", "the file spark-submit runs"],
)
def test_entry_points_run_the_cli(entry: list[str], tmp_path: Path) -> None:
    result = _k2k("--help", entry=entry, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: k2k ")
    assert "package" in result.stdout and "start" in result.stdout


def test_package_refuses_to_overwrite_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "k2k-env.tar.gz").write_text("mine")
    result = _k2k("package", entry=["-m", "k2k"], cwd=tmp_path)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "k2k-env.tar.gz exists" in lines[-1], lines
    assert "Traceback" not in result.stderr
    assert (tmp_path / "k2k-env.tar.gz").read_text() == "mine"


def test_package_with_a_python_that_does_not_exist_fails_in_one_line(tmp_path: Path) -> None:
    result = _k2k(
        "package", "--python", str(tmp_path / "nopython"), entry=["-m", "k2k"], cwd=tmp_path
    )
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: creating the virtualenv failed: ") and "nopython" in last, last
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "k2k-env.tar.gz").exists()
