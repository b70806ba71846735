"""k2k.kafka.tail.read_to_end: one read of a control topic, its reader always closed, a
timeout turned into the caller's error naming the config key."""

import pytest

from k2k.errors import ClusterError, Unavailable
from k2k.kafka import tail


class _FakeTail:
    opened: list["_FakeTail"] = []

    def __init__(self, conf, topic, partitions, *, group_id, timeout_s, untransacted=False):
        self.topic, self.partitions, self.untransacted = topic, partitions, untransacted
        self.closed = False
        _FakeTail.opened.append(self)

    def catch_up(self, handle):
        if self.topic == "slow":
            raise tail.SyncTimeout("could not read slow partitions [0] to their end", [0])
        for value in (b"a", b"b"):
            handle(value)
        return True

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def _fake_tail(monkeypatch):
    _FakeTail.opened.clear()
    monkeypatch.setattr(tail, "TopicTail", _FakeTail)


def test_every_record_reaches_the_handler_and_the_reader_is_closed():
    seen = []
    tail.read_to_end({}, "ctl", [0, 1], seen.append, group_id="g", timeout_s=1, setting="x.topic")
    assert seen == [b"a", b"b"]
    assert [(t.partitions, t.closed) for t in _FakeTail.opened] == [([0, 1], True)]


@pytest.mark.parametrize("error", [ClusterError, Unavailable])
def test_a_timeout_raises_the_callers_error_naming_the_key(error):
    with pytest.raises(error) as raised:
        tail.read_to_end(
            {}, "slow", None, [].append, group_id="g", timeout_s=1, setting="x.topic", error=error
        )
    assert type(raised.value) is error
    assert str(raised.value) == "could not read slow partitions [0] to their end (x.topic)"
    assert _FakeTail.opened[0].closed
