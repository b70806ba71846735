"""A continuous lease's watcher: a change that cannot be made in place ends the lease."""

from __future__ import annotations

import logging

import pytest

from k2k.errors import ClusterError, ReplicationError
from k2k.pipeline.driver.watcher import LeaseWatch


def _watch(adjust) -> LeaseWatch:
    return LeaseWatch(None, ("m1",), {}, adjust)  # type: ignore[arg-type]


def test_a_change_without_an_answer_ends_the_lease_with_a_warning(caplog):
    def adjust(watch: LeaseWatch, topics_changed: bool) -> bool:
        raise ClusterError("source cluster at h:1 failed while listing topics: timed out")

    with caplog.at_level(logging.WARNING, logger="k2k.planner"):
        assert _watch(adjust).adjust(True) is False
    [warning] = caplog.records
    assert "ending the lease to plan it again" in warning.getMessage()
    assert "failed while listing topics" in warning.getMessage()


def test_a_change_made_in_place_keeps_the_lease_and_other_faults_propagate():
    assert _watch(lambda w, changed: True).adjust(False) is True
    assert _watch(None).adjust(False) is False

    def broken(watch: LeaseWatch, topics_changed: bool) -> bool:
        raise ReplicationError("a record the target refuses")

    with pytest.raises(ReplicationError):
        _watch(broken).adjust(False)
