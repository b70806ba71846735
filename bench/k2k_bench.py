"""k2k itself as a benchmark contender: ``k2k start`` on a generated pipeline file.

Backlog runs use ``--until-caught-up`` (the process exits once every partition reached the
end offsets it saw at start); steady runs use a plain ``k2k start``, stopped with SIGTERM.
The pipeline keeps partitions (``partition: source``), headers and timestamps, as the other
contenders do, and runs on ``local[2]`` (one runner task per core).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, ClassVar

import yaml

from bench.contender import Contender, Ctx
from bench.mm2 import (
    HERE,
    TARGET_ALIAS,
    MirrorMaker2AtLeastOnce,
    MirrorMaker2ExactlyOnce,
    render_config,
)

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "K2KAtLeastOnce",
    "K2KAtLeastOnceClientStatistics",
    "K2KAtLeastOnceMappings",
    "K2KAtLeastOnceTelemetry",
    "K2KExactlyOnce",
    "K2KExactlyOnceFastCommit",
    "K2KExactlyOnceMappings",
    "K2KFromMM2File",
    "K2KFromMM2FileExactlyOnce",
]


_SPARK_ONCE = (
    "from k2k.spark.session import start_spark, stop_spark; "
    "stop_spark(start_spark('k2k-bench-setup', 'local[2]', {}))"
)


class K2KAtLeastOnce(Contender):
    """Default settings: commit batches of 1000 records or 2 seconds.

    :param lease_duration: ``spark.leaseDuration`` as k2k reads it (e.g. "1 minute"); None:
        k2k's default (the long W2 sets it shorter for a smoke run).
    :param discovery_interval: ``replication[0].source.discoveryInterval``; None: k2k's
        default.
    """

    key = "k2k"
    name = "k2k at-least-once"
    exits_when_done = True
    prefix_capable = True
    features: ClassVar[dict[str, Any]] = {}
    commit: ClassVar[dict[str, Any]] = {}

    def __init__(
        self, lease_duration: str | None = None, discovery_interval: str | None = None
    ) -> None:
        self.lease_duration = lease_duration
        self.discovery_interval = discovery_interval

    def pipeline(self, ctx: Ctx) -> dict[str, Any]:
        source: dict[str, Any] = {"topic": [ctx.topic]}
        sink: dict[str, Any] = {"topic": {"map": {ctx.topic: ctx.dest}}, "partition": "source"}
        if ctx.prefix:
            # Every topic starting with the prefix, now or later, to dest_topic(name, run).
            suffix = self.dest_topic("", ctx.run)
            if self.dest_topic(ctx.topic, ctx.run) != ctx.topic + suffix:
                raise ValueError(f"{self.name}: its target topic names are not name + suffix")
            source = {"topic": re.escape(ctx.topic) + ".*"}
            sink = {"topic": {"suffix": suffix}, "partition": "source"}
        if self.discovery_interval is not None:
            source["discoveryInterval"] = self.discovery_interval
        spark: dict[str, Any] = {"master": "local[2]"}
        if self.lease_duration is not None:
            spark["leaseDuration"] = self.lease_duration
        return {
            "name": f"bench-{uuid.uuid4().hex[:8]}",
            "features": {
                "autoCreateTopics": "enabled",
                "autoCreateControlTopics": "enabled",
                "headerReplication": "enabled",
                **self.features,
            },
            "source": {"kafka": {"common": {"bootstrap.servers": ctx.source}}},
            "target": {"kafka": {"common": {"bootstrap.servers": ctx.target}}},
            "replication": [{"source": source}, {"sink": sink}],
            "spark": spark,
            "coordination": {"commit": self.commit},
            "offsetMapping": {"topic": f"__k2k_offset_mappings-{ctx.dest}"},
        }

    #: Extra ``k2k start`` arguments and environment.
    args: ClassVar[tuple[str, ...]] = ()
    _spark_ready: ClassVar[bool] = False

    def setup(self) -> None:
        """Start and stop Spark once as ``k2k start`` does, so that its JVM's class-data
        archive exists (docs/spark.md#start-up) and no measured run records it."""
        if K2KAtLeastOnce._spark_ready:
            return
        subprocess.run(
            [str(ROOT / ".venv/bin/python"), "-c", _SPARK_ONCE],
            env=self.environment(),
            stdout=subprocess.DEVNULL,
            timeout=300,
            check=True,
        )
        K2KAtLeastOnce._spark_ready = True  # one archive serves every k2k contender

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, ctx: Ctx) -> None:
        path = ctx.tmp / f"{ctx.dest}.yaml"
        path.write_text(yaml.safe_dump(self.pipeline(ctx)))
        argv = [str(ROOT / ".venv/bin/k2k"), "start", *self.args, "-f", str(path)]
        if not ctx.steady:
            argv.insert(2, "--until-caught-up")
        env = self.environment()
        with open(ctx.tmp / f"{ctx.dest}.log", "w") as log:  # the child keeps its own copy
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=env)
        ctx.procs.append(proc)
        self.started(proc)

    def started(self, proc: subprocess.Popen[bytes]) -> None:
        """Called once the process runs (e.g. to scrape its metrics)."""


class K2KExactlyOnce(K2KAtLeastOnce):
    """Exactly-once: each commit batch of records and its progress in one transaction
    (default commit settings: 10,000 records per partition or 2 seconds)."""

    key = "k2k-eos"
    name = "k2k exactly-once"
    guarantee = "exactly-once"
    features: ClassVar[dict[str, Any]] = {"exactlyOnce": "enabled"}


class K2KExactlyOnceFastCommit(K2KExactlyOnce):
    """Exactly-once with ``batchTimeout: 100 milliseconds``: records become visible to
    ``read_committed`` consumers at each commit, so the batch timeout bounds latency."""

    key = "k2k-eos-100ms"
    name = "k2k exactly-once, 100 ms batches"
    backlog_capable = False
    commit: ClassVar[dict[str, Any]] = {"batchTimeout": "100 milliseconds"}


class K2KAtLeastOnceMappings(K2KAtLeastOnce):
    """At-least-once with ``features.offsetMapping``: one mapping record per run."""

    key = "k2k-om"
    name = "k2k at-least-once, offset mappings"
    features: ClassVar[dict[str, Any]] = {"offsetMapping": "enabled"}


class K2KAtLeastOnceIdentical(K2KAtLeastOnce):
    """At-least-once with ``replication[].sink.offsets: identical``: every record keeps its
    source offset on the target (each run's offsets checked from its delivery reports)."""

    key = "k2k-id"
    name = "k2k at-least-once, identical offsets"

    def pipeline(self, ctx: Ctx) -> dict[str, Any]:
        doc = super().pipeline(ctx)
        doc["replication"][1]["sink"]["offsets"] = "identical"
        return doc


class K2KExactlyOnceMappings(K2KExactlyOnce):
    """Exactly-once with ``features.offsetMapping``: mappings in the batch's transaction."""

    key = "k2k-eos-om"
    name = "k2k exactly-once, offset mappings"
    features: ClassVar[dict[str, Any]] = {"exactlyOnce": "enabled", "offsetMapping": "enabled"}


class K2KAtLeastOnceTelemetry(K2KAtLeastOnce):
    """At-least-once with ``-t`` and the Prometheus exporter, scraped every second as a
    Prometheus server would (the scrape's own cost on the host counts too)."""

    key = "k2k-t"
    name = "k2k at-least-once, metrics scraped 1/s"
    args: ClassVar[tuple[str, ...]] = ("-t",)

    def environment(self) -> dict[str, str]:
        from k2k.local import free_port

        self.port = free_port()
        return {
            **os.environ,
            "OTEL_METRICS_EXPORTER": "prometheus",
            "OTEL_EXPORTER_PROMETHEUS_PORT": str(self.port),
        }

    def started(self, proc: subprocess.Popen[bytes]) -> None:
        url = f"http://127.0.0.1:{self.port}/metrics"

        def scrape() -> None:
            while proc.poll() is None:
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(url, timeout=2).read()
                time.sleep(1.0)

        threading.Thread(target=scrape, name="bench-scrape", daemon=True).start()


class K2KAtLeastOnceClientStatistics(K2KAtLeastOnceTelemetry):
    """As ``k2k-t``, with ``metrics.clientStatistics`` on at its default interval: the
    runners' clients emit librdkafka's statistics, parsed once per interval and client."""

    key = "k2k-t-cs"
    name = "k2k at-least-once, metrics and client statistics scraped 1/s"

    def pipeline(self, ctx: Ctx) -> dict[str, Any]:
        doc = super().pipeline(ctx)
        doc["metrics"] = {"clientStatistics": {"enabled": True}}
        return doc


class K2KFromMM2File(K2KAtLeastOnce):
    """k2k started from the MM2 contender's own properties file, rendered for the run exactly
    as MM2 gets it (``k2k start --mm2 <file> --clusters <target alias>``): the same file."""

    key = "k2k-mm2"
    name = "k2k from MM2's file, at-least-once"
    prefix_capable = False  # its topics are MM2's file's
    mm2: ClassVar[type[MirrorMaker2AtLeastOnce]] = MirrorMaker2AtLeastOnce

    def dest_topic(self, topic: str, run: str) -> str:
        return self.mm2().dest_topic(topic, run)

    def start(self, ctx: Ctx) -> None:
        mm2 = self.mm2()
        ctx.tmp.mkdir(parents=True, exist_ok=True)
        config = ctx.tmp / f"k2k-mm2-{ctx.run}.properties"
        config.write_text(render_config(HERE / mm2.template, mm2.config_values(ctx)))
        argv = [str(ROOT / ".venv/bin/k2k"), "start", "--mm2", str(config)]
        argv += ["--clusters", TARGET_ALIAS]
        if not ctx.steady:
            argv.insert(2, "--until-caught-up")
        with open(ctx.tmp / f"{ctx.dest}.log", "w") as log:  # the child keeps its own copy
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        ctx.procs.append(proc)


class K2KFromMM2FileExactlyOnce(K2KFromMM2File):
    """The same with MM2's exactly-once file (``exactly.once.support``)."""

    key = "k2k-mm2-eos"
    name = "k2k from MM2's file, exactly-once"
    guarantee = "exactly-once"
    mm2: ClassVar[type[MirrorMaker2AtLeastOnce]] = MirrorMaker2ExactlyOnce
