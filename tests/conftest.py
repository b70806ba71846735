"""Fixtures shared by every test: the real Kafka cluster pair and unique names.

* ``clusters`` (session): ``.source`` / ``.target`` bootstrap strings. With
  ``K2K_SOURCE_BOOTSTRAP`` and ``K2K_TARGET_BOOTSTRAP`` set, those clusters are used as they are
  (bring your own, e.g. from ``k2k local up``); otherwise one embedded pair is started on ports
  the OS picks and stopped when the session ends. It is created lazily, so a run of unit tests
  never starts a broker.
* ``topic_name`` / ``group_name`` (function): factories of unique names, because the pair is
  shared by the whole session and tests are isolated by names, not by fresh clusters.

Every test that uses ``clusters`` is marked ``integration`` automatically, so
``pytest -m "not integration"`` runs exactly the tests that need no broker.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

SOURCE_ENV = "K2K_SOURCE_BOOTSTRAP"
TARGET_ENV = "K2K_TARGET_BOOTSTRAP"


@dataclass(frozen=True)
class Clusters:
    """Bootstrap addresses of the two clusters the tests replicate between."""

    source: str
    target: str


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs real brokers, whether or not its module says so."""
    for item in items:
        if "clusters" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    """The source and target clusters: brought by the environment, or one embedded pair."""
    source, target = os.environ.get(SOURCE_ENV), os.environ.get(TARGET_ENV)
    if source or target:
        if not (source and target):
            pytest.fail(f"set both {SOURCE_ENV} and {TARGET_ENV} (or neither)", pytrace=False)
        yield Clusters(source, target)
        return

    from k2k.local import ensure_kafka_installed, free_port, start_pair

    ensure_kafka_installed()
    pair = start_pair(
        tmp_path_factory.mktemp("kafka"),
        free_port(),
        free_port(),
        timeout=120,
        owner_pid=os.getpid(),  # brokers die with this session even if it is killed
    )
    try:
        yield Clusters(pair.source.bootstrap, pair.target.bootstrap)
    finally:
        pair.stop()


def _short_test_name(node_name: str, limit: int = 32) -> str:
    """A test's name reduced to characters legal in topic names, without ``test_``."""
    name = node_name.removeprefix("test_")
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-.")[:limit].rstrip("-.") or "test"


def _name_factory(prefix: str, request: pytest.FixtureRequest) -> Callable[[str], str]:
    short = _short_test_name(request.node.name)

    def make(label: str = "") -> str:
        return "-".join(part for part in (prefix, short, label, uuid.uuid4().hex[:8]) if part)

    return make


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Factory of unique topic names ``t-<test>-[<label>-]<uuid8>``; each call is a new name."""
    return _name_factory("t", request)


@pytest.fixture
def group_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Factory of unique consumer-group (or pipeline) names ``g-<test>-[<label>-]<uuid8>``."""
    return _name_factory("g", request)
