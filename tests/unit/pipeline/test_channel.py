"""The lease channel over real sockets: a runner's stop signal tells "stop" from "the
driver is gone" (closed, replaced by another driver on the same port, or silent)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from k2k.pipeline import channel
from k2k.pipeline.channel import LeaseControl, StopSignal


def _within(seconds: float, condition) -> float:
    """Poll ``condition`` until true; the seconds it took (fails after ``seconds``)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, "condition not met in time"
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture
def driver():
    control = LeaseControl("127.0.0.1")
    yield control
    control.close()


def test_a_running_driver_keeps_the_runner_going_until_it_ends_the_lease(driver):
    signal = StopSignal(driver.address)
    try:
        time.sleep(1.0)  # four polls answered "run"
        assert not signal.is_set()
        driver.end_lease()
        _within(5, signal.is_set)
        assert not signal.driver_gone
    finally:
        signal.close()


def test_a_closed_driver_is_gone_within_a_second():
    driver = LeaseControl("127.0.0.1")
    signal = StopSignal(driver.address)
    try:
        time.sleep(0.5)
        driver.close()
        took = _within(5, signal.is_set)
        assert "refuses this runner" in (signal.driver_gone or "")
        assert took < 2.0
    finally:
        signal.close()


def test_another_driver_on_the_same_port_is_not_ours():
    first = LeaseControl("127.0.0.1")
    signal = StopSignal(first.address)
    try:
        time.sleep(0.5)
        first.close()
        second = LeaseControl("127.0.0.1", port=first.port)  # a restart, fixed controlPort
        try:
            _within(5, signal.is_set)
            assert "refuses this runner" in (signal.driver_gone or "")
            assert second.token != first.token
        finally:
            second.close()
    finally:
        signal.close()


def test_a_driver_that_never_answers_is_gone_after_the_silent_limit(monkeypatch):
    monkeypatch.setattr(channel, "_SILENT_AFTER_S", 1.0)
    mute = socket.create_server(("127.0.0.1", 0))  # accepts (backlog), never answers
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        mute.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(mute.accept()[0])
            except TimeoutError:
                continue

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    signal = StopSignal(("127.0.0.1", mute.getsockname()[1], "token"))
    try:
        _within(10, signal.is_set)
        assert "no answer from the lease channel" in (signal.driver_gone or "")
    finally:
        signal.close()
        stop.set()
        holder.join()  # before the socket closes under its accept()
        mute.close()
        for conn in accepted:
            conn.close()


def test_the_driver_answers_a_wrong_token_as_foreign(driver):
    with socket.create_connection(("127.0.0.1", driver.port), timeout=2) as sock:
        sock.sendall(b"not-the-token\n\n")
        assert sock.makefile("rb").readline(16) == b"foreign\n"


def test_closing_the_driver_s_channel_does_not_wait_out_a_long_poll():
    control = LeaseControl("127.0.0.1")
    time.sleep(0.02)  # its server is waiting in its first poll (0.1 s)
    started = time.monotonic()
    control.close()
    assert time.monotonic() - started < 0.4
