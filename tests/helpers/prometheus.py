"""A real Prometheus for the tests, and the PromQL the repository ships (issue 51).

* :class:`PrometheusServer`: the Debian ``prometheus`` binary on a free port, scraping job
  ``k2k`` every second from a ``file_sd`` file the test writes (:meth:`~PrometheusServer.scrape`),
  evaluating ``deploy/prometheus/k2k-rules.yml`` every second, its storage in a temporary
  directory. ``prometheus_server`` is the session fixture around it.
* :func:`dashboard_exprs`, :func:`rule_exprs`: every expression of the shipped dashboard and
  rule file; :func:`substitute` puts values in for Grafana's variables; :func:`as_bool` turns
  an alert's comparisons into ``bool`` ones so that it returns 0/1 instead of nothing.

Needs ``prometheus`` and ``promtool`` on PATH (``scripts/install-prometheus``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from k2k.local import free_port
from tests.helpers.kafka import eventually

__all__ = [
    "DASHBOARD",
    "RULES",
    "PrometheusServer",
    "as_bool",
    "dashboard_exprs",
    "prometheus_server",
    "promtool",
    "rule_exprs",
    "substitute",
]

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy/grafana/k2k-replication.json"
RULES = REPO / "deploy/prometheus/k2k-rules.yml"

#: The job name the shipped rules assume for k2k's targets (K2KDown).
JOB = "k2k"


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``promtool ARGS``, its output captured; skips the test when promtool is missing."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.skip("promtool is not installed (scripts/install-prometheus installs it)")
    return subprocess.run(
        [exe, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def dashboard_exprs(path: Path = DASHBOARD) -> list[tuple[str, str]]:
    """``(panel id, title and refId, expr)`` for every query of the dashboard, rows included."""
    found: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                where = f"panel {panel['id']} {panel['title']!r} {target['refId']}"
                found.append((where, target["expr"]))
            walk(panel.get("panels", []))

    walk(json.loads(path.read_text())["panels"])
    return found


def rule_exprs(path: Path = RULES) -> list[tuple[str, str, bool]]:
    """``(name, expr, is_alert)`` for every rule of the file: the recorded series' name, or
    the alert's name and severity."""
    found = []
    for group in yaml.safe_load(path.read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                name = f"alert {rule['alert']} ({rule['labels']['severity']})"
                found.append((name, rule["expr"], True))
            else:
                found.append((f"rule {rule['record']}", rule["expr"], False))
    return found


def substitute(expr: str, pipeline: str = ".*", instance: str = ".*", app: str = ".*") -> str:
    """The query Grafana would send: its variables replaced (``$__rate_interval`` by 30 s,
    a little more than the 1 s scrape needs)."""
    values = {
        "$__rate_interval": "30s",
        "$__range": "5m",
        "$pipeline": pipeline,
        "$instance": instance,
        "$app": app,
    }
    for name, value in values.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"a Grafana variable is left in {expr!r}"
    return expr


_COMPARISON = re.compile(r"(==|!=|>=|<=|>(?!=)|<(?!=))(?!\s*bool\b)")


def as_bool(expr: str) -> str:
    """``expr`` with every comparison operator outside label matchers, ranges and strings
    made a ``bool`` comparison: what an alert compares, as 0/1 for every series it sees.

    >>> as_bool('sum by (p) (x{a!="b"}) > 0.8 or y{z=~">"} == 0')
    'sum by (p) (x{a!="b"}) > bool 0.8 or y{z=~">"} == bool 0'
    """
    out: list[str] = []
    depth, quote, i = 0, "", 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            quote = "" if ch == quote and expr[i - 1] != "\\" else quote
        elif ch in "\"'`":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif depth == 0 and (match := _COMPARISON.match(expr, i)):
            out.append(f"{match.group(1)} bool")
            i = match.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


class PrometheusServer:
    """``prometheus`` on 127.0.0.1:<free port>: scrape and rule evaluation every second,
    job ``k2k`` from a ``file_sd`` file, the shipped rules, TSDB under ``workdir``,
    ``--web.enable-lifecycle``."""

    def __init__(self, workdir: Path, rule_files: list[Path] | None = None) -> None:
        exe = shutil.which("prometheus")
        if exe is None:
            pytest.skip("prometheus is not installed (scripts/install-prometheus installs it)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._targets = workdir / "k2k-targets.json"
        self._targets.write_text("[]")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in (rule_files if rule_files is not None else [RULES])],
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "scrape_interval": "1s",
                    "scrape_timeout": "1s",
                    "file_sd_configs": [{"files": [str(self._targets)], "refresh_interval": "1s"}],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self._log = (workdir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                exe,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.log = workdir / "prometheus.log"
        eventually(self._ready, timeout=60, interval=0.2, ignore=(OSError,))

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {self.log.read_text()[-2000:]}")
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)

    def scrape(self, *addresses: str, labels: dict[str, str] | None = None) -> None:
        """Scrape exactly ``addresses`` (``host:port``) under job ``k2k`` from now on."""
        group = {"targets": list(addresses), "labels": labels or {}}
        tmp = self._targets.with_suffix(".tmp")
        tmp.write_text(json.dumps([group] if addresses else []))
        tmp.replace(self._targets)  # atomic: Prometheus never reads half a file

    def api(self, path: str, **params: str | float) -> Any:
        """``GET /api/v1/<path>``'s ``data``; a PromQL error raises with Prometheus' message."""
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as r:
                body = json.load(r)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
            raise AssertionError(f"{path} {params}: {body.get('error')}") from exc
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) ``expr`` gives now."""
        data = self.api("query", query=expr)
        return data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]

    def query_range(self, expr: str, seconds: float, step: float = 1) -> list[dict[str, Any]]:
        """The series ``expr`` gives over the last ``seconds``, as a Grafana panel asks."""
        now = time.time()
        data = self.api("query_range", query=expr, start=now - seconds, end=now, step=step)
        return list(data["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pending or firing now."""
        return list(self.api("alerts")["alerts"])

    def up(self) -> dict[str, float]:
        """``up`` per scraped instance."""
        return {
            s["metric"]["instance"]: float(s["value"][1]) for s in self.query(f'up{{job="{JOB}"}}')
        }

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        self._log.close()


@pytest.fixture(scope="session")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """One real Prometheus for the session, with the shipped rules; tests choose its
    targets with :meth:`PrometheusServer.scrape`."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"))
    try:
        yield server
    finally:
        server.stop()
