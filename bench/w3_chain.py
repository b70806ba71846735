"""The W3 steady measurement chain alone, without a contender: the paced writer into 1,000
source topics x 8 partitions and the latency probe reading those same source topics, on a
fresh pair of 2 GiB brokers. What it reports is the floor under every contender's W3 steady
figures on this host (docs/benchmarks.md, issue 47)::

    .venv/bin/python -m bench.w3_chain [--rate 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.latency import WARMUP, PacedWriter
from bench.topics import create_topics
from k2k.local import free_port, start_pair


def _cpu_seconds(broker: int | None, probe: int) -> tuple[float, float, float]:
    """CPU seconds so far of the source broker (its JVM), the probe and this process (the
    writer; its children, the brokers and the probe, not counted)."""

    def used(pid: int | None, children: bool = True) -> float:
        if pid is None:
            return 0.0
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)] if children else [root]
        return sum(sum(p.cpu_times()[:2]) for p in procs)

    return used(broker), used(probe), used(os.getpid(), children=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=int, default=1000, help="records/s over all partitions")
    ap.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    ap.add_argument("--linger-ms", type=int, default=1, help="the writer's linger.ms")
    ap.add_argument("--fetch-wait-ms", type=int, default=10, help="the probe's fetch.wait.max.ms")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="k2k-w3-chain-"))
    pair = start_pair(root, free_port(), free_port(), timeout=120, heap="2g")
    try:
        source = pair.source.bootstrap
        topics = [f"w3c-{i:03d}" for i in range(1000)]
        create_topics(source, topics, 8)
        writer = PacedWriter(source, topics, 8, 100, a.linger_ms)
        writer.warmup()
        (root / "topics").write_text("\n".join(topics))
        out = root / "latency.json"
        expect = str(int(a.rate * a.seconds))
        args = ["--target", source, "--partitions", "8", "--topics", str(root / "topics")]
        args += ["--fetch-wait-ms", str(a.fetch_wait_ms)]
        probe = subprocess.Popen(
            [sys.executable, "-m", "bench.latency", *args, "--expect", expect, "--out", str(out)]
        )
        while not out.with_suffix(".ready").exists():
            time.sleep(0.2)
        writer.run(a.rate, 15, WARMUP)
        cpu = _cpu_seconds(pair.source.pid, probe.pid)
        started = time.monotonic()
        writer.run(a.rate, a.seconds)
        took = time.monotonic() - started
        used = [
            after - before
            for before, after in zip(cpu, _cpu_seconds(pair.source.pid, probe.pid), strict=True)
        ]
        print(f"writer: {a.seconds:g} s of records took {took:.1f} s")
        print("CPU s in the window: broker {:.1f}, probe {:.1f}, writer {:.1f}".format(*used))
        probe.wait(a.seconds + 300)
        figures = json.loads(out.read_text())
        print({k: figures[k] for k in ("received", "p50_ms", "p99_ms", "max_ms")})
        print("per-second maxima, s:", [round(v / 1000, 1) for v in figures["per_second_max_ms"]])
    finally:
        pair.stop()


if __name__ == "__main__":
    main()
