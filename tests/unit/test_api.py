"""The Python API without brokers: its public surface, what importing it costs, loading
and argument checks, the run's lifecycle rules, and the documented example's error path.

Runs against real brokers: tests/integration/test_api.py.
"""

from __future__ import annotations

import copy
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import k2k
from k2k.errors import ConfigError

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "embed.py"

#: Valid, with clusters nobody listens on: any attempt to connect would fail (ClusterError).
GOOD: dict[str, Any] = {
    "name": "api-unit",
    "source": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:1"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:2"}}},
    "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": "source"}}],
}


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


# -- surface and import cost -----------------------------------------------------------------


def test_public_names_are_sorted_and_each_resolves() -> None:
    assert k2k.__all__ == [
        "PipelineConfig",
        "PipelineStats",
        "PipelineStatus",
        "Replicator",
        "VerifyReport",
        "__version__",
        "load_pipeline",
    ]
    api = importlib.import_module("k2k.api")
    assert [n for n in k2k.__all__ if n != "__version__"] == api.__all__
    for name in k2k.__all__:
        assert getattr(k2k, name) is not None
        if name != "__version__":
            assert getattr(k2k, name) is getattr(api, name), name
    assert set(k2k.__all__) <= set(dir(k2k))
    with pytest.raises(AttributeError, match="no attribute 'Replicatr'"):
        _ = k2k.Replicatr  # type: ignore[attr-defined]


def test_import_k2k_loads_nothing_else_and_the_api_no_spark() -> None:
    """The CLI, executors and programs that only import k2k stay quick: no pydantic, no
    pyspark. Using the API loads the config model and clients, still no pyspark."""
    result = _python(
        "import sys, k2k\n"
        "print(sorted(m for m in sys.modules if m.startswith(('k2k.', 'pydantic', 'pyspark', "
        "'py4j', 'confluent_kafka'))))\n"
        "k2k.Replicator\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "[]"]


# -- loading ---------------------------------------------------------------------------------


def test_load_pipeline_from_a_dict_reports_every_problem_by_key_path() -> None:
    bad = copy.deepcopy(GOOD)
    bad["coordination"] = {"commit": {"batchSize": 0, "batchTimout": "1 second"}}
    bad["features"] = {"exactlyOnce": "maybe"}
    with pytest.raises(ConfigError) as caught:
        k2k.load_pipeline(bad, env={})
    problems = caught.value.problems
    assert len(problems) == 3, problems
    assert {p.split(":", 1)[0] for p in problems} == {
        "features.exactlyOnce",
        "coordination.commit.batchSize",
        "coordination.commit.batchTimout",
    }
    assert "did you mean 'batchTimeout'?" in " ".join(problems)
    assert "got 'maybe'" in " ".join(problems)


def test_load_pipeline_merges_a_file_with_a_dict_and_resolves_placeholders(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    cfg = k2k.load_pipeline(
        [path, {"name": "${env:PIPELINE}", "spark": {"master": "local[1]"}}],
        env={"PIPELINE": "from-env"},
    )
    assert isinstance(cfg, k2k.PipelineConfig)
    assert (cfg.name, cfg.spark.master) == ("from-env", "local[1]")
    assert cfg.replication.source.topic == "orders.*"  # from the file


# -- Replicator: arguments and lifecycle -----------------------------------------------------


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ("host a/1", "instance: 'host a/1' is not usable in transactional ids; expected letters"),
        ("k2k-offsets", "instance: 'k2k-offsets' is reserved for k2k offsets"),
    ],
)
def test_unusable_instance_names_are_config_errors(instance: str, expected: str) -> None:
    cfg = k2k.load_pipeline(GOOD, env={})
    with pytest.raises(ConfigError) as caught:
        k2k.Replicator(cfg, instance=instance)
    [problem] = caught.value.problems
    assert problem.startswith(expected), problem


def test_bad_telemetry_environment_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prom")
    cfg = k2k.load_pipeline(GOOD, env={})
    with pytest.raises(ConfigError, match="OTEL_METRICS_EXPORTER: unknown exporter 'prom'"):
        k2k.Replicator(cfg, telemetry=True)
    k2k.Replicator(cfg)  # without telemetry the variables are not read


def test_a_stop_before_the_run_returns_at_once_without_connecting() -> None:
    """Nobody listens at GOOD's clusters: a run that connected would raise ClusterError."""
    cfg = k2k.load_pipeline(GOOD, env={})
    blocking = k2k.Replicator(cfg)
    blocking.stop()
    stats = blocking.run()
    assert (stats.records, stats.leases, stats.committed) == (0, 0, {})
    assert not blocking.running
    with pytest.raises(RuntimeError, match="runs once"):
        blocking.run()
    with pytest.raises(RuntimeError, match="start\\(\\) was not called"):
        blocking.join()

    threaded = k2k.Replicator(cfg)
    threaded.stop()
    threaded.start()
    assert threaded.join(timeout=30).records == 0
    with pytest.raises(RuntimeError, match="runs once"):
        threaded.start()


def test_join_hands_the_runs_error_to_the_caller() -> None:
    """A run in a thread that fails (nobody listens at the source) raises in join()."""
    doc = copy.deepcopy(GOOD)
    doc["source"]["connectTimeout"] = "2 seconds"
    replicator = k2k.Replicator(k2k.load_pipeline(doc, env={}))
    replicator.start()
    with pytest.raises(k2k.errors.ClusterError, match="source"):
        replicator.join(timeout=60)
    assert not replicator.running


# -- the documented example ------------------------------------------------------------------


def test_docs_show_the_tested_example_verbatim() -> None:
    """docs/api.md shows examples/embed.py, which tests/integration/test_api.py runs."""
    doc = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    assert EXAMPLE.read_text(encoding="utf-8") in blocks


def test_example_reports_an_unresolved_placeholder_by_key_path() -> None:
    """Validation fails before anything connects: exit 2, one line per problem."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("K2K_")}
    env["K2K_SOURCE_BOOTSTRAP"] = "127.0.0.1:1"
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "api-unit", "orders"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    problems = [ln for ln in result.stderr.splitlines() if ln.startswith("config: ")]
    assert problems == [
        "config: target.kafka.common.bootstrap.servers: environment variable "
        "'K2K_TARGET_BOOTSTRAP' is not set, got '${env:K2K_TARGET_BOOTSTRAP}'; expected the "
        "environment variable to be set where k2k runs"
    ], result.stderr
    assert "Traceback" not in result.stderr
