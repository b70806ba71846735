"""A Structured Streaming query reading Kafka topics with a checkpoint, run as its own
process (its Spark session needs the Kafka connector on its classpath, which a running
session cannot get): ``python -m tests.helpers.sss_reader --bootstrap B --topics a,b
--checkpoint DIR --out FILE --jars J1,J2``.

It reads what is there when it starts (``availableNow``) and appends every record it read
to ``--out`` as one JSON line (topic, partition, offset, key, value), batch after batch.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--bootstrap", "--topics", "--checkpoint", "--out", "--jars"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", args.jars)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    out = Path(args.out)

    def batch(frame: Any, _batch_id: int) -> None:
        rows = frame.select("topic", "partition", "offset", "key", "value").collect()
        with out.open("a", encoding="utf-8") as f:
            for r in rows:
                record = {
                    "topic": r.topic,
                    "partition": r.partition,
                    "offset": r.offset,
                    "key": bytes(r.key).decode(),
                    "value": bytes(r.value).decode(),
                }
                f.write(json.dumps(record) + "\n")

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topics)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    query = (
        stream.writeStream.foreachBatch(batch)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
