"""What `bench/run --w3` and `bench/run --long-w2` run for their arguments (no brokers)."""

from __future__ import annotations

import pytest

from bench.contender import Contender
from bench.harness import Plan, chosen_and_plan, parser
from bench.k2k_bench import K2KAtLeastOnce
from bench.mm2 import MirrorMaker2AtLeastOnce
from bench.w3 import ManyTopics


def _parse(*argv: str) -> tuple[list[Contender], Plan]:
    ap = parser()
    return chosen_and_plan(ap, ap.parse_args(list(argv)))


def test_w3_is_the_issues_shape_for_the_four_headline_contenders() -> None:
    chosen, plan = _parse("--w3")
    assert [c.key for c in chosen] == ["k2k", "k2k-eos", "mm2", "bare"]
    assert plan.many == ManyTopics(1000, 8, 50, 100, 1000, 60.0, 15.0)
    assert plan.many.records == 400_000
    assert (plan.backlog, plan.steady, plan.rounds) == ((), (), 1)


def test_w3_sizes_and_rounds_come_from_the_flags() -> None:
    _, plan = _parse(
        "--w3", "--w3-topics", "20", "--w3-partitions", "4", "--w3-backlog", "10",
        "--w3-rate", "200", "--w3-seconds", "12.5", "--rounds", "3",
    )  # fmt: skip
    assert plan.many is not None
    assert (plan.many.topics, plan.many.partitions, plan.many.per_partition) == (20, 4, 10)
    assert (plan.many.rate, plan.many.seconds, plan.rounds) == (200, 12.5, 3)
    assert plan.many.names("w3-x-")[-1] == "w3-x-19"


def test_long_w2_spans_three_lease_boundaries_and_a_discovery_by_default() -> None:
    chosen, plan = _parse("--long-w2")
    assert [c.key for c in chosen] == ["k2k", "k2k-eos", "mm2", "mm2-eos"]
    (steady,) = plan.steady
    assert (steady.rate, steady.seconds, steady.new_topic_at_s) == (5000, 17 * 60, 10 * 60)
    assert steady.name == "W2-long-5k/s-17min"
    assert plan.backlog == () and plan.many is None
    k2k = [c for c in chosen if isinstance(c, K2KAtLeastOnce)]
    assert all(c.lease_duration is None and c.discovery_interval is None for c in k2k)
    mm2 = [c for c in chosen if isinstance(c, MirrorMaker2AtLeastOnce)]
    assert [c.refresh_topics_s for c in mm2] == [30, 30]  # k2k's default discovery interval


def test_a_short_lease_shortens_the_long_w2_for_a_smoke_run() -> None:
    chosen, plan = _parse(
        "--long-w2", "--lease-duration", "20 seconds", "--discovery-interval", "5 seconds"
    )
    (steady,) = plan.steady
    assert (steady.seconds, steady.new_topic_at_s) == (68.0, 40.0)
    assert steady.name == "W2-long-5k/s-68s"
    k2k = [c for c in chosen if isinstance(c, K2KAtLeastOnce)]
    assert [(c.lease_duration, c.discovery_interval) for c in k2k] == [
        ("20 seconds", "5 seconds"),
        ("20 seconds", "5 seconds"),
    ]
    mm2 = [c for c in chosen if isinstance(c, MirrorMaker2AtLeastOnce)]
    assert [c.refresh_topics_s for c in mm2] == [5, 5]


def test_mirrormaker_keeps_its_refresh_default_outside_the_long_w2() -> None:
    chosen, _ = _parse("--w3", "--only", "mm2", "--discovery-interval", "5 seconds")
    assert [getattr(c, "refresh_topics_s", "?") for c in chosen] == [None]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--w3", "--long-w2"), "one at a time"),
        (("--w3", "--only", "k2k-mm2"), "k2k-mm2 cannot copy many topics"),
        (("--long-w2", "--lease-duration", "5"), "--lease-duration: a bare number has no unit"),
        (("--long-w2", "--long-seconds", "60", "--new-topic-at", "90"), "inside the 60 s window"),
        (("--w3", "--w3-topics", "0"), "at least 1"),
        (("--w3", "--quick"), "no --quick"),
    ],
)
def test_bad_arguments_say_what_is_wrong(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse(*argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
