"""Control-record formats: round trips, canonical keys, loud failures with locators."""

import json
import logging
import re
import subprocess
import sys

import pytest
from confluent_kafka import Message

from k2k.errors import ControlRecordError
from k2k.formats import (
    CutoverRecord,
    MemberRecord,
    OwnerRecord,
    ProgressKey,
    ProgressRecord,
    ReleaseRecord,
    decode_assignment,
    dumps_canonical,
    read_assignment,
)
from k2k.formats.assignment import KEY_VERSION
from k2k.formats.codec import key_family
from k2k.formats.offset_mapping import OffsetMappingRecord, RunEncoder
from tests.helpers.paths import REPO


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


# --- golden bytes: today's encodings, pinned ----------------------------------------------------
#
# Compaction compares key bytes and other tools parse the values, so a refactoring must not
# change a single byte. These literals were produced by the encoders before the formats were
# split into submodules; change them only together with a new VERSION.

_SESSION = "1700000000000-1a2b3c4d"

GOLDEN = [
    (
        ProgressRecord("orders-dr", "orders", 3, 42, "orders-dr", 1700000000000),
        b'{"group":"orders-dr","k":1,"partition":3,"topic":"orders"}',
        b'{"committedAt":1700000000000,"offset":42,"pipeline":"orders-dr","v":1}',
    ),
    (
        ProgressRecord("orders-dr", "orders", 3, 42, "orders-dr", 1700000000000, owner="host-a"),
        b'{"group":"orders-dr","k":1,"partition":3,"topic":"orders"}',
        b'{"committedAt":1700000000000,"offset":42,"owner":"host-a","pipeline":"orders-dr","v":1}',
    ),
    (
        ProgressRecord("g", "ünïcode.topic", 0, 2**40, "p", 7, owner="hôst"),
        b'{"group":"g","k":1,"partition":0,"topic":"\xc3\xbcn\xc3\xafcode.topic"}',
        b'{"committedAt":7,"offset":1099511627776,"owner":"h\xc3\xb4st","pipeline":"p","v":1}',
    ),
    (
        MemberRecord("orders-dr", "host-a", _SESSION, "alive", False, "host-a", 1700000001000),
        b'{"group":"orders-dr","k":1,"kind":"member","member":"host-a"}',
        b'{"at":1700000001000,"host":"host-a","session":"1700000000000-1a2b3c4d",'
        b'"standby":false,"state":"alive","v":1}',
    ),
    (
        MemberRecord("orders-dr", "host-b", _SESSION, "left", True, "hôst", 1700000001000),
        b'{"group":"orders-dr","k":1,"kind":"member","member":"host-b"}',
        b'{"at":1700000001000,"host":"h\xc3\xb4st","session":"1700000000000-1a2b3c4d",'
        b'"standby":true,"state":"left","v":1}',
    ),
    (
        OwnerRecord(
            "orders-dr",
            "orders",
            3,
            "host-a",
            _SESSION,
            "k2k-orders-dr-host-a-0",
            f"{_SESSION}/7",
            1700000001500,
        ),
        b'{"group":"orders-dr","k":1,"kind":"owner","partition":3,"topic":"orders"}',
        b'{"at":1700000001500,"claim":"1700000000000-1a2b3c4d/7","member":"host-a",'
        b'"session":"1700000000000-1a2b3c4d","transactionalId":"k2k-orders-dr-host-a-0","v":1}',
    ),
    (
        OwnerRecord("orders-dr", "orders", 3, "host-a", _SESSION, "", f"{_SESSION}/8", 17),
        b'{"group":"orders-dr","k":1,"kind":"owner","partition":3,"topic":"orders"}',
        b'{"at":17,"claim":"1700000000000-1a2b3c4d/8","member":"host-a",'
        b'"session":"1700000000000-1a2b3c4d","transactionalId":"","v":1}',
    ),
    (
        CutoverRecord(
            "orders-dr",
            "orders-dr",
            ("cut",),
            {("orders", 0): 42},
            {},
            (),
            (),
            1700000000000,
            1700000001000,
            "host-a",
        ),
        b'{"group":"orders-dr","k":1,"kind":"cutover"}',
        b'{"counts":[],"cut":[["orders",0,42]],"host":"host-a","mode":"cutover",'
        b'"pipeline":"orders-dr","positions":[],"recovery":[],"startedAt":1700000000000,'
        b'"steps":["cut"],"targetEnds":[],"updatedAt":1700000001000,"v":1}',
    ),
    (
        ReleaseRecord("orders-dr", "orders", 3, f"{_SESSION}/7", 1700000300000),
        b'{"group":"orders-dr","k":1,"kind":"release","partition":3,"topic":"orders"}',
        b'{"at":1700000300000,"claim":"1700000000000-1a2b3c4d/7","v":1}',
    ),
]


@pytest.mark.parametrize(("rec", "key", "value"), GOLDEN, ids=lambda x: type(x).__name__)
def test_encodings_are_byte_for_byte_unchanged(rec, key, value):
    assert rec.encode() == (key, value)


def test_key_helpers_match_the_encoded_keys():
    assert OwnerRecord.key_bytes("orders-dr", "orders", 3) == GOLDEN[5][1]
    assert ProgressKey("orders-dr", "orders", 3).encode() == GOLDEN[0][1]
    assert GOLDEN[1][0].encode_value() == GOLDEN[1][2]


# --- every record type: round trips, versions, loud failures ------------------------------------

ASSIGNMENT = [g[0] for g in GOLDEN if not isinstance(g[0], ProgressRecord)]


@pytest.mark.parametrize("rec", [g[0] for g in GOLDEN], ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_its_own_class(rec):
    key, value = rec.encode()
    if isinstance(rec, ProgressRecord):
        assert ProgressRecord.decode(key, value, "ctl", 1, 2) == rec
        assert ProgressKey.decode(key, "ctl[1]@2") == rec.key
    else:
        assert type(rec).decode(key, value, "ctl[1]@2") == rec


@pytest.mark.parametrize("rec", ASSIGNMENT, ids=lambda r: type(r).__name__)
def test_decode_assignment_dispatches_on_the_key_kind(rec):
    key, value = rec.encode()
    assert decode_assignment(key, value, "ctl[1]@2") == (rec.group, rec)
    assert decode_assignment(key, None, "ctl[1]@2") == (rec.group, None)  # tombstone


def test_a_shared_topic_s_readers_skip_the_other_family():
    """Commit and assignment records may share one topic: each reader recognises the
    other family's keys and skips them instead of calling them unreadable."""
    progress = [g[0] for g in GOLDEN if isinstance(g[0], ProgressRecord)]
    assert progress and ASSIGNMENT
    for rec in ASSIGNMENT:
        key, value = rec.encode()
        assert key_family(json.loads(key)) == "assignment"
        assert ProgressKey.decode_shared(key, "ctl[0]@1") is None
        with pytest.raises(ControlRecordError, match=r"ctl\[0\]@1: an assignment record's key"):
            ProgressKey.decode(key, "ctl[0]@1")
    for prec in progress:
        key, value = prec.encode()
        assert key_family(json.loads(key)) == "progress"
        assert ProgressKey.decode_shared(key, "ctl[0]@1") == prec.key
        assert decode_assignment(key, value, "ctl[0]@1") is None
        assert decode_assignment(key, None, "ctl[0]@1") is None  # a progress tombstone


def test_every_record_class_declares_its_versions():
    for cls in (MemberRecord, OwnerRecord, ReleaseRecord):
        assert cls.VERSION == 1
    assert KEY_VERSION == 1
    assert {MemberRecord.KIND, OwnerRecord.KIND, ReleaseRecord.KIND} == {
        "member",
        "owner",
        "release",
    }


def _bump(raw: bytes, field: str, to: object) -> bytes:
    obj = json.loads(raw)
    obj[field] = to
    return dumps_canonical(obj)


@pytest.mark.parametrize("rec", ASSIGNMENT, ids=lambda r: type(r).__name__)
@pytest.mark.parametrize(("field", "part"), [("k", "key"), ("v", "value")])
def test_unknown_assignment_versions_name_the_locator(rec, field, part):
    key, value = rec.encode()
    if part == "key":
        key = _bump(key, field, 2)
    else:
        value = _bump(value, field, 2)
    for decode in (decode_assignment, type(rec).decode):
        with pytest.raises(ControlRecordError) as info:
            decode(key, value, "__k2k_assignment[5]@99")
        msg = str(info.value)
        assert msg.startswith("__k2k_assignment[5]@99: ")
        assert f"unknown {rec.KIND} {part} version 2 (this k2k reads version 1)" in msg


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        (b'{"group":"g","k":1,"kind":"boss"}', b'{"v":1}', "unknown assignment key kind 'boss'"),
        (b'{"group":"g","k":1,"kind":["owner"]}', b'{"v":1}', "unknown assignment key kind"),
        (b'{"group":"g","k":1,"kind":"release","topic":"t"}', b'{"v":1}', "malformed assignment"),
        (b'{"group":"g","k":1,"kind":"member","member":"m"}', b'{"v":1,"at":1}', "malformed"),
        (b"not json", b'{"v":1}', "key is not JSON"),
        (None, b'{"v":1}', "key is null"),
        (b'{"group":"g","k":1,"kind":"member","member":"m"}', b"7", "value is not a JSON object"),
    ],
)
def test_bad_assignment_records_name_the_locator(key, value, needle):
    with pytest.raises(ControlRecordError) as info:
        decode_assignment(key, value, "__k2k_assignment[1]@3")
    assert str(info.value).startswith("__k2k_assignment[1]@3: ")
    assert needle in str(info.value)


def test_a_record_class_refuses_another_kind_and_tombstones():
    key, value = GOLDEN[-1][0].encode()  # a release
    with pytest.raises(ControlRecordError, match=r"t\[0\]@1: kind 'release' where kind 'owner'"):
        OwnerRecord.decode(key, value, "t[0]@1")
    with pytest.raises(ControlRecordError, match=r"t\[0\]@1: value is null"):
        ReleaseRecord.decode(key, None, "t[0]@1")


def test_assignment_reprs_are_readable():
    member, standby, owner, eos_free, cutover, release = ASSIGNMENT
    assert repr(cutover) == "CutoverRecord(orders-dr: cutover cut at 1700000000000, 1 partitions)"
    assert repr(member) == (
        "MemberRecord(orders-dr: host-a alive, session 1700000000000-1a2b3c4d on host-a, "
        "at 1700000001000)"
    )
    assert "host-b left standby" in repr(standby)
    assert repr(owner) == (
        "OwnerRecord(orders-dr: orders[3] claimed by host-a (session 1700000000000-1a2b3c4d) "
        "as 1700000000000-1a2b3c4d/7, via k2k-orders-dr-host-a-0, at 1700000001500)"
    )
    assert ", at-least-once, at 17)" in repr(eos_free)
    assert repr(release) == (
        "ReleaseRecord(orders-dr: orders[3] released 1700000000000-1a2b3c4d/7 at 1700000300000)"
    )
    assert repr(ProgressKey("g", "t", 1)) == "ProgressKey(g: t[1])"


def test_public_surface_is_explicit_and_sorted():
    import k2k.formats as formats

    assert formats.__all__ == sorted(formats.__all__)
    for name in formats.__all__:
        assert getattr(formats, name) is not None
    assert set(formats.__all__) >= {
        "AssignmentRecord",
        "MemberRecord",
        "OwnerRecord",
        "ProgressKey",
        "ProgressRecord",
        "ReleaseRecord",
        "decode_assignment",
        "dumps_canonical",
        "read_assignment",
        "unreadable",
    }


def test_formats_import_neither_spark_nor_the_rest_of_k2k():
    code = (
        "import sys, k2k.formats; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'confluent_kafka')"
        " or m.startswith(('k2k.pipeline', 'k2k.coordination', 'k2k.kafka'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_examples_in_docs_formats_md_are_todays_bytes():
    docs = REPO / "docs" / "formats.md"
    examples = re.findall(r"`(\{\"[^`]*\})`", docs.read_text(encoding="utf-8"))
    assert len(examples) >= 8
    golden = {part for _, key, value in GOLDEN for part in (key, value)}
    for example in examples:
        assert example.encode() in golden, example


def test_read_assignment_applies_the_bad_record_policy(caplog):
    log = logging.getLogger("test.formats")
    good = Message(
        topic="__k2k_assignment", partition=2, offset=8, key=GOLDEN[-1][1], value=GOLDEN[-1][2]
    )
    assert read_assignment(good, "fail", log) == ("orders-dr", GOLDEN[-1][0])
    bad = Message(topic="__k2k_assignment", partition=2, offset=9, key=b"{}", value=b"{}")
    with pytest.raises(ControlRecordError) as info:
        read_assignment(bad, "fail", log)
    assert str(info.value).startswith("__k2k_assignment[2]@9: unknown assignment key kind None")
    assert "(errorHandling.onControlMessageDeserializationError: fail)" in str(info.value)
    with caplog.at_level(logging.WARNING, "test.formats"):
        assert read_assignment(bad, "ignore", log) is None
    assert "__k2k_assignment[2]@9" in caplog.text


# --- offset mappings -------------------------------------------------------------------------


def test_offset_mapping_bytes_are_pinned_and_round_trip():
    rec = OffsetMappingRecord("dr", "orders", 3, 40, 42, 10, "dr.orders", 3, 1007, 1016, 17)
    key, value = rec.encode()
    assert key == b'{"k":1,"offset":42,"partition":3,"pipeline":"dr","topic":"orders"}'
    assert value == (
        b'{"count":10,"from":40,"targetLast":1016,"targetOffset":1007,"targetPartition":3,'
        b'"targetTopic":"dr.orders","v":1,"writtenAt":17}'
    )
    assert OffsetMappingRecord.decode(key, value, "m", 0, 1) == rec


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (b'{"k":2,"offset":1,"partition":0,"pipeline":"p","topic":"t"}', b"{}", "unknown"),
        (b'{"k":1,"offset":1,"partition":0,"pipeline":"p","topic":"t"}', b'{"v":1}', "malformed"),
        (
            b'{"k":1,"offset":1,"partition":0,"pipeline":"p","topic":"t"}',
            b'{"count":0,"from":0,"targetLast":0,"targetOffset":0,"targetPartition":0,'
            b'"targetTopic":"x","v":1,"writtenAt":0}',
            "inconsistent",
        ),
    ],
)
def test_a_bad_offset_mapping_is_refused_naming_where_it_was_read(key, value, says):
    with pytest.raises(ControlRecordError, match=rf"^maps\[2\]@9: .*{says}"):
        OffsetMappingRecord.decode(key, value, "maps", 2, 9)


@pytest.mark.parametrize(
    ("pipeline", "topic", "target"),
    [("dr", "orders", "dr.orders"), ("p\u00e9", 't"q', "\u00fcn\u00efcode")],
)
def test_the_run_encoder_writes_the_record_bytes(pipeline, topic, target):
    encoder = RunEncoder(pipeline, topic, 7)
    for args in [
        (0, 0, 1, 0, 0, 5),
        (40, 42, 10, 1007, 1020, 2**41),
        (9, 9, 3, 2**40, 2**40 + 2, 0),
    ]:
        frm, first, count, t_first, t_last, at = args
        rec = OffsetMappingRecord(
            pipeline, topic, 7, frm, first, count, target, 2, t_first, t_last, at
        )
        assert encoder.encode(frm, first, count, target, 2, t_first, t_last, at) == rec.encode()


@pytest.mark.parametrize(
    ("pipeline", "owner", "topic_id"),
    [
        ("orders-dr", "", ""),
        ("orders-dr", "host-a", "Sx1vT5XqQ2aJ0e1b6nWz9g"),
        ("dr 100%", "höst-ä", ""),  # a '%' and non-ASCII text pass through the template
        ('quo"te', "back\\slash", "id"),
    ],
)
def test_a_value_writer_writes_the_bytes_encode_value_writes(pipeline, owner, topic_id):
    write = ProgressRecord.value_writer(pipeline, owner, topic_id)
    cases = (
        (0, 0, 0, None, None),
        (42, 1700000000000, 3, 50, None),
        (2**62, 1, 2**40, 2**62, 2**61),
        (5, 1, 0, 5, 0),
    )
    for offset, at, foreign, end, mapped in cases:
        rec = ProgressRecord(
            "g", "t", 0, offset, pipeline, at, owner, topic_id, foreign, end, mapped
        )
        value = write(offset, at, foreign, end, mapped)
        assert value == rec.encode_value()
        assert ProgressRecord.decode_value(rec.key, value, "t[0]@1") == rec


def test_the_source_end_seen_is_optional_in_both_directions():
    key = ProgressKey("g", "t", 0)
    old = b'{"committedAt":1,"offset":7,"pipeline":"p","v":1}'
    assert ProgressRecord.decode_value(key, old, "t[0]@1").end is None
    new = ProgressRecord("g", "t", 0, 7, "p", 1, end=9).encode_value()
    assert json.loads(new) == {"committedAt": 1, "end": 9, "offset": 7, "pipeline": "p", "v": 1}


def test_where_identical_offsets_ended_is_optional_in_both_directions():
    """Values without ``mappedFrom`` (older writers, partitions still identical) read as
    None; a value with it is still a valid version-1 value (an extra field)."""
    key = ProgressKey("g", "t", 0)
    old = b'{"committedAt":1,"offset":7,"pipeline":"p","v":1}'
    assert ProgressRecord.decode_value(key, old, "t[0]@1").mapped_from is None
    new = ProgressRecord("g", "t", 0, 7, "p", 1, mapped_from=3).encode_value()
    assert json.loads(new) == {
        "committedAt": 1,
        "mappedFrom": 3,
        "offset": 7,
        "pipeline": "p",
        "v": 1,
    }
    assert ProgressRecord.decode_value(key, new, "t[0]@1").mapped_from == 3


def test_foreign_records_are_optional_in_both_directions():
    """Values without the count (older writers) read as 0; values with it read by a reader
    that does not know it are still valid version-1 values (it is an extra field)."""
    key = ProgressKey("g", "t", 0)
    old = b'{"committedAt":1,"offset":7,"pipeline":"p","v":1}'
    assert ProgressRecord.decode_value(key, old, "t[0]@1").foreign == 0
    new = ProgressRecord("g", "t", 0, 7, "p", 1, foreign=5).encode_value()
    assert json.loads(new) == {"committedAt": 1, "foreign": 5, "offset": 7, "pipeline": "p", "v": 1}
    assert ProgressRecord("g", "t", 0, 7, "p", 1).encode_value() == old


def test_the_other_groups_filter_skips_only_keys_of_other_groups():
    other = ProgressKey.other_groups_filter("orders-dr")
    assert other(ProgressKey("billing", "orders", 1).encode())
    assert other(OwnerRecord("billing", "t", 0, "m", "s", "tx", "c", 1).encode()[0])
    # Its own group's records, of both families, go on to the decoder.
    assert not other(ProgressKey("orders-dr", "orders", 1).encode())
    assert not other(OwnerRecord("orders-dr", "t", 0, "m", "s", "tx", "c", 1).encode()[0])
    # So does anything it cannot be sure of: another layout, junk, a missing key, its own
    # group written another way (a space, an escape, a second group field), a bad own key.
    for raw in (
        b'{"k":1,"group":"billing","partition":0,"topic":"t"}',
        b"not json",
        None,
        b'{"group":"orders-dr" ,"k":1,"partition":0,"topic":"t"}',
        b'{"group":"orders-\\u0064r","k":1,"partition":0,"topic":"t"}',
        b'{"group":"billing","group":"orders-dr","k":1,"partition":0,"topic":"t"}',
        b'{"group":"orders-dr"}',
        b'{"group":"billing',
    ):
        assert not other(raw), raw
    # A group whose name only starts like this one's is another group.
    assert other(ProgressKey("orders-dr-2", "orders", 1).encode())


def test_the_other_groups_filter_is_off_for_names_json_escapes():
    for group in ('a"b', "back\\slash", "tab\there", "ünïcode"):
        other = ProgressKey.other_groups_filter(group)
        assert not other(ProgressKey("billing", "t", 0).encode())
        assert not other(ProgressKey(group, "t", 0).encode())
