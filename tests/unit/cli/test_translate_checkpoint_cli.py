"""`k2k offset-mapping translate-checkpoint` refuses what it cannot translate in one line
(exit 2), before it reads any cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli.test_cli import run, with_changes

META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def _checkpoint(root: Path, *sources: str) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "offsets" / "0").write_text("\n".join(["v1", META, *sources]))
    return root


def _translate(tmp_path: Path, checkpoint: Path, *args: str, mapped: bool = True) -> list[str]:
    features = {"offsetMapping": "enabled" if mapped else "disabled"}
    path = with_changes(tmp_path, lambda d: d.update(features=features))
    result = run(
        "offset-mapping", "translate-checkpoint", "-f", str(path), "--spark", str(checkpoint), *args
    )
    assert result.returncode == 2, result
    return result.stderr.strip().splitlines()


def test_a_topic_the_pipeline_does_not_copy(tmp_path: Path) -> None:
    ck = _checkpoint(
        tmp_path / "ck", '{"orders-eu":{"0":4}}', '{"payments":{"0":1},"audit":{"0":2}}'
    )
    assert _translate(tmp_path, ck) == [
        f"error: --spark: {ck}/offsets/0, source 1: topic(s) audit, payments are not "
        "replicated by pipeline 'demo'; expected only topics it copies (its topic selection "
        "and routing)"
    ]


def test_a_query_without_a_kafka_source(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path / "ck", '{"logOffset":3}')
    assert _translate(tmp_path, ck) == [
        f"error: --spark: {ck}/offsets/0 holds no Kafka source's offsets; expected the "
        "checkpoint of a query reading Kafka"
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--to", "{tmp}/ck", "--yes"],
            "error: --to and --yes: both given; expected one (a copy, or in place)",
        ),
        (
            ["--to", "{tmp}/ck"],
            "error: --to: {tmp}/ck exists and is not an empty directory; expected a new one",
        ),
    ],
)
def test_where_to_write(tmp_path: Path, args: list[str], expected: str) -> None:
    ck = _checkpoint(tmp_path / "ck", '{"orders":{"0":4}}')
    argv = [a.format(tmp=tmp_path) for a in args]
    assert _translate(tmp_path, ck, *argv) == [expected.format(tmp=tmp_path)]


def test_a_checkpoint_translated_already(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path / "ck", '{"orders":{"0":4}}')
    (ck / "k2k-translated.json").write_text("{}")
    assert _translate(tmp_path, ck, "--yes") == [
        f"error: --spark: {ck} was translated already ({ck}/k2k-translated.json); its "
        "positions are target positions: expected the query's checkpoint from the source "
        "cluster"
    ]


def test_nothing_to_translate_with_neither_mappings_nor_identical_offsets(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path / "ck", '{"orders":{"0":4}}')
    assert _translate(tmp_path, ck, mapped=False) == [
        "error: features.offsetMapping: disabled, and replication[].sink.offsets is not "
        "identical; expected either (positions translate through offset mappings, or stay as "
        "they are)"
    ]
