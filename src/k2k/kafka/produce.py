"""Producing into a full queue: serve acknowledgements until there is room."""

from __future__ import annotations

from confluent_kafka import Producer

__all__ = ["ROOM_WAIT_S", "produce_when_room"]

#: How long a full producer queue waits for acknowledgements before trying again.
ROOM_WAIT_S = 0.05


def produce_when_room(producer: Producer, *args: object) -> None:
    """``producer.produce(*args)``, serving acknowledgements while its queue is full (a
    backlog fills it). Errors other than a full queue propagate."""
    while True:
        try:
            producer.produce(*args)  # type: ignore[arg-type]
            return
        except BufferError:
            producer.poll(ROOM_WAIT_S)
