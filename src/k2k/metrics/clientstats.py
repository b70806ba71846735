"""librdkafka's statistics of the runners' source consumers and target producers (opt-in).

Runs on: both sides. With ``metrics.clientStatistics.enabled`` and ``-t``, every runner
client emits librdkafka's statistics JSON (https://github.com/confluentinc/librdkafka/blob/master/STATISTICS.md)
every ``statistics.interval.ms``. The runner's :class:`ClientStatistics` parses each into a
summary of a dozen numbers (:func:`summarize`) inside the client's poll, on the copy thread:
one JSON parse per client and interval, nothing per record. The summaries of the runner's
clients travel in its metrics frame (``RunnerFrame.clients``), and :class:`ClientMeters`
turns them into the driver's instruments: counters of totals, gauges of the current
queues and latencies (docs/metrics.md#client-statistics).

One table, :data:`STATS`, says for each number where it comes from, its instrument, and how
it adds up over clients and runners: totals and queues are summed, latencies take the
highest.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from opentelemetry.metrics import CallbackOptions, Meter, Observation

__all__ = [
    "CONSUMER",
    "PRODUCER",
    "STATS",
    "ClientMeters",
    "ClientStatistics",
    "Role",
    "Stat",
    "Summary",
    "aggregate",
    "summarize",
]

Role = Literal["consumer", "producer"]
CONSUMER: Final = "consumer"
PRODUCER: Final = "producer"

#: Per role, one number per key: what a frame carries.
Summary = dict[str, float]


@dataclass(frozen=True, slots=True)
class Stat:
    """One number of a client's summary and its instrument on the driver.

    ``kind``: ``total`` a running total of the client (a counter on the driver, moved by
    each runner's increments); ``sum`` a current value summed over clients and runners;
    ``max`` a current value whose highest over clients and runners is shown.
    """

    key: str
    name: str
    unit: str
    kind: Literal["total", "sum", "max"]
    description: str


_REQUEST_LATENCY = "round trip of requests to the brokers, over the last interval"
_CONSUMER_STATS = (
    Stat("records", "records", "{record}", "total", "Records fetched from the source (rxmsgs)"),
    Stat("bytes", "bytes", "By", "total", "Bytes received from the source brokers (rx_bytes)"),
    Stat(
        "fetchqCnt",
        "fetch.queue.records",
        "{record}",
        "sum",
        "Records fetched and not yet consumed (sum of the partitions' fetchq_cnt)",
    ),
    Stat(
        "fetchqSize",
        "fetch.queue.bytes",
        "By",
        "sum",
        "Bytes fetched and not yet consumed (sum of the partitions' fetchq_size)",
    ),
    Stat("rttAvg", "request.latency.avg", "s", "max", f"Mean {_REQUEST_LATENCY} (rtt)"),
    Stat("rttP99", "request.latency.p99", "s", "max", f"99th percentile {_REQUEST_LATENCY}"),
)
_PRODUCER_STATS = (
    Stat("records", "records", "{record}", "total", "Records sent to the target (txmsgs)"),
    Stat("bytes", "bytes", "By", "total", "Bytes sent to the target brokers (tx_bytes)"),
    Stat("msgCnt", "queue.records", "{record}", "sum", "Records in the producer (msg_cnt)"),
    Stat("msgSize", "queue.bytes", "By", "sum", "Bytes of the records in the producer (msg_size)"),
    Stat(
        "intLatencyAvg",
        "queue.latency.avg",
        "s",
        "max",
        "Mean time records waited in the producer before they were sent, over the last "
        "interval (int_latency)",
    ),
    Stat(
        "intLatencyP99",
        "queue.latency.p99",
        "s",
        "max",
        "99th percentile time records waited in the producer before they were sent",
    ),
    Stat("rttAvg", "request.latency.avg", "s", "max", f"Mean {_REQUEST_LATENCY} (rtt)"),
    Stat("rttP99", "request.latency.p99", "s", "max", f"99th percentile {_REQUEST_LATENCY}"),
    Stat(
        "outbufCnt",
        "requests.queued",
        "{request}",
        "sum",
        "Requests waiting to be sent to a broker (outbuf_cnt)",
    ),
    Stat(
        "waitrespCnt",
        "requests.in_flight",
        "{request}",
        "sum",
        "Requests sent and waiting for their response (waitresp_cnt)",
    ),
    Stat("txerrs", "errors", "{error}", "total", "Request transmission errors (txerrs)"),
    Stat("txretries", "retries", "{retry}", "total", "Requests retried (txretries)"),
)
#: What each role's summary holds, in the order the docs list it.
STATS: dict[Role, tuple[Stat, ...]] = {CONSUMER: _CONSUMER_STATS, PRODUCER: _PRODUCER_STATS}
_KIND = {role: {s.key: s.kind for s in stats} for role, stats in STATS.items()}


def summarize(role: Role, doc: Mapping[str, Any]) -> Summary:
    """The summary of one statistics document of a ``role`` client.

    A latency is left out when no broker answered a request in the interval (librdkafka
    then reports 0, which is no latency).
    """
    brokers = list(doc.get("brokers", {}).values())
    out: Summary = {}
    if role == CONSUMER:
        out["records"], out["bytes"] = doc["rxmsgs"], doc["rx_bytes"]
        partitions = [
            p for t in doc.get("topics", {}).values() for p in t.get("partitions", {}).values()
        ]
        out["fetchqCnt"] = sum(p.get("fetchq_cnt", 0) for p in partitions)
        out["fetchqSize"] = sum(p.get("fetchq_size", 0) for p in partitions)
    else:
        out["records"], out["bytes"] = doc["txmsgs"], doc["tx_bytes"]
        out["msgCnt"], out["msgSize"] = doc["msg_cnt"], doc["msg_size"]
        _latency(out, "intLatency", [b["int_latency"] for b in brokers])
        out["outbufCnt"] = sum(b["outbuf_cnt"] for b in brokers)
        out["waitrespCnt"] = sum(b["waitresp_cnt"] for b in brokers)
        out["txerrs"] = sum(b["txerrs"] for b in brokers)
        out["txretries"] = sum(b["txretries"] for b in brokers)
    _latency(out, "rtt", [b["rtt"] for b in brokers])
    return out


def _latency(out: Summary, key: str, windows: list[Mapping[str, int]]) -> None:
    """The highest average and p99 (microseconds in the document, seconds out) of the
    brokers' windows with samples. Values beyond a window's histogram range leave its
    percentiles at 0: when over 1 % of them are, the window's maximum stands for its p99."""
    sampled = [w for w in windows if w.get("cnt", 0) > 0]
    if not sampled:
        return
    out[key + "Avg"] = max(w["avg"] for w in sampled) / 1e6
    out[key + "P99"] = max(_p99(w) for w in sampled) / 1e6


def _p99(window: Mapping[str, int]) -> int:
    if window.get("outofrange", 0) * 100 > window["cnt"]:
        return window["max"]
    return window["p99"]


def aggregate(role: Role, summaries: Iterable[Summary]) -> Summary:
    """Summaries of several clients (or runners) as one: totals and queues summed,
    latencies their highest; a key none of them has stays absent.

    >>> aggregate("producer", [{"records": 5, "rttAvg": 0.002}, {"records": 7, "rttAvg": 0.001}])
    {'records': 12, 'rttAvg': 0.002}
    """
    kinds = _KIND[role]
    out: Summary = {}
    for summary in summaries:
        for key, value in summary.items():
            kind = kinds.get(key)
            if kind is None:
                continue  # a number a newer runner sends: not shown by this driver
            if key not in out:
                out[key] = value
            elif kind == "max":
                out[key] = max(out[key], value)
            else:
                out[key] += value
    return out


class ClientStatistics:
    """Runs on: executor, one per runner task. Keeps the latest summary of each of the
    runner's clients; :meth:`summaries` gives them per role, as the frame carries them.

    The callbacks run inside the clients' poll (the copy thread, and the commit thread of
    an exactly-once runner) and the frame is taken on the lease channel's thread: one lock.
    """

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self._lock = threading.Lock()
        self._latest: dict[Role, dict[str, Summary]] = {CONSUMER: {}, PRODUCER: {}}

    def settings(self, conf: Mapping[str, str]) -> dict[str, str]:
        """``conf`` with librdkafka's statistics on, every interval."""
        return {**conf, "statistics.interval.ms": str(self.interval_ms)}

    def callback(self, role: Role) -> Callable[[str], None]:
        """The ``stats_cb`` of a ``role`` client."""
        return lambda raw: self.on_stats(role, raw)

    def on_stats(self, role: Role, raw: str) -> None:
        """One statistics document of a client, named by librdkafka's ``name`` (unique in the
        process). A document it cannot read loses metrics, never replication."""
        try:
            doc = json.loads(raw)
            summary = summarize(role, doc)
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        with self._lock:
            self._latest[role][str(doc.get("name", ""))] = summary

    def summaries(self) -> dict[str, Summary]:
        """Per role with statistics so far, its clients' summaries as one."""
        with self._lock:
            latest = {role: list(by_client.values()) for role, by_client in self._latest.items()}
        return {role: aggregate(role, found) for role, found in latest.items() if found}


@dataclass(slots=True)
class _Runner:
    lease: int
    seq: int
    summaries: dict[str, Summary] = field(default_factory=dict)


class ClientMeters:
    """Runs on: driver. The client statistics' instruments of one pipeline.

    Counters move by each runner's increase of its clients' totals since its previous
    frame; gauges show the runners of the leases still running, summed (queues) or their
    highest (latencies), and nothing while none has reported. A lease's runners are
    forgotten when it ends (their clients are gone), as are frames of ended leases.
    """

    def __init__(self, meter: Meter, prefixes: Mapping[Role, str], pipeline: str) -> None:
        self._attrs = {"pipeline": pipeline}
        self._lock = threading.Lock()
        self._runners: dict[str, _Runner] = {}
        self._ended: set[int] = set()
        self._counters: dict[tuple[Role, str], Any] = {}
        for role, stats in STATS.items():
            for s in stats:
                name = prefixes[role] + s.name
                if s.kind == "total":
                    self._counters[(role, s.key)] = meter.create_counter(
                        name, s.unit, s.description
                    )
                else:
                    meter.create_observable_gauge(
                        name, [self._gauge(role, s.key)], s.unit, s.description
                    )

    def on_frame(self, runner: str, lease: int, seq: int, clients: Mapping[str, Summary]) -> None:
        """A runner's frame (a lease channel thread): frames older than one already seen are
        ignored, as totals only grow."""
        with self._lock:
            if lease in self._ended:
                return
            seen = self._runners.setdefault(runner, _Runner(lease, 0))
            if seq <= seen.seq:
                return
            seen.seq = seq
            increments = []
            for role in (CONSUMER, PRODUCER):
                now = clients.get(role)
                if now is None:
                    continue
                before = seen.summaries.get(role, {})
                for key, value in now.items():
                    counter = self._counters.get((role, key))
                    if counter is not None and value > before.get(key, 0):
                        increments.append((counter, value - before.get(key, 0)))
                seen.summaries[role] = dict(now)
        for counter, amount in increments:
            counter.add(amount, self._attrs)

    def lease_ended(self, lease: int) -> None:
        """Forget the lease's runners (after their summaries' frames were taken)."""
        with self._lock:
            self._ended.add(lease)
            self._runners = {k: r for k, r in self._runners.items() if r.lease != lease}

    def _gauge(self, role: Role, key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            with self._lock:
                found = [r.summaries[role] for r in self._runners.values() if role in r.summaries]
            value = aggregate(role, found).get(key)
            return [] if value is None else [Observation(value, self._attrs)]

        return observe
