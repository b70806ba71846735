"""stop_spark and pyspark's accumulator server: the JVM ends only after the server has."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from k2k.spark import session


class _Server:
    """Stands in for pyspark's accumulator server, whose handler leaves only after a poll."""

    def __init__(self) -> None:
        self.down = threading.Event()

    def shutdown(self) -> None:
        time.sleep(0.2)
        self.down.set()


class _Context:
    def __init__(self) -> None:
        self._accumulatorServer: Any = _Server()
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_a_recording_jvm_ends_after_the_accumulator_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sc = _Context()
    server = sc._accumulatorServer
    seen: list[bool] = []
    monkeypatch.setattr(session, "_recording", ("data", "proc"))
    monkeypatch.setattr(session, "_end_recording_jvm", lambda *_: seen.append(server.down.is_set()))
    session.stop_spark(sc)  # type: ignore[arg-type]
    assert sc.stopped and sc._accumulatorServer is None
    assert seen == [True]


def test_without_a_recording_the_server_stops_in_the_background() -> None:
    sc = _Context()
    server = sc._accumulatorServer
    session.stop_spark(sc)  # type: ignore[arg-type]
    assert sc.stopped and not server.down.is_set()
    assert server.down.wait(5)
