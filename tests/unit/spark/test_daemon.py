"""The Python daemon k2k chooses for local masters (k2k.spark.session._local_daemon)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from k2k.spark import session as spark

DAEMON = "k2k.spark.daemon"


@pytest.fixture
def executor_python(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    return monkeypatch


@pytest.mark.parametrize("master", ["local[2]", "local[*]", "local[2,3]", "local"])
def test_a_local_master_running_this_python_gets_k2k_s_daemon(executor_python, master):
    settings = {"spark.master": master}
    spark._local_daemon(settings)
    assert settings[spark.DAEMON_MODULE_KEY] == DAEMON


def test_the_user_s_daemon_module_wins(executor_python):
    settings = {"spark.master": "local[2]", spark.DAEMON_MODULE_KEY: "my.daemon"}
    spark._local_daemon(settings)
    assert settings[spark.DAEMON_MODULE_KEY] == "my.daemon"


@pytest.mark.parametrize("master", ["spark://h:7077", "yarn", "local-cluster[2,1,512]", ""])
def test_other_masters_keep_spark_s_daemon(executor_python, master):
    settings = {"spark.master": master}
    spark._local_daemon(settings)
    assert spark.DAEMON_MODULE_KEY not in settings


def test_another_executor_python_keeps_spark_s_daemon(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/python3")
    settings = {"spark.master": "local[2]"}
    spark._local_daemon(settings)
    assert spark.DAEMON_MODULE_KEY not in settings


def test_the_daemon_module_loads_the_runner_and_runs_pyspark_s_manager():
    code = (
        "import sys, k2k.spark.daemon as d, pyspark.daemon as p; "
        "print(d.manager is p.manager, 'k2k.pipeline.task.runner' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_a_k2k_a_new_process_would_not_find_keeps_spark_s_daemon(executor_python):
    # As for a program that put k2k on sys.path itself: the daemon could not import it.
    executor_python.setattr(spark, "_new_process_finds_k2k", lambda: False)
    settings = {"spark.master": "local[2]"}
    spark._local_daemon(settings)
    assert spark.DAEMON_MODULE_KEY not in settings


def test_a_new_process_of_this_interpreter_finds_this_k2k(monkeypatch):
    assert spark._new_process_finds_k2k()
    # Another interpreter, one without this k2k (the machine's own python3, if it has none):
    other = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    probe = [other, "-c", "import k2k"] if other else None
    if probe is None or subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        pytest.skip("no interpreter without k2k here")
    monkeypatch.setattr(spark.sys, "executable", other)
    assert not spark._new_process_finds_k2k()


def test_the_daemon_imports_the_installed_pyspark_instead_of_spark_s_zips():
    # Spark's workers get $SPARK_HOME/python/lib/{pyspark,py4j-*}.zip first on PYTHONPATH.
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(p) for p in lib.glob("*.zip"))
    if len(zips) != 2:
        pytest.skip(f"this pyspark has no zips for its workers in {lib}")
    code = (
        "import sys, k2k.spark.daemon, pyspark, py4j; "
        "print(pyspark.__file__, py4j.__file__, any(p.endswith('.zip') and 'pyspark' in p "
        "for p in sys.path))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(zips)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    pyspark_file, py4j_file, zips_left = out.stdout.split()
    assert pyspark_file == pyspark.__file__
    assert ".zip" not in py4j_file
    assert zips_left == "False"
