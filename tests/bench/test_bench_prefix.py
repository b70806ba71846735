"""How each contender is told to copy every topic under a prefix (W3, the long W2), and the
settings the harness passes on (k2k's lease and discovery, MirrorMaker 2's topic refresh).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bench.bare_loop import read_plan, write_plan
from bench.contender import Ctx
from bench.k2k_bench import K2KAtLeastOnce, K2KExactlyOnce
from bench.mm2 import MirrorMaker2AtLeastOnce
from k2k.config import load_pipeline


def _ctx(tmp_path: Path, prefix: str = "w3-abc-", run: str = "r1") -> Ctx:
    return Ctx("s:1", "t:2", prefix, f"{prefix}-label", 8, False, run, tmp_path, prefix=True)


def test_k2k_copies_every_topic_under_the_prefix_to_its_contenders_name(tmp_path: Path) -> None:
    c = K2KExactlyOnce(lease_duration="20 seconds", discovery_interval="5 seconds")
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(c.pipeline(_ctx(tmp_path))))
    cfg = load_pipeline([str(path)])  # k2k's own loader accepts it
    selection = cfg.replication.source.topic
    assert isinstance(selection, str)
    assert re.fullmatch(selection, "w3-abc-0007") and not re.fullmatch(selection, "w3-abcd-0")
    assert cfg.replication.sink.topic.route("w3-abc-0007") == c.dest_topic("w3-abc-0007", "r1")
    assert cfg.spark.lease_duration.total_seconds() == 20
    assert cfg.replication.source.discovery_interval.total_seconds() == 5


def test_k2k_defaults_stay_k2ks_own_and_one_topic_runs_keep_their_map(tmp_path: Path) -> None:
    ctx = Ctx("s:1", "t:2", "steady-1", "steady-1-k2k-r1", 8, True, "r1", tmp_path)
    pipeline = K2KAtLeastOnce().pipeline(ctx)
    assert pipeline["replication"] == [
        {"source": {"topic": ["steady-1"]}},
        {"sink": {"topic": {"map": {"steady-1": "steady-1-k2k-r1"}}, "partition": "source"}},
    ]
    assert pipeline["spark"] == {"master": "local[2]"}


def test_mirrormaker_selects_the_prefix_and_refreshes_as_asked(tmp_path: Path) -> None:
    text = MirrorMaker2AtLeastOnce(refresh_topics_s=5).render(_ctx(tmp_path, "steady-5000-r1"))
    flow = "mmr1->target"
    assert f"{flow}.topics = steady\\\\-5000\\\\-r1.*\n" in text
    assert text.endswith(f"{flow}.refresh.topics.interval.seconds = 5\n")
    assert "refresh.topics" not in MirrorMaker2AtLeastOnce().render(_ctx(tmp_path))


def test_the_bare_loops_plan_file_round_trips(tmp_path: Path) -> None:
    rows: list[tuple[str, str, int, int | None]] = [
        ("a", "a-bare", 0, 50),
        ("b", "b-bare", 3, None),
    ]
    write_plan(tmp_path / "plan.json", rows)
    assert read_plan(tmp_path / "plan.json") == rows
