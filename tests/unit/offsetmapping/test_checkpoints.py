"""MM2 checkpoints: configuration, group selection, translation into checkpoints, MM2's
rule for which checkpoints are written again."""

from __future__ import annotations

from typing import Any

import pytest

from k2k.config.loader import build_pipeline
from k2k.errors import ConfigError
from k2k.formats import Checkpoint, OffsetMappingRecord
from k2k.kafka import TP
from k2k.offsetmapping.checkpoints import LastCheckpoints, group_checkpoints
from k2k.offsetmapping.index import PartitionIndex


def pipeline(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "a-to-b",
        "source": {"alias": "A", "kafka": {"common": {"bootstrap.servers": "a:9092"}}},
        "target": {"alias": "B", "kafka": {"common": {"bootstrap.servers": "b:9092"}}},
        "features": {"checkpoints": "enabled", "offsetMapping": "enabled"},
        "replication": [{"source": {"topic": ".*"}}, {"sink": {"topic": {"policy": "alias"}}}],
    }
    doc.update(over)
    return doc


def test_defaults_are_mm2_s() -> None:
    cfg = build_pipeline(pipeline(), {})
    assert cfg.features.checkpoints
    assert cfg.checkpoints.interval.total_seconds() == 60
    assert cfg.checkpoints_topic() == "A.checkpoints.internal"
    selected = [
        g for g in ["app", "console-consumer-1", "connect-x", "__k2k"] if cfg.checkpoints.selects(g)
    ]
    assert selected == ["app"]


def test_the_policy_separator_names_the_topic() -> None:
    doc = pipeline(
        replication=[
            {"source": {"topic": ".*"}},
            {"sink": {"topic": {"policy": "alias", "separator": "_"}}},
        ]
    )
    assert build_pipeline(doc, {}).checkpoints_topic() == "A_checkpoints_internal"


def test_groups_and_exclusions_are_set() -> None:
    doc = pipeline(
        checkpoints={"interval": "5s", "groups": "app-.*", "groupsExclude": ["app-test"]}
    )
    cfg = build_pipeline(doc, {})
    assert cfg.checkpoints.interval.total_seconds() == 5
    assert [g for g in ["app-1", "app-test", "other"] if cfg.checkpoints.selects(g)] == ["app-1"]
    doc = pipeline(checkpoints={"groups": ["x", "console-consumer-9"], "groupsExclude": None})
    cfg = build_pipeline(doc, {})
    assert [g for g in ["x", "console-consumer-9", "y"] if cfg.checkpoints.selects(g)] == [
        "x",
        "console-consumer-9",
    ]


@pytest.mark.parametrize(
    ("over", "says"),
    [
        (
            {"features": {"checkpoints": "enabled"}},
            "features.checkpoints: needs features.offsetMapping",
        ),
        (
            {"source": {"kafka": {"common": {"bootstrap.servers": "a:9092"}}}},
            "source.alias: missing (required by features.checkpoints",
        ),
        ({"checkpoints": {"groups": "app-("}}, "checkpoints.groups: invalid regular expression"),
        (
            {"checkpoints": {"groupsExclude": [""]}},
            "checkpoints.groupsExclude[0]: not a group name",
        ),
    ],
)
def test_bad_settings_name_the_key(over: dict[str, Any], says: str) -> None:
    doc = pipeline(**over)
    if "source" in over:
        doc["replication"] = [{"source": {"topic": ".*"}}, {"sink": {"topic": "same"}}]
    with pytest.raises(ConfigError) as info:
        build_pipeline(doc, {})
    assert says in str(info.value)


def _index(*runs: tuple[int, int, int, str, int, int]) -> PartitionIndex:
    """Runs (from, first, count, target topic, target partition, target first)."""
    idx = PartitionIndex()
    for at, (frm, first, count, topic, part, t_first) in enumerate(runs):
        rec = OffsetMappingRecord(
            "a-to-b", "orders", 0, frm, first, count, topic, part, t_first, t_first + count - 1, 0
        )
        idx.add(rec, (0, at))
    return idx


def test_a_group_s_positions_become_checkpoints_on_the_target_partitions() -> None:
    indexes = {
        ("orders", 0): _index((0, 0, 10, "A.orders", 0, 5), (10, 12, 10, "A.orders", 0, 15)),
        ("orders", 1): _index((0, 0, 10, "A.orders", 1, 0)),
    }
    committed = {("orders", 0): (13, "app-meta"), ("orders", 1): (10, ""), ("other", 0): (3, "")}
    found = group_checkpoints(
        "app", committed, lambda tp: {"a-to-b": indexes[tp]} if tp in indexes else {}
    )
    assert found.checkpoints == [
        Checkpoint("app", "A.orders", 0, 13, 16, "app-meta"),  # 12 -> 15, so 13 -> 16
        Checkpoint("app", "A.orders", 1, 10, 10, ""),  # past the data: just after it
    ]
    assert found.untranslated == [] and found.shared == []


def test_a_target_partition_fed_by_several_sources_gets_no_checkpoint() -> None:
    shared = _index((0, 0, 10, "all", 0, 0))
    indexes: dict[TP, PartitionIndex] = {
        ("a", 0): shared,
        ("b", 0): _index((0, 0, 10, "all", 0, 10)),
    }
    found = group_checkpoints(
        "g", {("a", 0): (1, ""), ("b", 0): (2, "")}, lambda tp: {"p": indexes[tp]}
    )
    assert found.checkpoints == [] and found.shared == [("all", 0)]


def test_positions_before_the_first_mapping_are_untranslated() -> None:
    idx = _index((5, 5, 10, "A.orders", 0, 0))
    found = group_checkpoints("g", {("orders", 0): (2, "")}, lambda tp: {"p": idx})
    assert found.checkpoints == [] and found.untranslated == [("orders", 0)]


def test_mm2_s_rule_never_repeats_and_never_moves_back_unless_the_group_did() -> None:
    last = LastCheckpoints()
    history = [
        (Checkpoint("g", "t", 0, 10, 100), True),  # first
        (Checkpoint("g", "t", 0, 10, 100), False),  # repeated
        (Checkpoint("g", "t", 0, 12, 99), False),  # would move the target back
        (Checkpoint("g", "t", 0, 12, 102), True),  # advanced
        (Checkpoint("g", "t", 0, 3, 93), True),  # the source group was reset
        (Checkpoint("h", "t", 0, 3, 93), True),  # another group
        (Checkpoint("g", "t", 1, 3, 93), True),  # another partition
    ]
    for checkpoint, expected in history:
        assert last.worth_writing(checkpoint) is expected, checkpoint
        if expected:
            last.written(checkpoint)
