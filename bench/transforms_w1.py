"""W1 with transform steps against the same copy without them (issue 49's 85 % goal).

One embedded broker pair (1 GiB heaps, full JIT). The source topic holds ``--records`` JSON
values of about ``--size`` bytes over 8 partitions (``{"id": ..., "email": ..., "pad": ...}``),
each record with one header (``env: prod``) and an 8-digit key. Each round copies it with
``k2k start --until-caught-up`` on ``local[2]`` into fresh target topics, once per mode:

* ``none``: no transforms (the copier's fast path);
* ``filter``: one header filter that keeps every record,
  ``drop: 'has(headers.env) && headers.env == "test"'``;
* ``mask``: one JSON field mask, ``maskFields: {fields: [value.email]}`` (each value parsed,
  masked and written again).

The order of the modes rotates per round; medians are printed with each mode's share of
``none``. Warm-up copies run first and are not counted (cold brokers). Records/s counts from
the first record on the target to the last (the brokers' append times; start-up excluded).

    .venv/bin/python -m bench.transforms_w1 [--records 1000000] [--size 1024] [--rounds 3]
        [--modes none,filter,mask]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import PARTITIONS
from bench.rounds import rotated_rounds
from bench.schema_mapping_w1 import copy
from k2k.local import free_port, start_pair

STEPS: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "filter": [{"filter": {"drop": 'has(headers.env) && headers.env == "test"'}}],
    "mask": [{"maskFields": {"fields": ["value.email"]}}],
}


def preload(bootstrap: str, topic: str, records: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    started = time.monotonic()
    headers = [("env", b"prod")]
    for i in range(records):
        doc = {"id": i, "email": f"user{i:08d}@example.com", "pad": ""}
        doc["pad"] = "x" * max(0, size - len(json.dumps(doc)))
        value = json.dumps(doc).encode()
        while True:
            try:
                p.produce(topic, value, b"%08d" % i, i % PARTITIONS, headers=headers)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    took = time.monotonic() - started
    print(f"  loaded {records:,} x {size} B JSON into {topic} in {took:.1f} s", flush=True)


def pipeline(source: str, target: str, topic: str, dest: str, mode: str) -> dict[str, Any]:
    stages: list[dict[str, Any]] = [{"source": {"topic": [topic]}}]
    if STEPS[mode]:
        stages.append({"transforms": STEPS[mode]})
    stages.append({"sink": {"topic": {"map": {topic: dest}}, "partition": "source"}})
    return {
        "name": f"bench-xf-{uuid.uuid4().hex[:8]}",
        "features": {
            "autoCreateTopics": "enabled",
            "autoCreateControlTopics": "enabled",
            "headerReplication": "enabled",
        },
        "source": {"kafka": {"common": {"bootstrap.servers": source}}},
        "target": {"kafka": {"common": {"bootstrap.servers": target}}},
        "replication": stages,
        "spark": {"master": "local[2]"},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024, help="bytes per JSON value, about")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmups", type=int, default=2)
    ap.add_argument("--modes", default="none,filter,mask")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in STEPS]
    if unknown or "none" not in modes:
        raise SystemExit(f"--modes: expected 'none' and any of {', '.join(STEPS)}; got {modes}")
    tmp = Path(tempfile.mkdtemp(prefix="k2k-bench-xf-"))
    pair = start_pair(
        tmp / "clusters", free_port(), free_port(), heap="1g", jvm_options=(), owner_pid=os.getpid()
    )
    try:
        topic = "w1-xf"
        preload(pair.source.bootstrap, topic, args.records, args.size)
        brokers = [pid for b in (pair.source, pair.target) if (pid := b.pid) is not None]

        def copy_to(dest: str, mode: str) -> float:
            doc = pipeline(pair.source.bootstrap, pair.target.bootstrap, topic, dest, mode)
            return copy(tmp, doc, pair.target.bootstrap, dest, args.records, {"brokers": brokers})

        medians = rotated_rounds(modes, args.rounds, args.warmups, copy_to, topic)
        print(f"W1 {args.records:,} x {args.size} B JSON, {args.rounds} rounds (medians):")
        for mode in modes:
            rate = medians[mode]
            print(f"  {mode:6} {rate:>10,.0f} records/s  {rate / medians['none']:6.0%} of none")
    finally:
        pair.stop()


if __name__ == "__main__":
    main()
