"""The Python daemon k2k chooses for local masters (k2k.pipeline.spark._local_daemon)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from k2k.pipeline import spark

DAEMON = "k2k.pipeline.daemon"


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
        "import sys, k2k.pipeline.daemon as d, pyspark.daemon as p; "
        "print(d.manager is p.manager, 'k2k.pipeline.runner' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]
