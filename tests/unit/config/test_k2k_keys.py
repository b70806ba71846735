"""Every key of Lenses K2K's reference pipeline and Offset Mapping files has the outcome
docs/config.md gives it (k2k.config.k2k_keys): read, accepted with a warning, or refused."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from k2k.config.k2k_keys import APP, PIPELINE, READ, REFUSED, WARNED
from k2k.config.loader import build_offset_mapping_app, build_pipeline
from k2k.errors import ConfigError

DATA = Path(__file__).parent / "data"


def leaves(node: Any, path: str = "") -> Iterator[str]:
    """The key paths of a YAML tree down to its scalars and empty sections."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list) and node and all(isinstance(x, dict) for x in node):
        for index, item in enumerate(node):
            yield from leaves(item, f"{path}[{index}]")
    else:
        yield path


def _drop(node: Any, path: str) -> None:
    """Remove the leaf at ``path`` (plain dotted keys only)."""
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    del node[last]


def outcomes(data: dict[str, Any], build: Callable[[dict[str, Any]], Any]) -> dict[str, str]:
    """Each leaf key's outcome when ``data`` is loaded."""
    keys = list(leaves(data))
    try:
        build(data)
        refused: list[str] = []
    except ConfigError as exc:
        refused = [k for k in keys if any(p.startswith(f"{k}:") for p in exc.problems)]
        assert len(refused) == len(exc.problems), exc.problems
        for key in refused:
            _drop(data, key)
    inert = [path for path, _ in build(data).inert_keys()]
    return {
        k: REFUSED
        if k in refused
        else WARNED
        if any(k == p or k.startswith(p + ".") for p in inert)
        else READ
        for k in keys
    }


@pytest.mark.parametrize(
    ("file", "table", "build"),
    [
        ("k2k_reference.yaml", PIPELINE, lambda d: build_pipeline(d, {})),
        ("k2k_app_reference.yaml", APP, lambda d: build_offset_mapping_app(d, {})),
    ],
    ids=["pipeline", "offset-mapping-app"],
)
def test_each_key_of_k2ks_reference_files_has_its_documented_outcome(
    file: str, table: dict[str, tuple[str, str]], build: Callable[[dict[str, Any]], Any]
) -> None:
    data = yaml.safe_load((DATA / file).read_text())
    found = outcomes(data, build)
    assert set(found) == set(table), "keys missing from or extra in k2k.config.k2k_keys"
    assert found == {key: outcome for key, (outcome, _) in table.items()}


def test_group_settings_in_any_client_map_are_named_in_a_warning() -> None:
    data = yaml.safe_load((DATA / "k2k_reference.yaml").read_text())
    data["metrics"]["kafka"]["topic"] = "__k2k_metrics"
    data["target"]["kafka"]["consumer"] = {"partition.assignment.strategy": "range"}
    data["coordination"]["kafka"]["consumer"] = {"session.timeout.ms": "10000"}
    inert = dict(build_pipeline(data, {}).inert_keys())
    assert "target.kafka.consumer.partition.assignment.strategy" in inert
    why = inert["coordination.kafka.consumer.session.timeout.ms"]
    assert "assigns partitions to its consumers itself" in why
    assert "source.kafka.consumer.group.id" not in inert  # it names the group of the ACLs


def test_validate_prints_one_warning_per_inert_key(tmp_path: Path) -> None:
    data = yaml.safe_load((DATA / "k2k_reference.yaml").read_text())
    data["metrics"]["kafka"]["topic"] = "__k2k_metrics"
    path = tmp_path / "k2k.yaml"
    path.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [sys.executable, "-m", "k2k", "validate", "-f", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: license: accepted, no effect: k2k is open software and no feature is gated",
        "warning: features.optimizeOffsetCommitPartition: accepted, no effect: k2k places "
        "progress records by their key (docs/operations.md#commit-topic-partitions)",
    ]


def test_client_prefixes_of_the_replicator_are_read_without_a_warning() -> None:
    data = yaml.safe_load((DATA / "k2k_reference.yaml").read_text())
    data["metrics"]["kafka"]["topic"] = "__k2k_metrics"
    data["metrics"]["prefix"] = {"sourceConsumer": "src.c.", "targetProducer": "tgt.p."}
    cfg = build_pipeline(data, {})
    assert (cfg.metrics.prefix.source_consumer, cfg.metrics.prefix.target_producer) == (
        "src.c.",
        "tgt.p.",
    )
    assert not [path for path, _ in cfg.inert_keys() if path.startswith("metrics")]
