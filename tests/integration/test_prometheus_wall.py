"""The wall on a real Prometheus (issue 51): a real Prometheus scrapes a running
``k2k start -t`` (at-least-once, offset mappings on, under a light continuous load) and a
running Offset Mapping app every second, with the shipped rules loaded; then every PromQL
expression of the Grafana dashboard and of the rule file returns data, every alert returns
data as a ``bool`` comparison, and a record another producer writes on the target fires
K2KForeignWrites while nothing else fires.

A query that returns nothing would be a panel reading "No data" on the product owners' wall;
the failure names each such expression.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from k2k.local.ports import free_ports
from tests.helpers.kafka import create_topic, eventually, produce
from tests.helpers.load import LiveLoad
from tests.helpers.pipelines import K2K, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess
from tests.helpers.prometheus import (
    REPO,
    PrometheusServer,
    as_bool,
    dashboard_exprs,
    rule_exprs,
    substitute,
)
from tests.integration.test_offset_mapping_app import app_config, commit_source

pytestmark = pytest.mark.integration

#: Records per second of the load: light, but every partition gets a run every second.
RATE = 100


def _has_data(result: list[dict[str, Any]]) -> bool:
    """A series with at least one number (NaN, what a quantile of no observations gives,
    is drawn as nothing)."""
    return any(not math.isnan(float(v)) for s in result for _t, v in s.get("values", []))


def _expressions(pipeline: str) -> list[tuple[str, str]]:
    """``(where, query)`` for every dashboard panel query, rule and alert (as ``bool``)."""
    found = [(where, substitute(expr, pipeline)) for where, expr in dashboard_exprs()]
    for name, expr, alert in rule_exprs():
        found.append((f"{name} as bool" if alert else name, as_bool(expr) if alert else expr))
    return found


def _silent(prom: PrometheusServer, exprs: list[tuple[str, str]], since: float) -> list[str]:
    """The expressions that returned no data since ``since``, each with its query."""
    seconds = max(5.0, time.time() - since)
    return [
        f"{where}: {expr}"
        for where, expr in exprs
        if not _has_data(prom.query_range(expr, seconds))
    ]


def _metric_names(exprs: list[tuple[str, str]]) -> set[str]:
    names = set()
    for _where, expr in exprs:
        # Not the labels of a by/on clause: those are followed by "," or ") (".
        names |= set(re.findall(r"\b(?:k2k|messaging|process)_\w+\b(?!\s*(?:,|\)\s*\())", expr))
    return names


def _undocumented(names: set[str], prom: PrometheusServer) -> set[str]:
    """Names neither scraped nor in docs/metrics.md: a typo a fallback (``or vector(0)``)
    would hide."""
    scraped = set(prom.api("label/__name__/values"))
    docs = (REPO / "docs/metrics.md").read_text()
    return {
        n
        for n in names - scraped
        if f"`{re.sub(r'_(bucket|sum|count)$', '', n)}`" not in docs and f"({n})" not in docs
    }


def _app(tmp_path: Path, doc: dict[str, Any], port: int) -> subprocess.Popen[bytes]:
    """``k2k offset-mapping start -t`` as a process, ``/metrics`` on ``port``."""
    path = tmp_path / "offset-mapping.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    log = (tmp_path / "app.log").open("wb")
    return subprocess.Popen(
        [*K2K, "offset-mapping", "start", "-t", "-f", str(path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "OTEL_EXPORTER_PROMETHEUS_PORT": str(port)},
    )


class _MovingGroup:
    """A consumer group on the source that commits 5 records further every second, as a
    live consumer would: the app has a new position to translate in every pass."""

    def __init__(self, clusters: Any, group: str, topic: str) -> None:
        self.stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(clusters, group, topic), daemon=True
        )

    def __enter__(self) -> _MovingGroup:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self._thread.join()

    def _run(self, clusters: Any, group: str, topic: str) -> None:
        position = 5
        while True:
            commit_source(clusters, group, {(topic, 0): position, (topic, 1): position})
            position += 5
            if self.stop.wait(1.0):
                return


def _tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.exists() else "(not started)"


def _firing(prom: PrometheusServer, pipeline: str) -> set[str]:
    return {
        a["labels"]["alertname"]
        for a in prom.alerts()
        if a["state"] == "firing" and a["labels"].get("pipeline") == pipeline
    }


def test_every_dashboard_and_rule_expression_returns_data_from_a_live_pipeline(
    clusters,
    prometheus_server: PrometheusServer,
    topic_name: Callable[[str], str],
    group_name: Callable[[str], str],
    tmp_path: Path,
):
    prom = prometheus_server
    name, topic, mappings = group_name("wall"), topic_name("src"), topic_name("map")
    group = group_name("consumer")
    create_topic(clusters.source, topic, 2)
    load = LiveLoad(clusters.source, topic, 2, rate=RATE, seed=51, chunk=25)
    doc = pipeline_dict(
        clusters,
        name,
        [topic],
        features={"offsetMapping": "enabled"},
        offsetMapping={"topic": mappings},
    )
    k2k_port, app_port = free_ports(2)
    started = time.time()
    proc = K2KProcess(
        write_pipeline(tmp_path, doc),
        tmp_path / "k2k.log",
        "-t",
        env={"OTEL_EXPORTER_PROMETHEUS_PORT": str(k2k_port)},
    )
    prom.scrape(f"127.0.0.1:{k2k_port}", f"127.0.0.1:{app_port}")
    exprs = _expressions(name)
    app: subprocess.Popen[bytes] | None = None
    try:
        sent = f'sum(messaging_client_sent_messages_total{{pipeline="{name}"}})'
        eventually(
            lambda: prom.query(sent) and float(prom.query(sent)[0]["value"][1]) > 0,
            timeout=120,
            interval=0.5,
        )
        # The app, now that the mapping topic is there; a consumer group for it to
        # translate; a record no pipeline wrote on the target.
        app_doc = app_config(clusters, f"{name}-app", mappings, [group])
        app_doc["groups"]["pollInterval"] = "1 second"
        app = _app(tmp_path, app_doc, app_port)
        produce(clusters.target, topic, [(0, b"foreign", b"not replicated", None, None)])
        with _MovingGroup(clusters, group, topic):
            eventually(lambda: _silent(prom, exprs, started), expected=[], timeout=60, interval=2)
        # Both processes answer their probes: the app has passed, the pipeline replicates.
        for port, ready in ((app_port, b"ready: last pass "), (k2k_port, b"ready: ")):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                assert r.read().startswith(ready), port
        firing = eventually(lambda: _firing(prom, name), expected={"K2KForeignWrites"}, timeout=30)
        assert firing == {"K2KForeignWrites"}
        assert not _undocumented(_metric_names(exprs), prom)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n--- silent:\n"
            + "\n".join(_silent(prom, exprs, started))
            + f"\n--- k2k log:\n{proc.output()[-3000:]}"
            + f"\n--- app log:\n{_tail(tmp_path / 'app.log')}"
        ) from exc
    finally:
        prom.scrape()
        load.stop()
        if app is not None:
            app.terminate()
            assert app.wait(60) == 0, (tmp_path / "app.log").read_text()[-3000:]
        assert proc.stop() == 0, proc.output()[-3000:]
