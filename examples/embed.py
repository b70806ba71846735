"""Embedding k2k: replicate topics from a program of your own, then check the copy.

    K2K_SOURCE_BOOTSTRAP=127.0.0.1:19092 K2K_TARGET_BOOTSTRAP=127.0.0.1:29092 \\
        python examples/embed.py PIPELINE-NAME TOPIC [TOPIC ...]

(the addresses of ``k2k local up``). Copies the topics under their own names until caught
up, compares the target with the source record for record, and prints the committed
positions. SIGINT or SIGTERM stop it cleanly. The guide: docs/api.md.
"""

from __future__ import annotations

import logging
import signal
import sys

import k2k
from k2k.errors import ConfigError, K2KError


def main(name: str, topics: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        config = k2k.load_pipeline(
            {  # the layout of a pipeline file; placeholders resolve as in files
                "name": name,
                "features": {
                    "autoCreateTopics": "enabled",
                    "autoCreateControlTopics": "enabled",
                    "headerReplication": "enabled",
                },
                "source": {
                    "kafka": {"common": {"bootstrap.servers": "${env:K2K_SOURCE_BOOTSTRAP}"}}
                },
                "target": {
                    "kafka": {"common": {"bootstrap.servers": "${env:K2K_TARGET_BOOTSTRAP}"}}
                },
                "replication": [
                    {"source": {"topic": topics}},
                    {"sink": {"topic": "source", "partition": "source"}},
                ],
            }
        )
    except ConfigError as exc:
        for problem in exc.problems:  # every problem, each naming its key path
            print(f"config: {problem}", file=sys.stderr)
        return 2

    replicator = k2k.Replicator(config)
    # The program owns its signals: stop() is safe in a handler, and the replicator keeps
    # these handlers when Spark starts (PySpark would put its own on SIGINT).
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: replicator.stop())
    try:
        stats = replicator.run(until_caught_up=True)
        print(f"replicated {stats.records} records")
        report = replicator.verify()
        print(report.summary())
        for p in replicator.status().to_json()["partitions"]:
            print(f"{p['topic']}[{p['partition']}]: committed {p['committed']} of {p['end']}")
    except K2KError as exc:  # a cluster unreachable, a record refused, ...
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0 if report.ok else 1


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
