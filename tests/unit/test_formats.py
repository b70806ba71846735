"""Control-record formats: round trips, canonical keys, loud failures with locators."""

import pytest

from k2k.coordination.formats import ProgressKey, ProgressRecord
from k2k.errors import ControlRecordError


def _rec(**kw):
    base = dict(group="g", topic="orders", partition=3, offset=42, pipeline="p", committed_at_ms=7)
    base.update(kw)
    return ProgressRecord(**base)


def test_progress_record_round_trips():
    rec = _rec(topic="ünïcode.topic", offset=2**40)
    key, value = rec.encode()
    assert ProgressRecord.decode(key, value, "ctl", 0, 9) == rec


def test_progress_key_is_canonical_and_independent_of_value():
    k1, v1 = _rec(offset=1).encode()
    k2, v2 = _rec(offset=2, committed_at_ms=99).encode()
    assert k1 == k2 == b'{"group":"g","k":1,"partition":3,"topic":"orders"}'
    assert v1 != v2


def test_versions_are_declared():
    assert ProgressRecord.VERSION == 1
    assert ProgressKey.VERSION == 1


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        (
            b'{"k":2,"group":"g","topic":"t","partition":0}',
            b'{"v":1}',
            "unknown progress key version 2",
        ),
        (
            b'{"group":"g","k":1,"partition":0,"topic":"t"}',
            b'{"v":9,"offset":1}',
            "unknown progress value version 9",
        ),
        (b"\xff\xfe", b"{}", "key is not JSON"),
        (b'{"group":"g","k":1,"partition":0,"topic":"t"}', None, "value is null"),
        (b'{"group":"g","k":1,"partition":0,"topic":"t"}', b'{"v":1}', "malformed progress value"),
        (b"[1]", b"{}", "key is not a JSON object"),
    ],
)
def test_bad_records_name_topic_partition_offset(key, value, needle):
    with pytest.raises(ControlRecordError) as info:
        ProgressRecord.decode(key, value, "__k2k_consumer-offsets", 4, 1234)
    assert "__k2k_consumer-offsets[4]@1234" in str(info.value)
    assert needle in str(info.value)


def test_repr_is_readable():
    assert repr(_rec()) == "ProgressRecord(g: orders[3] -> next offset 42, by p at 7)"
