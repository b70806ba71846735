"""The wall in an incident: the target stops for 60 s while records keep arriving, and a
real Prometheus with the shipped rules watches ``k2k start -t`` throughout.

What an operator would read off the wall is asserted: ``/readyz`` goes unready and ready
again, the recovery point and the lag rise and fall back, the "not replicating" alert fires
during the outage and resolves after it, and every record arrives.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest

from k2k.local import free_port
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess
from tests.helpers.prometheus import PrometheusServer

pytestmark = pytest.mark.integration

PARTITIONS = 2
#: Records per second the load writes, in batches every 0.2 s.
RATE = 200
OUTAGE_S = 60


class Load:
    """Writes ``RATE`` records/s to the source topic until stopped; keeps count."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        per_batch = RATE // 5
        while not self._stop.wait(0.2):
            first = self.written
            batch = [
                (i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [], int(time.time() * 1000))
                for i in range(first, first + per_batch)
            ]
            produce(self.bootstrap, self.topic, batch)
            self.written += per_batch


def _series(prom: PrometheusServer, *exprs: str) -> str:
    """What the wall showed over the last 5 minutes, for a failure's message."""
    return "\n".join(
        f"{expr}: {[round(float(v), 1) for _t, v in found[0]['values']] if found else 'none'}"
        for expr in exprs
        if (found := prom.query_range(expr, 300, step=5)) is not None
    )


def _copied(bootstrap: str, topic: str) -> int:
    return sum(len(records) for records in read_all(bootstrap, topic).values())


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, r.read().decode().strip()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


def _value(prom: PrometheusServer, expr: str) -> float | None:
    found = prom.query(expr)
    return float(found[0]["value"][1]) if found else None


def _below(prom: PrometheusServer, expr: str, bound: float) -> bool:
    """``expr`` has a value now, and it is below ``bound`` (0 included)."""
    value = _value(prom, expr)
    return value is not None and value < bound


def _firing(prom: PrometheusServer, alert: str, pipeline: str) -> bool:
    return any(
        a["labels"].get("alertname") == alert
        and a["labels"].get("pipeline") == pipeline
        and a["state"] == "firing"
        for a in prom.alerts()
    )


def test_a_target_outage_under_load_shows_on_the_wall_and_goes(
    clusters, own_target, prometheus_server: PrometheusServer, tmp_path, topic_name
):
    prom = prometheus_server
    topic, name = topic_name("drill"), topic_name("pdrill")
    create_topic(clusters.source, topic, PARTITIONS)
    doc = pipeline_dict(clusters, name, [topic], metrics={"health": {"unreadyAfter": "20 seconds"}})
    doc["target"]["kafka"]["common"]["bootstrap.servers"] = own_target.bootstrap
    port = free_port()
    env = {"OTEL_EXPORTER_PROMETHEUS_PORT": str(port)}
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log", "-t", env=env)
    prom.scrape(f"127.0.0.1:{port}")
    rp = f'k2k_replication_recovery_point_seconds{{pipeline="{name}"}}'
    lag = f'sum(k2k_replication_lag_records{{pipeline="{name}"}})'
    try:
        with Load(clusters.source, topic) as load:
            eventually(lambda: _readyz(port)[0] == 200, timeout=120, ignore=(OSError,))
            eventually(lambda: _below(prom, rp, 5), timeout=60, interval=1)
            own_target.stop()
            stopped = time.monotonic()
            _code, why = eventually(
                lambda: (r := _readyz(port))[0] == 503 and r, timeout=OUTAGE_S, interval=0.5
            )
            assert "unreachable" in why or "no progress" in why, why
            eventually(
                lambda: _firing(prom, "K2KNotReplicating", name), timeout=OUTAGE_S, interval=1
            )
            during = (_value(prom, rp), _value(prom, lag))
            assert time.monotonic() - stopped < OUTAGE_S + 5
            # The outage lasts OUTAGE_S whatever the wall showed: the drill's shape.
            time.sleep(max(0.0, stopped + OUTAGE_S - time.monotonic()))
            own_target.start(timeout=120)
            eventually(lambda: _readyz(port)[0] == 200, timeout=180)
            # Back below 5 s and staying there for 10 s: right after the outage the source's
            # end offsets are read afresh and the records written late in it still count.
            eventually(
                lambda: _below(prom, f"max_over_time({rp}[10s])", 5), timeout=120, interval=1
            )
            eventually(lambda: not _firing(prom, "K2KNotReplicating", name), timeout=60, interval=1)
        written = load.written
        # The series over the drill: risen with the outage, fallen back after it.
        window = time.monotonic() - stopped + 30
        points = [float(v) for _t, v in prom.query_range(rp, window)[0]["values"]]
        assert max(points) >= 30, points
        assert points[-1] < 5, points
        lags = [float(v) for _t, v in prom.query_range(lag, window)[0]["values"]]
        assert max(lags) >= RATE * 20, (during, lags)
        eventually(lambda: _copied(own_target.bootstrap, topic) >= written, timeout=120, interval=1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_series(prom, rp, lag)}") from exc
    finally:
        prom.scrape()
        assert proc.stop() == 0, proc.output()[-3000:]
    src, dst = read_all(clusters.source, topic), read_all(own_target.bootstrap, topic)
    for p in range(PARTITIONS):
        # At-least-once across an outage: every source record, in order, none lost.
        got = [(r.key, r.value, r.timestamp) for r in dst[p]]
        want = [(r.key, r.value, r.timestamp) for r in src[p]]
        assert set(got) == set(want), p
        assert sorted(set(got), key=got.index) == want, p
