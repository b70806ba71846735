"""What `bench/run --w3` runs for its arguments (no brokers)."""

from __future__ import annotations

import pytest

from bench.contender import Contender
from bench.harness import Plan, chosen_and_plan, parser
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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--w3", "--only", "k2k-mm2"), "k2k-mm2 cannot copy many topics"),
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
