"""MM2's checkpoint records: byte layout of MM2's Checkpoint, round trip, refusals."""

from __future__ import annotations

import pytest

from k2k.errors import ControlRecordError
from k2k.formats import Checkpoint

# MM2's layout, field by field: key = STRING group, STRING topic (int16 length + UTF-8),
# INT32 partition; value = INT16 version 0, INT64 upstreamOffset, INT64 offset, STRING
# metadata (all big-endian).
KEY = b"\x00\x06orders" + b"\x00\x08A.orders" + (7).to_bytes(4, "big")
VALUE = (
    b"\x00\x00"
    + (1_234_567_890_123).to_bytes(8, "big")
    + (1_234_567_890_100).to_bytes(8, "big")
    + b"\x00\x04meta"
)
CHECKPOINT = Checkpoint("orders", "A.orders", 7, 1_234_567_890_123, 1_234_567_890_100, "meta")


def test_bytes_are_mm2_s_layout() -> None:
    assert CHECKPOINT.encode() == (KEY, VALUE)
    assert Checkpoint.VERSION == 0


def test_bytes_are_read_back() -> None:
    assert Checkpoint.decode(KEY, VALUE, "A.checkpoints.internal", 0, 1) == CHECKPOINT


def test_worked_example_of_the_mm2_reference() -> None:
    key, value = Checkpoint("grp", "A.orders", 3, 1200, 1151).encode()
    assert key.hex() == "00036772700008412e6f726465727300000003"
    assert value.hex() == "000000000000000004b0000000000000047f0000"


@pytest.mark.parametrize(
    "checkpoint",
    [
        Checkpoint("g", "t", 0, 0, 0),
        Checkpoint("é-ü", "x" * 249, 2**31 - 1, 2**63 - 1, 0, 'k2k_{"v":1}'),
        Checkpoint("", "B_orders", 5, 10, 9, "m" * 32767),
    ],
)
def test_round_trips(checkpoint: Checkpoint) -> None:
    assert Checkpoint.decode(*checkpoint.encode(), "A.checkpoints.internal", 0, 1) == checkpoint


def test_repr_is_readable() -> None:
    assert repr(Checkpoint("g", "A.t", 2, 10, 8)) == "Checkpoint(g A.t[2]: 10 -> 8)"


def test_metadata_too_long_for_mm2_is_refused() -> None:
    with pytest.raises(ValueError, match="32768 bytes do not fit"):
        Checkpoint("g", "t", 0, 0, 0, "m" * 32768).encode()


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (KEY, b"\x00\x01" + VALUE[2:], "checkpoint value version 1 is unknown"),
        (KEY, VALUE[:10], "not a checkpoint record"),
        (KEY, VALUE[:-1], "not a checkpoint record"),
        (KEY, VALUE + b"x", "not a checkpoint record (wrong length)"),
        (KEY[:-1], VALUE, "not a checkpoint record"),
        (KEY + b"x", VALUE, "not a checkpoint record"),
        (None, VALUE, "checkpoint key or value is null"),
        (KEY, None, "checkpoint key or value is null"),
        (b"\x00\x02\xff\xfe" + KEY[8:], VALUE, "not a checkpoint record"),
    ],
)
def test_bad_records_name_where_they_were_read(
    key: bytes | None, value: bytes | None, says: str
) -> None:
    with pytest.raises(ControlRecordError) as info:
        Checkpoint.decode(key, value, "A.checkpoints.internal", 0, 9)
    assert str(info.value).startswith(f"A.checkpoints.internal[0]@9: {says}")
