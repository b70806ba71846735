"""Client statistics without brokers: librdkafka's JSON as a real client emitted it
(captured by data/capture_statistics.py) parsed into summaries, the summaries of a runner's
clients in its frame, and the driver's counters and gauges made from the frames."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from k2k.config.metrics import PipelineMetrics
from k2k.metrics.clientstats import CONSUMER, PRODUCER, STATS, ClientStatistics, summarize
from k2k.metrics.frames import RunnerFrame
from k2k.metrics.health import PipelineGauges
from k2k.metrics.replicator import ReplicatorMetrics
from k2k.metrics.tally import RunTally
from k2k.observability.stats import PipelineStats
from k2k.pipeline.plan import RunnerSummary
from k2k.pipeline.task.commit.transactions import TransactionPair
from tests.unit.metrics.test_metrics import _InMemory

DATA = Path(__file__).parent / "data"


def _sample(role: str) -> dict[str, Any]:
    return json.loads((DATA / f"librdkafka_{role}_statistics.json").read_text())


def _raw(role: str, name: str, **changes: Any) -> str:
    """The captured document of ``role`` as client ``name``, top-level fields changed."""
    return json.dumps({**_sample(role), "name": name, **changes})


def _answered(doc: dict[str, Any], window: str) -> list[dict[str, int]]:
    """The brokers' windows with samples (a logical broker, e.g. the group coordinator
    the consumer never uses, has none)."""
    return [b[window] for b in doc["brokers"].values() if b[window]["cnt"] > 0]


def test_a_real_producers_statistics_give_its_totals_queues_and_latencies():
    doc = _sample(PRODUCER)
    brokers = list(doc["brokers"].values())
    summary = summarize(PRODUCER, doc)
    assert summary["records"] == doc["txmsgs"] > 0
    assert summary["bytes"] == doc["tx_bytes"] > 0
    assert (summary["msgCnt"], summary["msgSize"]) == (doc["msg_cnt"], doc["msg_size"])
    assert summary["msgCnt"] > 0  # captured with records queued
    assert summary["waitrespCnt"] == sum(b["waitresp_cnt"] for b in brokers)
    assert summary["outbufCnt"] == sum(b["outbuf_cnt"] for b in brokers)
    assert summary["txerrs"] == summary["txretries"] == 0
    rtt = _answered(doc, "rtt")
    assert summary["rttAvg"] == max(w["avg"] for w in rtt) / 1e6
    assert summary["rttP99"] == max(w["p99"] for w in rtt) / 1e6
    assert 0 < summary["rttAvg"] <= summary["rttP99"] < 5  # seconds, not microseconds
    # The queue waits of the capture (a burst of records) lie beyond the histogram's
    # range: its percentiles read 0, and the window's maximum stands for the p99.
    (queue,) = _answered(doc, "int_latency")
    assert queue["outofrange"] > 0 and queue["p99"] == 0
    assert summary["intLatencyAvg"] == queue["avg"] / 1e6
    assert summary["intLatencyP99"] == queue["max"] / 1e6
    assert set(summary) == {s.key for s in STATS[PRODUCER]}


def test_a_real_consumers_statistics_give_its_totals_fetch_queue_and_latency():
    doc = _sample(CONSUMER)
    summary = summarize(CONSUMER, doc)
    partitions = [p for t in doc["topics"].values() for p in t["partitions"].values()]
    assert summary["records"] == doc["rxmsgs"] > 0
    assert summary["bytes"] == doc["rx_bytes"] > 0
    assert summary["fetchqCnt"] == sum(p["fetchq_cnt"] for p in partitions) > 0
    assert summary["fetchqSize"] == sum(p["fetchq_size"] for p in partitions) > 0
    rtt = _answered(doc, "rtt")
    assert len(rtt) < len(doc["brokers"])  # the logical coordinator is left out
    assert summary["rttAvg"] == max(w["avg"] for w in rtt) / 1e6
    assert summary["rttP99"] == max(w["p99"] for w in rtt) / 1e6
    assert set(summary) == {s.key for s in STATS[CONSUMER]}


def test_an_interval_without_requests_has_no_latency():
    doc = _sample(PRODUCER)
    for broker in doc["brokers"].values():
        for window in ("rtt", "int_latency"):
            broker[window] = {**broker[window], "cnt": 0, "avg": 0, "p99": 0, "max": 0}
    summary = summarize(PRODUCER, doc)
    assert not {"rttAvg", "rttP99", "intLatencyAvg", "intLatencyP99"} & set(summary)
    assert summary["records"] == doc["txmsgs"]


def test_a_runners_clients_add_up_in_its_frame_and_bad_documents_are_dropped():
    stats = ClientStatistics(1000)
    assert stats.settings({"acks": "all"}) == {"acks": "all", "statistics.interval.ms": "1000"}
    tally = RunTally(lease=1)
    tally.client_statistics = stats
    assert "clients" not in json.loads(tally.frame().encode())  # none yet: absent
    # An exactly-once runner's two producers, one of them idle; its source consumer.
    stats.callback(PRODUCER)(_raw(PRODUCER, "rdkafka#producer-1"))
    stats.callback(PRODUCER)(_raw(PRODUCER, "rdkafka#producer-2", txmsgs=0, msg_cnt=0))
    stats.callback(PRODUCER)(_raw(PRODUCER, "rdkafka#producer-1"))  # the next interval
    stats.callback(CONSUMER)(_raw(CONSUMER, "rdkafka#consumer-3"))
    stats.callback(CONSUMER)("{not json")
    stats.callback(CONSUMER)(json.dumps({"name": "rdkafka#consumer-9"}))
    frame = RunnerFrame.decode(tally.frame().encode())
    assert frame is not None
    producer, consumer = (
        summarize(PRODUCER, _sample(PRODUCER)),
        summarize(CONSUMER, _sample(CONSUMER)),
    )
    assert frame.clients[PRODUCER]["records"] == producer["records"]
    assert frame.clients[PRODUCER]["bytes"] == 2 * producer["bytes"]
    assert frame.clients[PRODUCER]["msgCnt"] == producer["msgCnt"]
    assert frame.clients[PRODUCER]["rttP99"] == producer["rttP99"]  # the highest, not a sum
    assert frame.clients[CONSUMER] == consumer


def _metrics(client_statistics: bool) -> tuple[ReplicatorMetrics, _InMemory]:
    telemetry = _InMemory()
    prefixes = {CONSUMER: "k2k.source.consumer.", PRODUCER: "k2k.target.producer."}
    metrics = ReplicatorMetrics(
        telemetry,  # type: ignore[arg-type]
        PipelineGauges("dr", PipelineStats(), ages=None),
        prefix="k2k.",
        mode="at-least-once",
        client_prefixes=prefixes if client_statistics else None,
    )
    return metrics, telemetry


def _frame(runner: str, lease: int, seq: int, **producer: float) -> bytes:
    return RunnerFrame(runner, lease, seq=seq, clients={PRODUCER: producer}).encode()


def _value(telemetry: _InMemory, name: str) -> float | None:
    points = telemetry.points(name)
    assert len(points) <= 1
    if points:
        assert dict(points[0].attributes) == {"pipeline": "dr"}
    return points[0].value if points else None


def test_driver_counts_each_runners_increase_and_gauges_the_running_leases():
    metrics, telemetry = _metrics(client_statistics=True)
    metrics.on_frame(_frame("r1", 1, 1, records=100, msgCnt=10, rttAvg=0.004))
    metrics.on_frame(_frame("r2", 1, 1, records=50, msgCnt=5, rttAvg=0.009))
    metrics.on_frame(_frame("r1", 1, 3, records=160, msgCnt=2, rttAvg=0.003))
    metrics.on_frame(_frame("r1", 1, 2, records=130, msgCnt=7, rttAvg=0.030))  # late: ignored
    assert _value(telemetry, "k2k.target.producer.records") == 210
    assert _value(telemetry, "k2k.target.producer.queue.records") == 7  # 2 + 5
    assert _value(telemetry, "k2k.target.producer.request.latency.avg") == 0.009  # highest
    assert _value(telemetry, "k2k.source.consumer.fetch.queue.records") is None  # none came
    # The lease ends with its summaries' last frames: counted, then the gauges go.
    last = RunnerFrame("r2", 1, seq=9, clients={PRODUCER: {"records": 70.0, "msgCnt": 0.0}})
    metrics.lease_ended(1, [RunnerSummary(0, metrics=last.encode())], fencings=0)
    metrics.on_frame(_frame("r1", 1, 4, records=999, msgCnt=1))  # of the ended lease
    assert _value(telemetry, "k2k.target.producer.records") == 230
    assert _value(telemetry, "k2k.target.producer.queue.records") is None
    # The next lease's runners start their totals at zero: the counter keeps growing.
    metrics.on_frame(_frame("r3", 2, 1, records=40, msgCnt=3))
    assert _value(telemetry, "k2k.target.producer.records") == 270
    assert _value(telemetry, "k2k.target.producer.queue.records") == 3


def test_driver_without_client_statistics_has_no_client_instruments():
    metrics, telemetry = _metrics(client_statistics=False)
    metrics.on_frame(_frame("r1", 1, 1, records=100, msgCnt=10))
    names = {
        m.name
        for rm in telemetry.reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert not {n for n in names if ".consumer." in n or ".producer." in n}


def test_interval_is_whole_milliseconds_from_a_second_to_a_day():
    stats = PipelineMetrics().client_statistics
    assert (stats.enabled, stats.interval_ms) == (False, 15_000)
    parsed = PipelineMetrics.model_validate({"clientStatistics": {"interval": "1.5 seconds"}})
    assert parsed.client_statistics.interval_ms == 1500
    with pytest.raises(ValueError, match=r"clientStatistics\.interval[\s\S]*too long"):
        PipelineMetrics.model_validate({"clientStatistics": {"interval": "25 hours"}})
    with pytest.raises(ValueError, match=r"clientStatistics\.interval[\s\S]*at least 1 second"):
        PipelineMetrics.model_validate({"clientStatistics": {"interval": "500 ms"}})


class _Producer:
    """Counts polls: what TransactionPair.serve_idle may do to a producer."""

    def __init__(self) -> None:
        self.polls = 0

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        return 0


def test_the_idle_transactional_producer_is_polled_only_while_no_commit_runs_on_it():
    first, second = _Producer(), _Producer()
    pair = TransactionPair([first, second])
    try:
        pair.serve_idle()
        assert (first.polls, second.polls) == (0, 1)  # first is current
        started, release = threading.Event(), threading.Event()
        pair.hand_off(lambda: (started.set(), release.wait(10)), carried="batch 1")
        assert started.wait(10)
        pair.serve_idle()  # first commits on the pair's thread: left alone
        assert first.polls == 0
        release.set()
        assert pair.wait() == "batch 1"
        pair.serve_idle()
        assert (first.polls, second.polls) == (1, 1)
    finally:
        pair.close()
