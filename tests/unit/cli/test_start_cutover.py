"""``k2k start`` once ``k2k cutover`` drained the pipeline: exit 0 and one line naming the
cut-over (the run itself is a fake here; tests/integration/test_cutover_members.py runs it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import k2k.api
from k2k.cli import main
from k2k.formats import CutoverRecord
from k2k.observability.stats import PipelineStats

DOC: dict[str, Any] = {
    "name": "cut-cli",
    "source": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:1"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:2"}}},
    "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": "source"}}],
}
LINE = (
    "k2k start cut-cli: stopped: the pipeline was cut over to the target by k2k cutover "
    "(cut at 2023-11-14T22:13:20Z, host host-a)"
)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``k2k start`` configures the process's logging: put it back after each test."""
    root = logging.getLogger()
    saved = list(root.handlers), logging.getLogger("k2k").level
    yield
    root.handlers[:] = saved[0]
    logging.getLogger("k2k").setLevel(saved[1])


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, leases: int) -> Any:
    record = CutoverRecord(
        "cut-cli", "cut-cli", ("cut", "drain"), {}, {}, (), (), 1_700_000_000_000, 1, "host-a"
    )

    class _Replicator:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def run(self, until_caught_up: bool = False) -> PipelineStats:
            return PipelineStats(leases=leases, cutover=record)

        def stop(self) -> None:
            pass

    monkeypatch.setattr(k2k.api, "Replicator", _Replicator)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(DOC))
    log = tmp_path / "termination-log"
    return CliRunner().invoke(main, ["start", "-f", str(path), "-l", str(log)])


def test_a_start_after_the_cut_over_exits_0_with_one_line(monkeypatch, tmp_path):
    result = _run(monkeypatch, tmp_path, leases=0)
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines()[-1] == LINE
    assert "replicated" not in result.stderr  # it copied nothing: no summary


def test_a_member_stopped_by_the_cut_over_says_so_after_its_summary(monkeypatch, tmp_path):
    result = _run(monkeypatch, tmp_path, leases=3)
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == LINE
    assert lines[-2].startswith("cut-cli: replicated 0 records")
