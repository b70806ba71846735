"""W1 with ``-t`` and everything the wall reads, against the same copy without ``-t``
(issue 51's 95 % goal).

One embedded broker pair (1 GiB heaps, full JIT). The source topic holds ``--records`` x
100 B over 8 partitions. Each round copies it with ``k2k start --until-caught-up`` on
``local[2]`` into fresh target topics, once per mode:

* ``off``: no ``-t``;
* ``on``: ``-t`` with the Prometheus exporter and librdkafka client statistics on
  (``metrics.clientStatistics``, every 5 s), ``/metrics`` and ``/readyz`` fetched every 5 s,
  as a Prometheus and a kubelet would;

* ``page``: ``on``, and ``/api/status`` (the status page's feed) fetched every 2 s as an
  open status page does: each fetch within a viewing reads the pipeline's state from the
  control topics now and then.

The order of the modes rotates per round; medians are printed with each mode's share of
``off``. Warm-up copies run first and are not counted. Records/s counts from the first record on the target to the
last (the brokers' append times; start-up excluded).

    .venv/bin/python -m bench.telemetry_w1 [--records 5000000] [--rounds 3] [--warmups 2]
        [--modes off,on,page]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from bench.rounds import rotated_rounds
from bench.schema_mapping_w1 import copy, preload
from bench.schema_mapping_w1 import pipeline as plain_pipeline
from k2k.local import free_port, start_pair

#: (path, seconds between fetches) of what the wall reads while k2k copies, per mode.
READERS = {
    "on": (("/metrics", 5.0), ("/readyz", 5.0)),
    "page": (("/metrics", 5.0), ("/readyz", 5.0), ("/api/status", 2.0)),
}


def pipeline(source: str, target: str, topic: str, dest: str, on: bool) -> dict[str, Any]:
    """The schema-mapping bench's plain copy (mapping off), with client statistics when
    ``on``."""
    doc: dict[str, Any] = plain_pipeline(source, target, topic, dest, None)
    doc["name"] = f"bench-t-{uuid.uuid4().hex[:8]}"
    if on:
        doc["metrics"] = {"clientStatistics": {"enabled": True, "interval": "5 seconds"}}
    return doc


class Wall:
    """Fetches what a Prometheus, a kubelet and an open status page would, until stopped."""

    def __init__(self, port: int, readers: tuple[tuple[str, float], ...]) -> None:
        self.port = port
        self.stop = threading.Event()
        self.fetched = 0
        self.threads = [threading.Thread(target=self._read, args=r, daemon=True) for r in readers]

    def __enter__(self) -> Wall:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def _read(self, path: str, every_s: float) -> None:
        while not self.stop.wait(every_s):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                    r.read()
                    self.fetched += 1
            except (OSError, urllib.error.HTTPError):
                pass  # not serving yet, or 503 before the first lease


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmups", type=int, default=2)
    ap.add_argument("--modes", default="off,on,page")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if "off" not in modes or not set(modes) <= {"off", *READERS}:
        raise SystemExit(f"--modes: expected 'off' and any of on, page; got {modes}")
    tmp = Path(tempfile.mkdtemp(prefix="k2k-bench-t-"))
    pair = start_pair(
        tmp / "clusters", free_port(), free_port(), heap="1g", jvm_options=(), owner_pid=os.getpid()
    )
    try:
        topic = "w1-t"
        preload(pair.source.bootstrap, topic, args.records, [0])
        others = {
            "brokers": [pid for b in (pair.source, pair.target) if (pid := b.pid) is not None]
        }

        def copy_to(dest: str, mode: str) -> float:
            doc = pipeline(pair.source.bootstrap, pair.target.bootstrap, topic, dest, mode != "off")
            if mode == "off":
                return copy(tmp, doc, pair.target.bootstrap, dest, args.records, others)
            port = free_port()
            env = {
                "OTEL_METRICS_EXPORTER": "prometheus",
                "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
            }
            with Wall(port, READERS[mode]) as wall:
                rate = copy(
                    tmp, doc, pair.target.bootstrap, dest, args.records, others, ("-t",), env
                )
            print(f"    the wall fetched {wall.fetched} times", flush=True)
            return rate

        medians = rotated_rounds(modes, args.rounds, args.warmups, copy_to, topic)
        print(f"W1 {args.records:,} x 100 B, {args.rounds} rounds (medians):")
        for mode in modes:
            rate = medians[mode]
            print(f"  {mode:4} {rate:>10,.0f} records/s  {rate / medians['off']:6.0%} of off")
    finally:
        pair.stop()


if __name__ == "__main__":
    main()
