"""MM2's heartbeat records: byte layout of MM2's Heartbeat, round trip, refusals."""

from __future__ import annotations

import pytest

from k2k.errors import ControlRecordError
from k2k.formats import Heartbeat

# MM2's layout, field by field: key = STRING sourceClusterAlias, STRING targetClusterAlias
# (int16 length + UTF-8); value = INT16 version 0, INT64 timestamp (big-endian).
KEY = b"\x00\x07us-west" + b"\x00\x07us-east"
VALUE = b"\x00\x00" + (1_700_000_000_123).to_bytes(8, "big")


def test_bytes_are_mm2_s_layout() -> None:
    assert Heartbeat("us-west", "us-east", 1_700_000_000_123).encode() == (KEY, VALUE)
    assert Heartbeat.VERSION == 0


@pytest.mark.parametrize(
    "beat", [Heartbeat("A", "B", 0), Heartbeat("é-ü", "x" * 300, 2**62), Heartbeat("", "B", 5)]
)
def test_round_trips(beat: Heartbeat) -> None:
    assert Heartbeat.decode(*beat.encode(), "heartbeats", 0, 1) == beat


def test_repr_is_readable() -> None:
    assert repr(Heartbeat("A", "B", 42)) == "Heartbeat(A -> B at 42)"


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (KEY, b"\x00\x01" + VALUE[2:], "heartbeat value version 1 is unknown"),
        (KEY, VALUE[:5], "not a heartbeat record"),
        (KEY[:-1], VALUE, "not a heartbeat record"),
        (KEY + b"x", VALUE, "not a heartbeat record (wrong length)"),
        (None, VALUE, "heartbeat key or value is null"),
        (b"\x00\x02\xff\xfe" + KEY[9:], VALUE, "not a heartbeat record"),
    ],
)
def test_bad_records_name_where_they_were_read(key: bytes | None, value: bytes, says: str) -> None:
    with pytest.raises(ControlRecordError) as info:
        Heartbeat.decode(key, value, "A.heartbeats", 0, 9)
    assert str(info.value).startswith(f"A.heartbeats[0]@9: {says}")
