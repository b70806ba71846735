"""The status page in a real browser: headless Chromium (Debian's ``chromium``, installed by
``scripts/setup``) driven by Playwright opens ``/`` of a running ``k2k start -t`` under a
light continuous load and checks that the charts render, show what ``/api/status`` says, and
move; a screenshot is kept as a test artifact. ``k2k status --serve`` serves the same page
from the control topics.

The screenshot goes to ``$K2K_TEST_ARTIFACTS/status-page.png`` (default
``build/test-artifacts/``), created if missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from k2k.local import free_port
from tests.helpers.kafka import create_topic, eventually
from tests.helpers.load import LiveLoad
from tests.helpers.paths import REPO
from tests.helpers.pipelines import K2K, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
#: Flags for a browser that talks to nothing but the page under test.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PARTITIONS = 2
#: Records per second of the load: enough to move the charts, light on a shared machine.
RATE = 40.0


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _api_status(port: int) -> dict[str, Any]:
    code, body = _get(port, "/api/status")
    assert code == 200, body
    doc: dict[str, Any] = json.loads(body)
    return doc


def artifacts_dir() -> Path:
    """Where tests keep files for people to look at after the run."""
    path = Path(os.environ.get("K2K_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Running:
    """The pipeline under load, its file and the port of its page."""

    def __init__(self, name: str, topic: str, path: Path, port: int, proc: K2KProcess) -> None:
        self.name, self.topic, self.path, self.port, self.proc = name, topic, path, port, proc


@pytest.fixture(scope="module")
def running(clusters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """``k2k start -t`` on a topic under a continuous load, once it committed progress."""
    name, topic = "status-page", "status-page-src"
    tmp = tmp_path_factory.mktemp("status-page")
    create_topic(clusters.source, topic, PARTITIONS)
    load = LiveLoad(clusters.source, topic, PARTITIONS, rate=RATE, seed=51, chunk=20)
    path = write_pipeline(tmp, pipeline_dict(clusters, name, [topic]))
    port = free_port()
    env = {"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": str(port)}
    proc = K2KProcess(path, tmp / "k2k.log", "-t", env=env)
    try:
        eventually(
            lambda: _committed(_api_status(port)), timeout=240, interval=1.0, ignore=(OSError,)
        )
        yield Running(name, topic, path, port, proc)
    finally:
        code = proc.stop()
        load.stop()
        assert code == 0, proc.output()[-3000:]


def _committed(doc: dict[str, Any]) -> int:
    """The sum of committed offsets (0 before the first commit)."""
    return sum(p["committed"] or 0 for p in doc["partitions"])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _page_numbers(page: Any) -> dict[str, Any]:
    """What the page shows: the totals' data-values and the partitions table's committed."""
    return page.evaluate(
        """() => ({
            observedAt: document.getElementById('observed-at').dataset.value,
            recordsBehind: document.getElementById('records-behind').dataset.value,
            committed: document.getElementById('committed-total').dataset.value,
            rows: Array.from(document.querySelectorAll('#partitions tbody tr')).map(tr =>
                [tr.dataset.topic, Number(tr.dataset.partition),
                 tr.querySelector('.committed').dataset.value]),
        })"""
    )


def _api_numbers(doc: dict[str, Any]) -> dict[str, Any]:
    """The same numbers from an ``/api/status`` document, as the page shows them."""
    return {
        "observedAt": str(doc["observedAt"]),
        "recordsBehind": str(doc["totals"]["recordsBehind"]),
        "committed": str(_committed(doc)),
        "rows": [
            [p["topic"], p["partition"], "" if p["committed"] is None else str(p["committed"])]
            for p in doc["partitions"]
        ],
    }


def _chart(page: Any, key: str) -> dict[str, Any]:
    """A uPlot chart's series count and points, and its canvas size."""
    return page.evaluate(
        """(key) => {
            const u = window.k2kStatus.charts[key];
            if (!u) return null;
            const c = u.root.querySelector('canvas');
            return {series: u.series.length, points: u.data[0].length,
                    values: u.data[1].filter(v => v !== null).length,
                    canvas: c ? [c.width, c.height] : null};
        }""",
        key,
    )


def test_live_page_renders_charts_with_the_live_values_and_updates(running: Running, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"http://127.0.0.1:{running.port}/")
        page.wait_for_function(
            "() => window.k2kStatus && window.k2kStatus.charts.recordsBehind"
            " && window.k2kStatus.charts.recordsBehind.data[0].length > 1",
            timeout=60_000,
        )
        assert page.locator("#pipeline").inner_text() == running.name
        assert page.locator("#mode").inner_text() == "at-least-once"
        for key in ("recordsPerSecond", "recordsBehind", "recoveryPointSeconds"):
            chart = _chart(page, key)
            assert chart is not None, key
            assert chart["series"] == 2 and chart["points"] > 1, (key, chart)
            assert chart["canvas"] and min(chart["canvas"]) > 0, (key, chart)
        assert _chart(page, "recordsPerSecond")["values"] >= 1  # a rate between two samples

        # The page shows what /api/status says (the same sample: same observedAt).
        def same() -> dict[str, Any] | None:
            shown = _page_numbers(page)
            return shown if shown == _api_numbers(_api_status(running.port)) else None

        shown = eventually(same, timeout=30, interval=0.2)
        assert [r[:2] for r in shown["rows"]] == [[running.topic, p] for p in range(PARTITIONS)]
        assert int(shown["committed"]) > 0

        # It moves: more samples in the charts and more records committed under the load.
        points = _chart(page, "recordsBehind")["points"]
        eventually(
            lambda: (
                _chart(page, "recordsBehind")["points"] > points
                and int(_page_numbers(page)["committed"]) > int(shown["committed"])
            ),
            expected=True,
            timeout=60,
            interval=0.5,
        )
        # The badge is the pipeline's readiness, as /readyz answers it: replicating or
        # caught up under a light load.
        assert page.locator("#ready").get_attribute("data-ready") == "true"
        shot = artifacts_dir() / "status-page.png"
        shot.unlink(missing_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        page.close()
    code, body = _get(running.port, "/readyz")
    assert code == 200, body
    assert body.startswith((b"ready: caught up", b"ready: replicating, ")), body
    assert _get(running.port, "/healthz") == (200, b"ok\n")
    assert b"k2k_" in _get(running.port, "/metrics")[1]


def test_status_serve_shows_the_pipeline_from_the_control_topics(running: Running, tmp_path):
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [*K2K, "status", "-f", str(running.path), "--serve", "--listen", f"127.0.0.1:{port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        doc = eventually(lambda: _api_status(port), timeout=60, interval=0.5, ignore=(OSError,))
        assert doc["v"] == 1 and doc["source"] == "control-topics"
        assert doc["pipeline"] == running.name
        assert {(p["topic"], p["partition"]) for p in doc["partitions"]} == {
            (running.topic, p) for p in range(PARTITIONS)
        }
        assert _get(port, "/readyz") == (200, f"ready: {doc['ready']['reason']}\n".encode())
        assert doc["ready"]["reason"].startswith("1 members alive")
        code, page = _get(port, "/")
        assert code == 200 and b"static/status.js" in page
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()
