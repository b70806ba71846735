"""Cluster outages while ``k2k start`` runs: a few log lines an operator can read, the
outage waited out in both modes (exactly-once used to exit when a transaction could not
complete), ``errorHandling.maxOutage`` bounding the wait, and nothing lost.

Without k2k's handling, librdkafka's clients (the driver's and every runner's) printed a
connection failure about 20 times a second (3,526 lines in 2.5 minutes). Now the driver says
once that the target is unreachable, once every 30 s that it still is, and once that it is
back; librdkafka's own lines stay at DEBUG.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from datetime import datetime

import pytest

from k2k.errors import K2KError
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import BASE_TS, committed_progress, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_BATCH = 2_000


def _records(first: int, count: int) -> list:
    return [
        (i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())], BASE_TS + i)
        for i in range(first, first + count)
    ]


def _seeded(
    clusters,
    target_bootstrap: str,
    topic_name,
    label: str,
    *,
    source_bootstrap: str | None = None,
    **sections,
) -> tuple[str, str, dict]:
    """A topic with one batch of records on the source (``source_bootstrap``, by default
    the shared source), and a pipeline from it to the cluster at ``target_bootstrap``:
    (topic, pipeline name, pipeline document)."""
    source = source_bootstrap or clusters.source
    t = topic_name(label)
    name = topic_name(f"p{label}")
    create_topic(source, t, PARTITIONS)
    produce(source, t, _records(0, PER_BATCH))
    doc = pipeline_dict(clusters, name, [t], **sections)
    doc["source"]["kafka"]["common"]["bootstrap.servers"] = source
    doc["target"]["kafka"]["common"]["bootstrap.servers"] = target_bootstrap
    return t, name, doc


def _running(
    running_pipeline, tmp_path, doc: dict, target: str
) -> tuple[K2KProcess, Callable[[], int]]:
    """``k2k start`` of ``doc`` once it committed the first batch, and a reader of the
    records committed in all."""
    topic, group = doc["coordination"]["commit"]["topic"], doc["name"]

    def committed_total() -> int:
        return sum(committed_progress(target, topic, group).values())

    def first_batch(positions: dict) -> bool:
        return sum(positions.values()) == PER_BATCH

    proc = running_pipeline(write_pipeline(tmp_path, doc), first_batch)
    return proc, committed_total


def test_target_outage_logs_few_lines_and_replication_completes(
    clusters, own_target, tmp_path, topic_name, running_pipeline
):
    """Stop the target for about a minute while ``k2k start`` runs (at-least-once) and records
    keep arriving on the source; bring it back. The log says unreachable / still unreachable /
    reachable again, and no librdkafka connection error; every record arrives, in order."""
    target = own_target.bootstrap
    t, _, doc = _seeded(
        clusters,
        target,
        topic_name,
        "outage",
        features={"tracingHeaders": {"offset": "enabled"}},
        # One lease for the whole test: a lease boundary during the outage is another test.
        spark={"leaseDuration": "30 minutes"},
    )
    proc, committed_total = _running(running_pipeline, tmp_path, doc, target)
    try:
        own_target.stop()
        produce(clusters.source, t, _records(PER_BATCH, PER_BATCH))  # arrives during the outage
        eventually(lambda: "target cluster unreachable" in proc.output(), timeout=90)
        # Down until the first reminder (30 s after the first line), then back.
        eventually(lambda: "target cluster still unreachable" in proc.output(), timeout=90)
        own_target.start(timeout=120)
        eventually(lambda: "target cluster reachable again" in proc.output(), timeout=90)
        eventually(committed_total, 2 * PER_BATCH, timeout=180, interval=0.5, ignore=(K2KError,))
        assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        if proc.proc.poll() is None:
            proc.kill()

    out = proc.output()
    lines = out.splitlines()
    # librdkafka's raw lines (%3|...|FAIL|...) and its connection errors, routed or not (the
    # reachability lines quote the cause once each).
    raw = re.compile(r"\|FAIL\||Connect to |Connection refused|brokers are down")
    assert not [ln for ln in lines if raw.search(ln) and "k2k.reachability" not in ln]
    about = [ln for ln in lines if "k2k.reachability" in ln]
    became = [ln for ln in about if "target cluster unreachable at" in ln]
    still = [ln for ln in about if "still unreachable" in ln]
    back = [ln for ln in about if "reachable again" in ln]
    assert len(became) == 1, about
    assert 1 <= len(still) <= 2, about
    assert len(back) == 1, about
    assert len(about) == len(became) + len(still) + len(back), about
    assert re.search(r"after (\d+ s|\d+ min \d\d s)", still[0]), still[0]
    assert "source cluster" not in "\n".join(about)
    # A reminder every 30 s (the watch looks twice a second), none sooner.
    times = [_logged_at(ln) for ln in [*became, *still]]
    assert all(29.5 <= b - a <= 31.5 for a, b in itertools.pairwise(times)), about
    # No line of Spark's start-up banner.
    banner = ("Setting default log level", "setLogLevel", "incubator modules", "NativeCodeLoader")
    assert not [ln for ln in lines if any(b in ln for b in banner)]
    # Nothing else mentions the target during the outage (between the first and last line).
    start, end = lines.index(became[0]), lines.index(back[0])
    noise = [ln for ln in lines[start + 1 : end] if ln not in still and target in ln]
    assert not noise, noise

    # Every source record arrived, in source order per partition (at-least-once: a replayed
    # run repeats records, never skips or reorders them), with its key, value and headers.
    src, dst = read_all(clusters.source, t), read_all(own_target.bootstrap, t)
    for p in range(PARTITIONS):
        by_offset = {r.offset: r for r in src[p]}
        offsets = [int(dict(r.headers)["k2k_offset"]) for r in dst[p]]
        assert set(offsets) == set(by_offset), p
        # Each record follows its predecessor on the source, or restarts an earlier run.
        assert all(cur <= prev + 1 for prev, cur in zip([-1, *offsets], offsets, strict=False)), p
        for r, o in zip(dst[p], offsets, strict=True):
            s = by_offset[o]
            assert (r.key, r.value, r.timestamp) == (s.key, s.value, s.timestamp)
            assert [h for h in r.headers if h[0] == "h"] == s.headers


def _logged_at(line: str) -> float:
    """The time of a plain log line (``2026-05-01 12:00:00,123 LEVEL logger: message``)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_exactly_once_rides_out_a_target_outage_longer_than_the_transaction_timeout(
    clusters, own_target, tmp_path, topic_name, running_pipeline
):
    """The target is stopped for longer than transaction.timeout.ms (15 s here, to keep the
    test short; 60 s by default) while records keep arriving: the lease fails, k2k waits for
    the target and plans again, and in the end the target holds every source record exactly
    once (read_committed), in order."""
    target = own_target.bootstrap
    t, name, doc = _seeded(
        clusters,
        target,
        topic_name,
        "eos-outage",
        features={"exactlyOnce": "enabled"},
        target={"kafka": {"producer": {"transaction.timeout.ms": "15000"}}},
    )
    proc, committed_total = _running(running_pipeline, tmp_path, doc, target)
    try:
        own_target.stop()
        stopped = time.monotonic()
        produce(clusters.source, t, _records(PER_BATCH, PER_BATCH))  # arrives during the outage
        # The open transaction cannot complete: the lease fails and k2k waits.
        eventually(lambda: "replication paused" in proc.output(), timeout=240, interval=1)
        assert proc.proc.poll() is None, proc.output()[-3000:]
        assert time.monotonic() - stopped > 15  # longer than the transaction timeout
        own_target.start(timeout=120)
        eventually(committed_total, 2 * PER_BATCH, timeout=240, interval=0.5, ignore=(K2KError,))
        assert "replicating again after" in proc.output(), proc.output()[-3000:]
        assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        if proc.proc.poll() is None:
            proc.kill()

    src, dst = read_all(clusters.source, t), read_all(target, t)
    for p in range(PARTITIONS):
        assert [r.content() for r in dst[p]] == [r.content() for r in src[p]], p
    assert sum(len(v) for v in dst.values()) == 2 * PER_BATCH
    assert committed_progress(target, doc["coordination"]["commit"]["topic"], name) == {
        (t, p): len(src[p]) for p in range(PARTITIONS)
    }


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_max_outage_bounds_the_wait_with_a_one_line_error(
    clusters, own_target, tmp_path, topic_name, running_pipeline, mode
):
    """``errorHandling.maxOutage: 10 seconds``: a target that stays down ends the run with
    exit 1 and one line naming the setting, soon after the bound (not after the runners'
    delivery timeout: 60 s here); what was committed stays, and nothing else is on the
    target."""
    target = own_target.bootstrap
    eos = {"features": {"exactlyOnce": "enabled"}} if mode == "exactly-once" else {}
    t, name, doc = _seeded(clusters, target, topic_name, "bounded", **_BOUNDED, **eos)
    proc, _ = _running(running_pipeline, tmp_path, doc, target)
    more = _records(PER_BATCH, PER_BATCH)
    code, took = _exit_after_stopping(proc, own_target, lambda: produce(clusters.source, t, more))
    _assert_gave_up(proc.output(), code, took, f"target cluster unreachable at {target}")
    own_target.start(timeout=120)
    assert committed_progress(target, doc["coordination"]["commit"]["topic"], name) == {
        (t, p): PER_BATCH // PARTITIONS for p in range(PARTITIONS)
    }
    src, dst = read_all(clusters.source, t), read_all(target, t)
    for p in range(PARTITIONS):
        assert [r.content() for r in dst[p]] == [r.content() for r in src[p]][
            : PER_BATCH // PARTITIONS
        ]


def test_max_outage_bounds_a_source_outage_and_keeps_what_was_copied(
    clusters, own_source, tmp_path, topic_name, running_pipeline
):
    """``errorHandling.maxOutage: 10 seconds`` with the *source* stopped, exactly-once: the
    target still answers, so the ended lease's runners close their transactions and return
    within the grace; the run exits 1 with one line naming the source, soon after the bound;
    the target holds every record copied before the outage exactly once, and progress says
    so."""
    source, target = own_source.bootstrap, clusters.target
    t, name, doc = _seeded(
        clusters,
        target,
        topic_name,
        "src-bounded",
        source_bootstrap=source,
        features={"exactlyOnce": "enabled"},
        **_BOUNDED,
    )
    proc, _ = _running(running_pipeline, tmp_path, doc, target)
    src = read_all(source, t)  # read while the source still answers
    code, took = _exit_after_stopping(proc, own_source)
    _assert_gave_up(proc.output(), code, took, f"source cluster unreachable at {source}")
    dst = read_all(target, t)
    for p in range(PARTITIONS):
        assert [r.content() for r in dst[p]] == [r.content() for r in src[p]], p
    assert committed_progress(target, doc["coordination"]["commit"]["topic"], name) == {
        (t, p): len(src[p]) for p in range(PARTITIONS)
    }


#: The maxOutage tests' bound, a connectTimeout that judges an unanswered probe soon, and
#: one lease for the whole test (a lease ending during the outage gives up elsewhere).
_BOUNDED: dict = {
    "errorHandling": {"maxOutage": "10 seconds"},
    "source": {"connectTimeout": "5 seconds"},
    "target": {"connectTimeout": "5 seconds"},
    "spark": {"leaseDuration": "30 minutes"},
}


def _exit_after_stopping(
    proc: K2KProcess, cluster, then: Callable[[], None] | None = None
) -> tuple[int, float]:
    """Stop ``cluster`` (then call ``then``) and wait for ``proc`` to exit: its exit code and
    the seconds from the stop to the exit. ``proc`` is killed if it does not exit."""
    try:
        cluster.stop()
        stopped = time.monotonic()
        if then is not None:
            then()
        code = proc.proc.wait(300)
        return code, time.monotonic() - stopped
    finally:
        if proc.proc.poll() is None:
            proc.kill()


def _assert_gave_up(out: str, code: int, took: float, outage: str) -> None:
    """A run that gave up on ``outage`` (``<cluster> cluster unreachable at HOST:PORT``):
    exit 1, the lease ended, one error line naming the bound, soon after it."""
    assert code == 1, out[-3000:]
    errors = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, out[-3000:]
    assert re.fullmatch(
        rf"error: {re.escape(outage)}: .*; gave up after \d+ s \(errorHandling\.maxOutage 10 s\)",
        errors[0],
    ), errors[0]
    assert f"ending the lease: {outage}" in out, out[-3000:]
    # The first unanswered probe (sent up to 5 s after the stop), the bound counted from
    # its sending, the runners' grace (5 s) and the way out: about 25 s; not the runners'
    # delivery timeout (60 s here).
    assert took < 40, (took, out[-3000:])
    assert "Traceback" not in out
