"""A Spark Structured Streaming query moves from the source to the target with its
checkpoint (``k2k offset-mapping translate-checkpoint``): a real query reads the source with
a checkpoint and stops; k2k copies with identical offsets and routes topics under a prefix;
the translated checkpoint makes the same query, started against the target, read exactly
the records it had not read: none twice, none skipped. One topic keeps identical offsets;
the other had a source transaction before the query stopped, so its position goes through
offset mappings (``onOffsetGap: map``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kafka import create_topic, produce, produce_transaction, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: The Kafka connector release the query runs with: pyspark 4.3.0's own is not on Maven
#: Central, and 4.2.0's reads and writes the same checkpoint (docs/dependencies.md).
CONNECTOR = "4.2.0"
PREFIX = "dr."
#: Records per topic before the query stops, and after (the ones it must read on the target).
BEFORE, AFTER = 300, 200


@pytest.fixture(scope="module")
def connector_jars() -> str:
    from bench.spark_sss import ensure_spark_kafka_installed

    return ",".join(str(j) for j in ensure_spark_kafka_installed(version=CONNECTOR))


def _query(bootstrap: str, topics: list[str], checkpoint: Path, out: Path, jars: str) -> None:
    """The query, run until it has read what is there now (``availableNow``)."""
    argv = [sys.executable, "-m", "tests.helpers.sss_reader", "--bootstrap", bootstrap]
    argv += ["--topics", ",".join(topics), "--checkpoint", str(checkpoint)]
    argv += ["--out", str(out), "--jars", jars]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def _read(out: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    lines = out.read_text().splitlines() if out.exists() else []
    for row in map(json.loads, lines):
        rows.setdefault((row["topic"], row["partition"]), []).append(row)
    return {tp: sorted(r, key=lambda row: row["offset"]) for tp, r in rows.items()}


def _records(first: int, count: int, partitions: int) -> list[tuple]:
    return [
        (i % partitions, b"k%d" % i, b"v%d" % i, [], BASE_TS + i)
        for i in range(first, first + count)
    ]


def test_a_structured_streaming_query_moves_to_the_target_with_its_translated_checkpoint(
    clusters, tmp_path, topic_name, connector_jars
):
    dense, gappy = topic_name("ssdense"), topic_name("ssgap")
    create_topic(clusters.source, dense, 2)
    create_topic(clusters.source, gappy, 1)
    produce(clusters.source, dense, _records(0, BEFORE, 2))
    produce(clusters.source, gappy, _records(0, BEFORE // 2, 1))
    # A transaction: its commit marker takes a source offset, so identity ends there.
    produce_transaction(clusters.source, gappy, _records(BEFORE // 2, 10, 1))
    produce(clusters.source, gappy, _records(BEFORE // 2 + 10, BEFORE // 2 - 10, 1))

    checkpoint, on_source = tmp_path / "checkpoint", tmp_path / "on-source.jsonl"
    _query(clusters.source, [dense, gappy], checkpoint, on_source, connector_jars)
    read_before = _read(on_source)
    assert sum(len(r) for r in read_before.values()) == 2 * BEFORE

    produce(clusters.source, dense, _records(BEFORE, AFTER, 2))
    produce(clusters.source, gappy, _records(BEFORE, AFTER, 1))
    name = topic_name("pss")
    doc = pipeline_dict(
        clusters,
        name,
        [dense, gappy],
        features={"offsetMapping": "enabled"},
        offsetMapping={"topic": f"__k2k_offset_mappings-{name}"},
        errorHandling={"onOffsetGap": "map"},
    )
    doc["replication"][1]["sink"]["offsets"] = "identical"
    doc["replication"][1]["sink"]["topic"] = {"prefix": PREFIX}
    path = write_pipeline(tmp_path, doc)
    copied = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert copied.returncode == 0, copied.stderr

    moved = tmp_path / "checkpoint-on-target"
    dry = k2k_cli(
        "offset-mapping", "translate-checkpoint", "-f", str(path), "--spark", str(checkpoint)
    )
    assert dry.returncode == 0, dry.stderr
    assert "nothing written" in dry.stdout and not moved.exists()
    done = k2k_cli(
        "offset-mapping",
        "translate-checkpoint",
        "-f",
        str(path),
        "--spark",
        str(checkpoint),
        "--to",
        str(moved),
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"{dense}[0] at {BEFORE // 2} -> {PREFIX}{dense}[0] at {BEFORE // 2} (identical)"
        in done.stdout
    )
    # Past the commit marker: one offset lower on the target (the marker is not copied).
    assert f"{gappy}[0] at {BEFORE + 1} -> {PREFIX}{gappy}[0] at {BEFORE} (mapped)" in done.stdout

    on_target = tmp_path / "on-target.jsonl"
    _query(clusters.target, [PREFIX + dense, PREFIX + gappy], moved, on_target, connector_jars)
    read_after = _read(on_target)
    source = read_all(clusters.source, dense)
    expected = {
        (PREFIX + dense, p): [(r.key, r.value) for r in recs if int(r.value[1:]) >= BEFORE]
        for p, recs in source.items()
    }
    expected[(PREFIX + gappy, 0)] = [
        (r.key, r.value) for r in read_all(clusters.source, gappy)[0] if int(r.value[1:]) >= BEFORE
    ]
    got = {
        tp: [(r["key"].encode(), r["value"].encode()) for r in rows]
        for tp, rows in read_after.items()
    }
    assert got == expected
    # Identical partitions: the query read the same offsets the source holds them at.
    for p, recs in source.items():
        after = [r.offset for r in recs if int(r.value[1:]) >= BEFORE]
        assert [r["offset"] for r in read_after[(PREFIX + dense, p)]] == after
    # In place (--yes) writes the same files, and keeps the ones it replaced.
    in_place = tmp_path / "checkpoint-in-place"
    shutil.copytree(checkpoint, in_place)
    done = k2k_cli(
        "offset-mapping", "translate-checkpoint", "-f", str(path), "--spark", str(in_place), "--yes"
    )
    assert done.returncode == 0, done.stderr
    for f in (checkpoint / "offsets").iterdir():
        assert (in_place / "offsets" / f.name).read_bytes() == (
            moved / "offsets" / f.name
        ).read_bytes()
        if not f.name.startswith("."):
            kept = in_place / "k2k-original-offsets" / f.name
            assert kept.read_bytes() == f.read_bytes()
    # The translated checkpoints cannot be translated again.
    again = k2k_cli(
        "offset-mapping", "translate-checkpoint", "-f", str(path), "--spark", str(moved), "--yes"
    )
    assert again.returncode != 0 and "translated already" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def _checkpoint_at(root: Path, positions: dict[str, dict[str, int]]) -> Path:
    """A checkpoint whose one committed batch stands at ``positions`` (as a query's would)."""
    for part in ("offsets", "commits"):
        (root / part).mkdir(parents=True)
    (root / "offsets" / "0").write_text(f"v1\n{META}\n{json.dumps(positions)}")
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_an_identical_position_the_target_does_not_hold_yet_is_a_warning(
    clusters, tmp_path, topic_name
):
    t = topic_name("ssahead")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, _records(0, 50, 1))
    doc = pipeline_dict(clusters, topic_name("pssahead"), [t])
    doc["replication"][1]["sink"]["offsets"] = "identical"
    path = write_pipeline(tmp_path, doc)
    assert k2k_cli("start", "--until-caught-up", "-f", str(path)).returncode == 0
    ck = _checkpoint_at(tmp_path / "ck", {t: {"0": 70}})  # the query read 20 more
    done = k2k_cli("offset-mapping", "translate-checkpoint", "-f", str(path), "--spark", str(ck))
    assert done.returncode == 0, done.stderr
    assert f"batch 0: {t}[0] at 70 -> {t}[0] at 70 (identical)" in done.stdout
    assert f"warning: {t}[0] is at 70 but the target ends at 50" in done.stdout


def test_a_partition_spread_over_several_target_partitions_is_refused(
    clusters, tmp_path, topic_name
):
    t = topic_name("sshash")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, _records(0, 40, 1))
    name = topic_name("psshash")
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        features={"offsetMapping": "enabled"},
        offsetMapping={"topic": f"__k2k_offset_mappings-{name}"},
    )
    create_topic(clusters.target, PREFIX + t, 4)  # keys hashed over 4 target partitions
    doc["replication"][1]["sink"]["partition"] = "hash"
    doc["replication"][1]["sink"]["topic"] = {"prefix": PREFIX}
    path = write_pipeline(tmp_path, doc)
    assert k2k_cli("start", "--until-caught-up", "-f", str(path)).returncode == 0
    ck = _checkpoint_at(tmp_path / "ck", {t: {"0": 20}})
    done = k2k_cli("offset-mapping", "translate-checkpoint", "-f", str(path), "--spark", str(ck))
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: --spark: {ck}/offsets/0, source 0: {t}[0]: its records went ")
    assert line.endswith("so one position cannot be translated; expected partition: source routing")
