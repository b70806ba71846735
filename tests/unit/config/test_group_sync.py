"""Group offset sync (``features.syncGroupOffsets``): its config, the app the driver runs for
it, and MirrorMaker 2's ``sync.group.offsets.*`` mapped to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from k2k.config.loader import build_pipeline
from k2k.config.mm2 import flow_config, read_mm2
from k2k.config.offset_mapping import group_sync_app
from k2k.errors import ConfigError
from tests.helpers.config import pipeline
from tests.unit.config.test_mm2 import BASE, _write


def test_the_app_of_a_pipeline_syncs_its_groups_leniently() -> None:
    cfg = build_pipeline(
        pipeline(
            {
                "features": {"offsetMapping": "enabled", "syncGroupOffsets": "enabled"},
                "syncGroupOffsets": {
                    "interval": "5 seconds",
                    "groups": ["orders-app", "billing"],
                    "groupsExclude": "bill.*",
                },
                "offsetMapping": {"topic": "__maps"},
            }
        ),
        {},
    )
    app = group_sync_app(cfg)
    assert app.groups.poll_interval.total_seconds() == 5
    assert [g for g in ("orders-app", "billing", "other") if app.groups.selects(g)] == [
        "orders-app"
    ]
    assert app.offset_mapping.topic == "__maps"
    assert app.source == cfg.source and app.target == cfg.target
    assert app.error_handling.on_active_consumer_group_commit == "ignore"
    assert app.error_handling.on_multiple_target_committed_offsets == "ignore"


def test_the_default_selection_leaves_mm2s_internal_groups_out() -> None:
    cfg = build_pipeline(pipeline(), {})
    selects = group_sync_app(cfg).groups.selects
    assert [selects(g) for g in ("app", "console-consumer-1", "connect-x", "__k2k")] == [
        True,
        False,
        False,
        False,
    ]


def test_sync_without_offset_mappings_is_refused(problems) -> None:
    lines = problems({"features": {"syncGroupOffsets": "enabled"}})
    assert lines == [
        "features.syncGroupOffsets: needs features.offsetMapping: enabled (groups move through "
        "the mappings), got 'enabled'; expected features.offsetMapping: enabled, or "
        "features.syncGroupOffsets: disabled"
    ]


@pytest.mark.parametrize("where", ["", "A->B."])
def test_mm2s_sync_group_offsets_becomes_the_pipelines_group_sync(
    tmp_path: Path, where: str
) -> None:
    extra = (
        f"{where}sync.group.offsets.enabled = true\n"
        f"{where}sync.group.offsets.interval.seconds = 7\n"
        "groups = app-.*, billing\ngroups.exclude = app-test\n"
    )
    mm2 = read_mm2(_write(tmp_path, BASE + extra))
    (flow,) = mm2.flows
    doc = flow.pipeline
    assert doc["features"]["syncGroupOffsets"] == "enabled"
    assert doc["syncGroupOffsets"]["interval"] == "7 seconds"
    cfg = flow_config(mm2, flow)
    selects = group_sync_app(cfg).groups.selects
    assert [selects(g) for g in ("app-1", "billing", "app-test", "x")] == [True, True, False, False]
    assert cfg.checkpoints.selects("app-1") and not cfg.checkpoints.selects("app-test")
    notes = [n.prop for n in mm2.notes] + [n.prop for f in mm2.flows for n in f.notes]
    assert not [n for n in notes if n.startswith(f"{where}sync.group")]


def test_mm2s_default_is_no_group_sync(tmp_path: Path) -> None:
    (flow,) = read_mm2(_write(tmp_path, BASE)).flows
    assert flow.pipeline["features"]["syncGroupOffsets"] == "disabled"


def test_sync_without_offset_syncs_is_noted_and_off(tmp_path: Path) -> None:
    text = BASE + "sync.group.offsets.enabled = true\nemit.offset-syncs.enabled = false\n"
    mm2 = read_mm2(_write(tmp_path, text))
    (flow,) = mm2.flows
    assert flow.pipeline["features"]["syncGroupOffsets"] == "disabled"
    assert any("syncs no group offsets" in n.advice for n in flow.notes)
    with pytest.raises(ConfigError):
        build_pipeline({**flow.pipeline, "features": {"syncGroupOffsets": "enabled"}}, {})
