"""What schema mapping costs the copy loop per record, in process (no Kafka, no Spark).

A list of ``--records`` wire-format messages (Avro-like: a 5-byte prefix, a 100 B payload;
keys too, 16 B, or W1's plain 8-digit keys with ``--plain-keys``) is cut into runs of
``--run`` records and pushed through the copier's per-record loop
(``RecordCopier._copy_run`` itself: read key and value, produce) with a producer that does
nothing, once with mapping off (the plain fast path) and once with
``SchemaIdRewrite`` on both facets, the copier's one call per run. The ids are warm (the
process cache answers, as in every lease after a worker's first), so this is the steady
state: a 5-byte slice, a dict lookup and a splice per key and per value. Rounds alternate
the order; the summary compares medians of CPU time.

It bounds the CPU cost only: a real produce costs far more than the no-op here, so the
ratio printed understates W1's (``bench/k2k_bench.py``), which is what the ≥85 % target is
about. Messages are real ``confluent_kafka.Message`` objects built in Python.

    .venv/bin/python -m bench.schema_mapping_cost [--records 1000000] [--run 500] [--rounds 5]
        [--plain-keys]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException, Message

from k2k.errors import K2KError
from k2k.pipeline.task.copier import RecordCopier
from k2k.schemamapping import SchemaIdRewrite, SchemaMapper
from k2k.schemamapping.registry import RegistryEndpoint, SchemaRecord
from k2k.stages import SourcePartition, TopicPlan

SOURCE_IDS = (1, 2, 3)  # schemas met in the topic, round robin


def messages(n: int, plain_keys: bool) -> list[Message]:
    payload, key = bytes(100), bytes(16)
    out = []
    for i in range(n):
        prefix = b"\x00" + SOURCE_IDS[i % len(SOURCE_IDS)].to_bytes(4, "big")
        out.append(
            Message(
                topic="orders",
                partition=0,
                offset=i,
                key=b"%08d" % i if plain_keys else prefix + key,
                value=prefix + payload,
                timestamp=(1, i),
            )
        )
    return out


def warm_rewrite() -> SchemaIdRewrite:
    """A rewrite whose mapper's process cache knows every source id (no registry call)."""
    nowhere = RegistryEndpoint("source", ("http://127.0.0.1:9",), retry_timeout_s=0.1)
    mapper = SchemaMapper(nowhere, nowhere)
    for sid in SOURCE_IDS:
        mapper.cache.schemas[sid] = SchemaRecord('"string"')
        for facet in ("key", "value"):
            mapper.cache.ids[(f"dr.orders-{facet}", sid)] = 1000 + sid
    return SchemaIdRewrite(mapper, "dr.orders", keys=True, values=True)


class NoopProducer:
    """A producer whose ``produce`` does nothing (the copier only calls ``produce``)."""

    def produce(self, *_: Any) -> None:
        return None


def copier(transform: SchemaIdRewrite | None) -> RecordCopier:
    """The runner's copier for topic ``orders`` (``partition: source``, timestamps kept)."""
    plan = TopicPlan("orders", "dr.orders", SourcePartition(), False, True, None, transform)
    return RecordCopier({"orders": plan}, {"orders"}, _noop, _fail)


def copy_all(msgs: Sequence[Message], run: int, transform: SchemaIdRewrite | None) -> int:
    """Push ``msgs`` through ``RecordCopier._copy_run``, ``run`` records at a time."""
    c, producer = copier(transform), NoopProducer()
    for first in range(0, len(msgs), run):
        c._copy_run(msgs, first, min(first + run, len(msgs)), "orders", 0, producer, None)  # type: ignore[arg-type]
    return c.bytes


def _fail(_m: Any, exc: KafkaException) -> K2KError:
    return K2KError(str(exc))


def _noop(*_: Any) -> None:
    return None


def measure(msgs: list[Message], run: int, mapped: bool) -> float:
    """CPU ns per record of one pass (process time: the host may be shared)."""
    transform = warm_rewrite() if mapped else None
    started = time.process_time_ns()
    copy_all(msgs, run, transform)
    return (time.process_time_ns() - started) / len(msgs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--run", type=int, default=500, help="records per run (per call)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--plain-keys",
        action="store_true",
        help="keys are 8 ASCII digits (not wire format, passed unchanged), as in W1",
    )
    args = parser.parse_args()
    msgs = messages(args.records, args.plain_keys)
    off: list[float] = []
    on: list[float] = []
    for i in range(args.rounds):
        order = (False, True) if i % 2 == 0 else (True, False)
        for mapped in order:
            (on if mapped else off).append(measure(msgs, args.run, mapped))
    m_off, m_on = statistics.median(off), statistics.median(on)
    keys = "plain keys" if args.plain_keys else "wire-format keys"
    print(f"records {args.records:,}, runs of {args.run}, {keys}, rounds {args.rounds}")
    print(f"mapping off: {m_off:7.1f} ns/record (median; all {[round(x) for x in off]})")
    print(f"mapping on:  {m_on:7.1f} ns/record (median; all {[round(x) for x in on]})")
    print(
        f"added: {m_on - m_off:.1f} ns/record; loop throughput with mapping "
        f"{100 * m_off / m_on:.0f} % of without (no-op produce: a lower bound for W1)"
    )


if __name__ == "__main__":
    main()
