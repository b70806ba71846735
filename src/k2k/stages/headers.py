"""Tracing headers: where a replicated record came from, added after its own headers."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Header", "TracingHeaders"]

Header = tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class TracingHeaders:
    """The names of the tracing headers a pipeline adds; a name that is None is not added.

    Headers go in the order topic, partition, offset, pipeline. Everything but the offset is
    the same for a whole run of one source partition, so the runner asks for it once per run
    (:meth:`around_offset`) and adds only the offset per record.

    >>> t = TracingHeaders("k2k_topic", None, "k2k_offset", "k2k_pipeline", "dr")
    >>> t.around_offset("orders", 3)
    ([('k2k_topic', b'orders')], [('k2k_pipeline', b'dr')])
    """

    topic: str | None
    partition: str | None
    offset: str | None
    pipeline: str | None
    pipeline_name: str

    def around_offset(self, topic: str, partition: int) -> tuple[list[Header], list[Header]]:
        """The headers that go before the offset header, and those that go after it."""
        before: list[Header] = []
        if self.topic:
            before.append((self.topic, topic.encode()))
        if self.partition:
            before.append((self.partition, str(partition).encode()))
        after: list[Header] = (
            [(self.pipeline, self.pipeline_name.encode())] if self.pipeline else []
        )
        return before, after
