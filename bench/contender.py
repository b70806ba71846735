"""What the harness needs from a contender, and what it hands one for a run.

A contender copies one source topic into one target topic. The harness owns the data, the
clock and the checks; a contender only starts its processes (appending them to
``ctx.procs`` so that their CPU and memory are measured) and says where the copy lands.

Two kinds of run:

* **backlog** (``ctx.steady`` false): the source topic is already loaded. A contender with
  ``exits_when_done`` stops by itself once it has copied everything; any other contender is
  stopped by the harness (SIGTERM, then SIGKILL) once the target holds every record.
* **steady** (``ctx.steady`` true): the source topic starts empty and the harness writes to
  it at a fixed rate while the contender runs; the harness stops it at the end.

A run with ``ctx.prefix`` copies many topics (W3; the long W2, where a topic is created
mid-run): every source topic whose name starts with ``ctx.topic``, those present at start
(``ctx.topics``) and any created later, each to ``dest_topic(name, run)``. Only contenders
with ``prefix_capable`` serve such runs.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from confluent_kafka.admin import AdminClient, NewTopic

__all__ = ["Contender", "Ctx", "create_topic"]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` (replication factor 1) unless it exists with ``partitions`` partitions.

    Target topics are created up front because contenders write each record to its source
    partition number, and a topic the broker auto-creates would have only one partition.

    :raises RuntimeError: the topic exists with another partition count.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics.get(topic)
    if existing is not None:
        if len(existing.partitions) != partitions:
            raise RuntimeError(
                f"topic {topic} exists with {len(existing.partitions)} partitions, not {partitions}"
            )
        return
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result()


@dataclass
class Ctx:
    source: str  # bootstrap servers of the source cluster
    target: str  # bootstrap servers of the target cluster
    topic: str  # the source topic to copy
    dest: str  # the target topic, as given by the contender's dest_topic()
    partitions: int  # the source topic's partition count (the target must keep partitions)
    steady: bool  # False: copy a backlog; True: run until stopped (latency runs)
    run: str  # short unique id of this run (a-z0-9), usable in names
    tmp: Path  # scratch directory for configs, logs and checkpoints of this run
    procs: list[subprocess.Popen] = field(default_factory=list)
    records: int = 0  # backlog: how many records the source topic holds
    value_size: int = 0  # bytes per record value
    ends: dict[int, int] = field(default_factory=dict)  # backlog: end offset per partition
    #: True: copy every source topic whose name starts with ``topic`` (``topic`` is then a
    #: prefix, and ``dest`` only a label: each topic goes to ``dest_topic(name, run)``).
    prefix: bool = False
    #: With ``prefix``: the source topics present at start, each with ``partitions``
    #: partitions (for a contender without topic discovery, the bare loop).
    topics: tuple[str, ...] = ()
    #: With ``prefix``, backlog: end offset per (topic, partition).
    topic_ends: dict[tuple[str, int], int] = field(default_factory=dict)

    def copy_args(self) -> list[str]:
        """``--source S --target T --topic X --dest Y``: what every copy job is told."""
        names = ("--source", "--target", "--topic", "--dest")
        values = (self.source, self.target, self.topic, self.dest)
        return [arg for pair in zip(names, values, strict=True) for arg in pair]


class Contender:
    """Base class: subclasses set the class attributes and implement ``start``."""

    key: ClassVar[str]  # name on the command line (--only)
    name: ClassVar[str]  # name in the table
    guarantee: ClassVar[str] = "at-least-once"  # or "exactly-once"
    exits_when_done: ClassVar[bool] = False  # a backlog run ends when the process exits
    #: True: the target must equal the source partition by partition (count and sampled
    #: content). False: only the total count is checked (a tool that writes its own data).
    exact: ClassVar[bool] = True
    #: False for a contender that cannot serve a steady-state latency run.
    steady_capable: ClassVar[bool] = True
    #: False for a variant measured only in steady state (e.g. a shorter commit interval).
    backlog_capable: ClassVar[bool] = True
    #: False if the target records get new timestamps (compared without them).
    keeps_timestamps: bool = True
    #: True for a contender that serves ``ctx.prefix`` runs (many topics, W3, long W2).
    prefix_capable: ClassVar[bool] = False

    def setup(self) -> None:
        """Once per harness run, before any cluster starts: fetch jars, check tools."""

    def dest_topic(self, topic: str, run: str) -> str:
        """The target topic this contender writes ``topic`` to in run ``run``."""
        return f"{topic}-{self.key}-{run}"

    def start(self, ctx: Ctx) -> None:
        raise NotImplementedError
