"""The transform steps on single records: what each step makes of a record, what is decided
once per topic, and how a failing step is reported or skipped."""

from __future__ import annotations

import hashlib
import hmac
import json
import pickle
from typing import Any

import pytest
from confluent_kafka import Message

from k2k.config.loader import build_pipeline
from k2k.errors import TransformFailed
from k2k.transforms import FAILED, FILTERED, KEPT, TopicSteps, compile_steps
from tests.helpers.config import pipeline


def steps(
    *items: dict[str, Any], topic: str = "orders", keep_headers: bool = True
) -> TopicSteps | None:
    cfg = build_pipeline(
        pipeline(
            replication=[
                {"source": {"topic": "orders.*"}},
                {"transforms": list(items)},
                {"sink": {"topic": "source"}},
            ]
        ),
        {},
    )
    return compile_steps(cfg.replication.transforms, topic, "dr." + topic, keep_headers)


def record(
    value: Any = None,
    key: bytes | None = b"k",
    headers: list[tuple[str, bytes | None]] | None = None,
    offset: int = 7,
    partition: int = 2,
) -> Message:
    data = value if isinstance(value, bytes | None) else json.dumps(value).encode()
    return Message(
        topic="orders",
        partition=partition,
        offset=offset,
        key=key,
        value=data,
        headers=headers,
        timestamp=(1, 1_700_000_000_000 + offset),
    )


def run(s: TopicSteps | None, msg: Message) -> tuple[int, Any]:
    assert s is not None
    return s.run(msg)


def test_filter_drops_or_keeps_by_header() -> None:
    drop = steps({"filter": {"drop": 'has(headers.env) && headers.env == "test"'}})
    assert run(drop, record(headers=[("env", b"test")])) == (FILTERED, None)
    assert run(drop, record(headers=[("env", b"prod")])) == (KEPT, None)
    assert run(drop, record()) == (KEPT, None)
    keep = steps({"filter": {"keep": '"env" in headers'}})
    assert run(keep, record())[0] == FILTERED
    assert run(keep, record(headers=[("env", b"x")]))[0] == KEPT


def test_filter_over_every_facet_of_the_record() -> None:
    s = steps(
        {
            "filter": {
                "keep": 'topic == "orders" && partition == 2 && offset >= 7 && '
                'timestamp > 1700000000000 && key == "k" && valueJson.amount > 10 && '
                'value.contains("amount")'
            }
        }
    )
    assert run(s, record({"amount": 11}))[0] == KEPT
    assert run(s, record({"amount": 10}))[0] == FILTERED
    assert run(s, record({"amount": 11}, offset=6))[0] == FILTERED


def test_a_header_filter_evaluates_once_per_distinct_headers() -> None:
    s = steps({"filter": {"drop": '"x" in headers'}})
    assert s is not None
    for offset in range(100):
        run(s, record(headers=[("y", b"1")], offset=offset))
    (cached,) = [step for step in s.steps if hasattr(step, "_cache")]
    assert len(cached._cache) == 1  # type: ignore[attr-defined]


def test_steps_that_name_only_the_topic_are_decided_once_per_topic() -> None:
    items = (
        {"filter": {"drop": 'topic == "orders.test"'}},
        {"insertHeader": {"name": "o", "value": "eu", "when": 'topic.startsWith("orders")'}},
    )
    assert steps(*items, topic="orders.test") is not None
    s = steps(*items, topic="orders.test")
    assert run(s, record())[0] == FILTERED  # every record of the topic
    kept = steps(*items, topic="orders")
    assert kept is not None and kept.steps[0].when is None  # type: ignore[attr-defined]
    assert run(kept, record())[1][2] == [("o", b"eu")]
    assert steps({"filter": {"drop": 'topic == "x"'}}, topic="orders") is None


def test_header_steps_insert_drop_and_rename() -> None:
    s = steps(
        {"insertHeader": {"name": "origin", "value": "eu-west"}},
        {"insertHeader": {"name": "p", "expression": "partition"}},
        {"dropHeaders": {"names": ["secret"], "pattern": "tmp-.*"}},
        {"renameHeaders": {"names": {"old": "new"}}},
    )
    headers = [("secret", b"s"), ("tmp-1", b"t"), ("old", b"o"), ("keep", None)]
    outcome, (key, value, out) = run(s, record({"a": 1}, headers=headers))
    assert outcome == KEPT and key == b"k" and value == b'{"a": 1}'  # bytes untouched
    assert out == [("new", b"o"), ("keep", None), ("origin", b"eu-west"), ("p", b"2")]


def test_without_header_replication_only_inserted_headers_travel() -> None:
    s = steps(
        {"filter": {"keep": '"env" in headers'}},
        {"insertHeader": {"name": "origin", "value": "eu"}},
        keep_headers=False,
    )
    assert run(s, record(headers=[("env", b"p")]))[1][2] == [("origin", b"eu")]


def test_json_steps_drop_mask_rename_and_insert_fields() -> None:
    s = steps(
        {"dropFields": {"fields": ["value.card.number", "value.absent"]}},
        {"maskFields": {"fields": ["value.email", "value.age", "value.vip", "value.tags"]}},
        {"maskFields": {"fields": ["value.name"], "replacement": "***"}},
        {"renameFields": {"fields": {"value.cust": "customer"}}},
        {"insertField": {"field": "value.meta.origin", "value": "eu"}},
        {"maskFields": {"fields": ["key.id"], "replacement": "0"}},
    )
    value = {
        "cust": 1,
        "card": {"number": "4111", "exp": "12/30"},
        "email": "a@b",
        "age": 42,
        "vip": True,
        "tags": ["x"],
        "name": "Ann",
        "n": None,
    }
    _, (key, out, _) = run(s, record(value, key=b'{"id": 5}'))
    assert json.loads(out) == {
        "customer": 1,
        "card": {"exp": "12/30"},
        "email": "",
        "age": 0,
        "vip": False,
        "tags": [],
        "name": "***",
        "n": None,
        "meta": {"origin": "eu"},
    }
    assert next(iter(json.loads(out))) == "customer"  # the field keeps its place
    assert json.loads(key) == {"id": 0}


def test_keyed_hash_masks_equal_values_equally() -> None:
    s = steps({"maskFields": {"fields": ["value.email"], "hashSecret": "k3y"}})
    _, (_, a, _) = run(s, record({"email": "a@b"}))
    _, (_, b, _) = run(s, record({"email": "a@b", "x": 1}))
    expected = hmac.new(b"k3y", b'"a@b"', hashlib.sha256).hexdigest()
    assert json.loads(a)["email"] == json.loads(b)["email"] == expected
    assert "k3y" not in repr(s.steps)  # type: ignore[union-attr]


def test_tombstones_pass_json_steps_and_non_json_follows_the_policy() -> None:
    failing = steps({"maskFields": {"fields": ["value.email"]}})
    assert run(failing, record(None)) == (KEPT, (b"k", None, []))
    with pytest.raises(TransformFailed) as err:
        run(failing, record(b"plain text", offset=41))
    assert str(err.value) == (
        "transform failed on orders[2]@41: replication.transforms[0] (maskFields): "
        "the value is not JSON"
    )
    passing = steps({"maskFields": {"fields": ["value.email"], "nonJson": "pass"}})
    assert run(passing, record(b"plain text")) == (KEPT, (b"k", b"plain text", []))


def test_a_failing_step_stops_with_the_record_or_skips_it() -> None:
    s = steps({"filter": {"drop": 'headers.env == "test"'}})
    with pytest.raises(
        TransformFailed,
        match=r"orders\[2\]@7: replication.transforms\[0\] "
        r"\(filter\): no such key 'env'",
    ):
        run(s, record())
    skipping = steps({"filter": {"drop": 'headers.env == "test"', "onError": "skip"}})
    assert run(skipping, record()) == (FAILED, None)
    not_bool = steps({"filter": {"drop": "partition"}})
    with pytest.raises(TransformFailed, match="the expression gave 2, not true or false"):
        run(not_bool, record())


def test_compiled_steps_travel_pickled() -> None:
    s = steps(
        {"filter": {"drop": '"x" in headers'}},
        {"insertHeader": {"name": "t", "expression": 'topic + "-" + string(offset)'}},
    )
    again = pickle.loads(pickle.dumps(s))
    assert run(again, record(headers=[("x", b"1")]))[0] == FILTERED
    assert run(again, record())[1][2] == [("t", b"orders-7")]


def test_keep_fields_keeps_only_the_listed_fields_of_their_object() -> None:
    s = steps({"keepFields": {"fields": ["value.id", "value.card.exp"]}})
    _, (_, out, _) = run(s, record({"id": 1, "email": "a", "card": {"number": 4, "exp": 1}}))
    assert json.loads(out) == {"id": 1}  # card is not listed at the top: dropped with the rest
    nested = steps({"keepFields": {"fields": ["value.card.exp"]}})
    _, (_, out, _) = run(nested, record({"id": 1, "card": {"number": 4, "exp": 1}}))
    assert json.loads(out) == {"id": 1, "card": {"exp": 1}}


def test_the_target_topic_is_known_per_topic() -> None:
    s = steps({"filter": {"keep": 'targetTopic.startsWith("dr.")'}})
    assert s is None  # true for every record of the topic: no step left
    s = steps({"filter": {"drop": 'targetTopic == "dr.orders"'}})
    assert run(s, record())[0] == FILTERED


def test_a_record_no_step_changed_keeps_its_bytes() -> None:
    s = steps({"dropFields": {"fields": ["value.absent"]}}, {"maskFields": {"fields": ["value.n"]}})
    data = b'{ "a" : 1.50,  "n": null }'
    assert run(s, record(data)) == (KEPT, (b"k", data, []))
    s = steps({"dropFields": {"fields": ["value.a"]}}, {"filter": {"keep": 'value == "{}"'}})
    assert run(s, record(data))[0] == FILTERED  # the filter reads the rewritten value
    s = steps(
        {"dropFields": {"fields": ["value.a"]}}, {"filter": {"keep": 'value == "{\\"n\\":null}"'}}
    )
    assert run(s, record(data)) == (KEPT, (b"k", b'{"n":null}', []))


def test_a_chain_of_header_filters_decides_once_per_distinct_headers() -> None:
    s = steps(
        {"filter": {"drop": '"drop" in headers'}},
        {"filter": {"keep": 'partition != 3 || headers.env == "x"', "onError": "skip"}},
    )
    assert s is not None
    runs = []
    original = s.run
    s.run = lambda m: runs.append(m) or original(m)  # type: ignore[method-assign]
    a, drop, env = [("a", b"1")], [("drop", b"")], [("env", b"x")]
    arrivals = [(a, 2), (a, 2), (drop, 2), (a, 2), (a, 3), (env, 3), (a, 3)]
    seen = [
        s.outcome(record(headers=h, partition=p, offset=i)) for i, (h, p) in enumerate(arrivals)
    ]
    assert seen == [KEPT, KEPT, FILTERED, KEPT, FAILED, KEPT, FAILED]
    assert len(runs) == 4  # one evaluation per distinct (partition, headers)
    del s.run  # type: ignore[method-assign]
    again = pickle.loads(pickle.dumps(s))
    assert again._outcomes == {}  # type: ignore[attr-defined]


def test_a_header_filter_after_a_header_step_decides_on_the_headers_it_sees() -> None:
    s = steps(
        {"insertHeader": {"name": "o", "expression": "string(offset % 2)"}},
        {"filter": {"keep": 'headers.o == "0"'}},
    )
    outcomes = [run(s, record(headers=[("a", b"1")], offset=i))[0] for i in range(4)]
    assert outcomes == [KEPT, FILTERED, KEPT, FILTERED]
