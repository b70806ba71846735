"""The shipped Prometheus rules and Grafana dashboard, offline (issue 51): ``promtool`` checks
the rule file and runs its unit tests (alerts fired by series shaped like incidents), and
every PromQL expression of the dashboard, and every alert in its ``bool`` form, parses.

``promtool check rules`` is Prometheus' own PromQL parser: each expression is checked as a
recording rule of a generated file, one group per expression so that an error names it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.helpers.prometheus import (
    DASHBOARD,
    REPO,
    RULES,
    as_bool,
    dashboard_exprs,
    promtool,
    rule_exprs,
    substitute,
)

RULE_TESTS = REPO / "tests/prometheus/k2k-rules-test.yml"

#: Every alert the issue asks for, and those the brief adds.
ALERTS = {
    "K2KLagApproachingRetention",
    "K2KRecoveryPointOverObjective",
    "K2KNotReplicating",
    "K2KForeignWrites",
    "K2KMemberFlapping",
    "K2KNotReady",
    "K2KDown",
    "K2KErrors",
    "K2KSourceRecordsLost",
}


def test_promtool_check_rules_passes():
    result = promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_fire_each_alert_from_incident_shaped_series():
    result = promtool("test", "rules", RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert tested == ALERTS


def test_every_alert_has_for_severity_and_annotations_naming_the_pipeline():
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    alerts = [r for r in rules if "alert" in r]
    assert {r["alert"] for r in alerts} == ALERTS
    docs = (REPO / "docs/metrics.md").read_text()
    for rule in alerts:
        name = rule["alert"]
        assert "for" in rule, name
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        notes = rule["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(notes), name
        if name != "K2KDown":  # no pipeline label on a target that cannot be scraped
            assert "$labels.pipeline" in notes["summary"], name
        page, _, anchor = notes["runbook_url"].partition("#")
        assert page == "docs/metrics.md" and f"### {name}" in docs, (name, anchor)
        assert anchor == name.lower(), name
    assert all(r["record"].startswith("k2k:") for r in rules if "record" in r)


def test_dashboard_uses_the_datasource_variable_and_rate_interval():
    doc = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    for name in ("pipeline", "instance"):
        assert variables[name]["query"]["query"].startswith("label_values("), name
    panels = [p for p in doc["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in doc["panels"]}) == len(doc["panels"])
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        for target in panel["targets"]:
            windows = re.findall(r"(?:rate|increase)\([^\[]*\[([^\]]+)\]", target["expr"])
            assert set(windows) <= {"$__rate_interval"}, (panel["title"], target["expr"])


def test_every_dashboard_and_alert_expression_parses(tmp_path: Path):
    exprs = [(where, substitute(expr, "k2k")) for where, expr in dashboard_exprs()]
    exprs += [(f"{name} as bool", as_bool(expr)) for name, expr, alert in rule_exprs() if alert]
    groups = [
        {"name": where, "rules": [{"record": f"wall:expr_{i}", "expr": expr}]}
        for i, (where, expr) in enumerate(exprs)
    ]
    path = tmp_path / "exprs.yml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_as_bool_turns_comparisons_into_bool_ones_outside_matchers_and_strings():
    expr = 'sum by (p) (x{a!="b",c=~">"}[5m]) > 0.8 or max(y) == 0 and z <= bool 1'
    assert as_bool(expr) == (
        'sum by (p) (x{a!="b",c=~">"}[5m]) > bool 0.8 or max(y) == bool 0 and z <= bool 1'
    )
