"""What `bench/run` runs for its arguments: quick mode's rounds, warm-up copy and W2."""

from __future__ import annotations

from bench.harness import FULL, Plan, chosen_and_plan, parser


def _plan(*argv: str) -> Plan:
    ap = parser()
    return chosen_and_plan(ap, ap.parse_args(list(argv)))[1]


def test_quick_mode_is_w1_twice_after_a_shorter_warm_up_copy() -> None:
    plan = _plan("--quick")
    (w,) = plan.backlog
    assert (w.records, w.value_size, plan.rounds, plan.steady) == (5_000_000, 100, 2, ())
    warm_up = plan.warm_up_workload(w)
    assert (warm_up.records, warm_up.value_size) == (1_000_000, 100)
    assert warm_up.topic != w.topic


def test_quick_mode_with_skip_backlog_runs_its_short_w2() -> None:
    (steady,) = _plan("--quick", "--skip-backlog").steady
    assert (steady.rate, steady.seconds) == (5_000, 10)


def test_rounds_and_records_given_win_over_the_plan() -> None:
    plan = _plan("--quick", "--rounds", "3", "--records", "300000")
    (w,) = plan.backlog
    assert (plan.rounds, w.records) == (3, 300_000)
    assert plan.warm_up_workload(w) == w  # shorter than the warm-up copy: copied itself


def test_the_full_run_is_one_round_warmed_up_on_each_workload_itself_then_w2() -> None:
    plan = _plan()
    assert plan.rounds == 1 and plan.steady == FULL.steady
    assert all(plan.warm_up_workload(w) == w for w in plan.backlog)
