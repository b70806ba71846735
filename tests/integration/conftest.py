"""Fixtures for the tests that need real brokers (and mostly Spark).

* ``clusters`` (session): ``.source`` / ``.target`` bootstrap strings. With
  ``K2K_SOURCE_BOOTSTRAP`` and ``K2K_TARGET_BOOTSTRAP`` set, those clusters are used as they are
  (bring your own, e.g. from ``k2k local up``); otherwise one embedded pair is started on ports
  the OS picks and stopped when the session ends. It lives here, below ``tests/integration``,
  so that the unit and bench trees cannot ask for it.
* ``topic_name`` / ``group_name`` (function): factories of unique names, because the pair is
  shared by the whole session and tests are isolated by names, not by fresh clusters.
* ``spark`` (session), ``own_source`` / ``own_target`` (function), ``tls_broker`` (session).
* ``running_pipeline`` (function): ``k2k start`` as a process, returned once it committed
  the progress the test waits for; whatever the test left running is killed after it.
* ``broker_clusters`` (session): a three-broker source and a three-broker target cluster,
  started the first time a test asks for them (the drills that restart and kill brokers;
  ``tests/helpers/brokers.py`` does that), always embedded.

Every test that uses ``clusters`` is marked ``integration`` automatically, so
``pytest -m "not integration"`` runs exactly the tests that need no broker.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from k2k.local import ClusterPair, LocalCluster, free_port
from tests.helpers.kafka import Clusters
from tests.helpers.pipelines import Progress, wait_for_progress
from tests.helpers.procs import K2KProcess
from tests.helpers.prometheus import prometheus_server  # noqa: F401  (a session fixture)
from tests.helpers.tlsbroker import TlsBroker, running_tls_broker

SOURCE_ENV = "K2K_SOURCE_BOOTSTRAP"
TARGET_ENV = "K2K_TARGET_BOOTSTRAP"

#: Free disk space the embedded brokers need for one run of the suite (it writes about
#: 2 GB), with room to spare. Less, and a broker fails mid-run when its disk fills up.
MIN_FREE_BYTES = 5 << 30

#: The embedded pair while it runs (empty before, after, and with clusters brought by the
#: environment).
_embedded: list[LocalCluster] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs real brokers, whether or not its module says so."""
    for item in items:
        if {"clusters", "broker_clusters"} & set(getattr(item, "fixturenames", ())):
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

    from k2k.local import ensure_kafka_installed, start_pair

    ensure_kafka_installed()
    data_root = tmp_path_factory.mktemp("kafka")
    free = shutil.disk_usage(data_root).free
    if free < MIN_FREE_BYTES:
        pytest.exit(
            f"only {free / 2**30:.1f} GiB free on the disk of {data_root}; the embedded "
            f"brokers need at least {MIN_FREE_BYTES / 2**30:.0f} GiB for the test suite",
            returncode=1,
        )
    pair = start_pair(
        data_root,
        free_port(),
        free_port(),
        timeout=120,
        owner_pid=os.getpid(),  # brokers die with this session even if it is killed
    )
    _embedded.extend(pair)
    try:
        yield Clusters(pair.source.bootstrap, pair.target.bootstrap)
    finally:
        _embedded.clear()
        pair.stop()


#: Brokers per cluster of ``broker_clusters``: three replicas, two in sync, so one broker
#: at a time may be away.
DRILL_BROKERS = 3


@pytest.fixture(scope="session")
def broker_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterPair]:
    """A source and a target cluster of three brokers each, for the drills that stop and kill
    brokers (so never clusters brought by the environment). Started only when a test asks:
    six JVMs cost memory and CPU that most of the suite does not need. Heaps are small; the
    drills' load is light."""
    from k2k.local import ensure_kafka_installed, start_pair

    ensure_kafka_installed()
    started = time.monotonic()
    pair = start_pair(
        tmp_path_factory.mktemp("kafka-brokers"),
        0,
        0,
        timeout=180,
        brokers=DRILL_BROKERS,
        heap="384m",
        owner_pid=os.getpid(),  # brokers die with this session even if it is killed
    )
    print(
        f"\n{DRILL_BROKERS}-broker source and target started in {time.monotonic() - started:.0f} s"
    )
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture(autouse=True)
def _embedded_brokers_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the embedded pair: if a broker died (disk full, out of memory),
    end the session naming it, with its log, instead of letting every later test fail on
    "connection refused"."""
    yield
    if "clusters" not in request.fixturenames:
        return
    for cluster in _embedded:
        if not cluster.is_running():
            pytest.exit(
                f"the embedded {cluster.name} broker died during {request.node.nodeid}. "
                f"{cluster.log_tail(40)}",
                returncode=1,
            )


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


@pytest.fixture(scope="session")
def spark():
    """A SparkSession, as a program that embeds k2k passes one (k2k itself starts a bare
    SparkContext)."""
    from pyspark.sql import SparkSession

    from k2k.spark.session import start_spark, stop_spark

    sc = start_spark("k2k-tests", "local[2]", {})
    yield SparkSession(sc)
    stop_spark(sc)


def _own_cluster(name: str, tmp_path_factory):
    cluster = LocalCluster(name, free_port(), tmp_path_factory.mktemp(name), owner_pid=os.getpid())
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def own_target(tmp_path_factory):
    """A target cluster of the test's own, so that stopping it disturbs no other test."""
    yield from _own_cluster("outage-target", tmp_path_factory)


@pytest.fixture
def own_source(tmp_path_factory):
    """A source cluster of the test's own, so that stopping it disturbs no other test."""
    yield from _own_cluster("outage-source", tmp_path_factory)


@pytest.fixture(scope="session")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    """One TLS broker (SSL and SASL_SSL listeners, ACLs) for the security tests."""
    with running_tls_broker(tmp_path_factory.mktemp("tls")) as broker:
        yield broker


@pytest.fixture
def running_pipeline(tmp_path: Path) -> Iterator[Callable[..., K2KProcess]]:
    """``running_pipeline(path, progress, *args, env=None, log="k2k.log", timeout=180)``:
    ``k2k start -v -f path *args`` as a :class:`K2KProcess` (output in ``tmp_path / log``),
    returned once it committed ``progress`` (see :func:`wait_for_progress`); killed at once
    if it does not get there. The test stops or kills it; one still running at teardown is
    killed, so a failed assertion never leaves a driver and its JVM behind."""
    started: list[K2KProcess] = []

    def start(
        path: Path,
        progress: Progress,
        *args: str,
        env: dict[str, str] | None = None,
        log: str = "k2k.log",
        timeout: float = 180,
    ) -> K2KProcess:
        proc = K2KProcess(path, tmp_path / log, *args, env=env)
        started.append(proc)
        try:
            wait_for_progress(path, progress, timeout)
        except BaseException:
            proc.kill()
            raise
        return proc

    yield start
    for proc in started:
        if proc.proc.poll() is None:
            proc.kill()
