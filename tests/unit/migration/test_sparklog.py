"""The Structured Streaming offset log as ``translate-checkpoint`` reads and writes it: which
batches a restarted query reads, the Kafka lines among a query's sources, and files written
back with the checksum Hadoop's local file system verifies."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from k2k.errors import ConfigError
from k2k.migration.sparklog import files_to_translate, write_with_checksum

META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def _batch(root: Path, batch: int, *sources: str, committed: bool = True) -> None:
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(exist_ok=True)
    (root / "offsets" / str(batch)).write_text("\n".join(["v1", META, *sources]))
    if committed:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_committed_newest_batch_is_the_only_one_a_restart_reads(tmp_path: Path) -> None:
    _batch(tmp_path, 0, '{"t":{"0":1}}')
    _batch(tmp_path, 1, '{"t":{"0":5}}')
    (tmp_path / "offsets" / ".1.crc").write_bytes(b"ignored")
    assert [f.batch for f in files_to_translate(tmp_path)] == [1]


def test_an_uncommitted_newest_batch_is_read_with_the_one_before(tmp_path: Path) -> None:
    _batch(tmp_path, 3, '{"t":{"0":5}}')
    _batch(tmp_path, 4, '{"t":{"0":9}}', committed=False)
    files = files_to_translate(tmp_path)
    assert [(f.batch, f.kafka()) for f in files] == [
        (3, {0: {("t", 0): 5}}),
        (4, {0: {("t", 0): 9}}),
    ]


def test_only_kafka_lines_change_and_the_rest_is_kept_as_written(tmp_path: Path) -> None:
    _batch(tmp_path, 0, '{"logOffset":3}', '{"orders":{"1":7,"0":5}}', "-")
    (f,) = files_to_translate(tmp_path)
    assert f.kafka() == {1: {("orders", 0): 5, ("orders", 1): 7}}
    text = f.text({1: {("dr.orders", 0): 4, ("dr.orders", 1): 7}})
    assert text.splitlines() == ["v1", META, '{"logOffset":3}', '{"dr.orders":{"0":4,"1":7}}', "-"]


def test_a_rewritten_file_gets_the_checksum_hadoop_verifies(tmp_path: Path) -> None:
    path = tmp_path / "7"
    text = "v1\n" + "x" * 1100  # three 512-byte chunks
    write_with_checksum(path, text)
    assert path.read_text() == text
    crc = (tmp_path / ".7.crc").read_bytes()
    data = text.encode()
    chunks = [data[i : i + 512] for i in range(0, len(data), 512)]
    assert crc[:8] == b"crc\x00\x00\x00\x02\x00"
    assert crc[8:] == b"".join(zlib.crc32(c).to_bytes(4, "big") for c in chunks)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".7.crc", "7"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "has no batch in offsets/"),
        ("v2\n{}\n{}", "starts with 'v2'; expected a Structured Streaming offset log file"),
        ("", "0: is empty; expected a Structured Streaming"),
    ],
)
def test_what_is_not_an_offset_log_gets_one_line(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    if content is not None:
        (tmp_path / "offsets").mkdir()
        (tmp_path / "offsets" / "0").write_text(content)
    with pytest.raises(ConfigError) as err:
        files_to_translate(tmp_path)
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("--spark: ")
