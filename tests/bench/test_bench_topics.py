"""Admin work on many topics in batches (bench/topics.py), against a recording fake admin."""

from __future__ import annotations

import doctest
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

import bench.topics
from bench.topics import create_topics, delete_topics


@pytest.mark.parametrize("module", [bench.topics])
def test_docstring_examples(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


class FakeAdmin:
    """Records each request's topics; topics become visible once created."""

    def __init__(self, existing: set[str]) -> None:
        self.existing = set(existing)
        self.created: list[list[str]] = []
        self.deleted: list[list[str]] = []

    def create_topics(self, new_topics: list[NewTopic], **_: Any) -> dict[str, Future]:
        self.created.append([t.topic for t in new_topics])
        out = {}
        for t in new_topics:
            f: Future = Future()
            if t.topic in self.existing:
                f.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)))
            else:
                f.set_result(None)
            self.existing.add(t.topic)
            out[t.topic] = f
        return out

    def delete_topics(self, topics: list[str], **_: Any) -> dict[str, Future]:
        self.deleted.append(list(topics))
        out = {}
        for name in topics:
            f: Future = Future()
            if name in self.existing:
                f.set_result(None)
            else:
                f.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            out[name] = f
        return out

    def list_topics(self, *_: Any, **__: Any) -> Any:
        partition = SimpleNamespace(leader=0, error=None)
        md = SimpleNamespace(error=None, partitions=dict.fromkeys(range(8), partition))
        return SimpleNamespace(topics=dict.fromkeys(self.existing, md))


def test_topics_are_created_and_deleted_many_per_request() -> None:
    names = [f"w3-{i:04d}" for i in range(1000)]
    admin = FakeAdmin(existing={"w3-0003"})  # one there already: fine
    create_topics(admin, names, 8, batch=250)
    assert [len(b) for b in admin.created] == [250, 250, 250, 250]
    assert [t for b in admin.created for t in b] == names
    assert delete_topics(admin, [*names[:10], "never-created"], batch=8) == []
    assert [len(b) for b in admin.deleted] == [8, 3]
