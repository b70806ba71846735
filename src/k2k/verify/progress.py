"""The live view of a verify job: how much its tasks have read, from the frames their
meters send (:class:`~k2k.verify.reading.Meter`) over the lease channel.

Runs on: driver, while the job runs (:mod:`k2k.verify.job` polls it; ``k2k verify`` shows
it as a live line).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from k2k.verify.task import PartitionTask

__all__ = ["VerifyProgress"]


class VerifyProgress:
    """Runs on: driver. What the tasks of a verify job have read so far, from their frames
    (``verify <task id> <records read> <done>``): records read on both sides of the
    records to read (offsets: source context included, every target partition read), and
    partitions done."""

    def __init__(self, tasks: Sequence[PartitionTask]) -> None:
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._size: dict[int, int] = {}
        self._partition: dict[int, tuple[str, int]] = {}
        self._read: dict[int, int] = {}
        self._done: set[int] = set()
        self.partitions = len({(t.topic, t.partition) for t in tasks})

    def add(self, task: PartitionTask) -> int:
        """A task about to run: its id in the frames."""
        with self._lock:
            task_id = len(self._size)
            first = task.start if task.context_from is None else task.context_from
            targets = sum(max(0, end - start) for start, end in task.target_ranges.values())
            self._size[task_id] = max(0, task.end - first) + targets
            self._partition[task_id] = (task.topic, task.partition)
            return task_id

    def frame(self, data: bytes) -> None:
        """One task's frame (called from the channel's server threads)."""
        parts = data.split()
        if len(parts) != 4 or parts[0] != b"verify":
            return
        try:
            task_id, read, done = int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            return
        with self._lock:
            if task_id in self._size:
                self._read[task_id] = max(read, self._read.get(task_id, 0))
                if done:
                    self._done.add(task_id)

    def snapshot(self) -> tuple[int, int, int, int]:
        """(records read, records to read, partitions done, partitions)."""
        with self._lock:
            read = sum(
                size if i in self._done else min(size, self._read.get(i, 0))
                for i, size in self._size.items()
            )
            pending = {self._partition[i] for i in self._size if i not in self._done}
            done = self.partitions - len(pending)
            return read, sum(self._size.values()), done, self.partitions
