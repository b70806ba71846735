"""`k2k start --reverse` and `k2k validate --reverse` refuse a pipeline that does not run
backwards in one line, exit 2, before connecting anywhere."""

from __future__ import annotations

import pytest

from tests.unit.cli.test_cli import run, with_changes

STATIC = (
    "error: replication.sink.topic: a static topic name cannot be reversed (records of every "
    "source topic share it), got 'all-events'; expected 'source', {prefix, suffix}, a "
    "one-to-one {map: ...} or {policy: alias | identity}"
)


def _static(doc):
    doc["replication"][1]["sink"]["topic"] = "all-events"


@pytest.mark.parametrize("command", ["start", "validate"])
def test_a_static_route_is_refused_in_one_line(tmp_path, command):
    result = run(command, "-f", str(with_changes(tmp_path, _static)), "--reverse")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [STATIC]


def test_hash_partitioning_is_refused_in_one_line(tmp_path):
    def hashed(doc):
        doc["replication"][1]["sink"]["partition"] = "hash"

    result = run("start", "-f", str(with_changes(tmp_path, hashed)), "--reverse")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: replication.sink.partition: cannot run in reverse")


def test_validate_reverse_with_check_is_a_usage_error(tmp_path):
    result = run(
        "validate", "-f", str(with_changes(tmp_path, lambda d: None)), "--reverse", "--check"
    )
    assert result.returncode == 2
    assert "--check and --reverse" in result.stderr
