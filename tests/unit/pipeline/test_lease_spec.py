"""The lease spec: no defaults of its own, every value from the pipeline's config model."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from k2k.config.loader import build_pipeline
from k2k.kafka.factory import delivery_timeout_s
from k2k.pipeline.driver.lease import lease_template
from k2k.pipeline.plan import (
    ClientSpec,
    CommitSpec,
    ControlTopicSpec,
    LeaseSpec,
    PolicySpec,
)

PIPELINE: dict[str, Any] = {
    "name": "orders-dr",
    "source": {"kafka": {"common": {"bootstrap.servers": "src:9092"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "tgt:9092"}}},
    "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": "source"}}],
}


def _template(**sections: Any) -> LeaseSpec:
    cfg = build_pipeline({**PIPELINE, **sections}, {})
    return lease_template(cfg, commit_partitions=3, assignment_partitions=2, member="m-1")


@pytest.mark.parametrize("spec", [LeaseSpec, ClientSpec, CommitSpec, ControlTopicSpec, PolicySpec])
def test_no_field_has_a_default_of_its_own(spec: type) -> None:
    defaulted = [
        f.name
        for f in dataclasses.fields(spec)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    assert defaulted == []


def test_the_config_model_defaults_reach_the_template() -> None:
    spec = _template()
    assert spec.commit == CommitSpec(
        exactly_once=False,
        batch_size=1000,
        batch_timeout_s=2.0,
        ack_timeout_s=300.0,
        identical_offsets=False,
    )
    assert spec.control_topics == ControlTopicSpec(
        pipeline="orders-dr",
        member="m-1",
        commit_group="orders-dr",
        commit_topic="__k2k_consumer-offsets",
        commit_partitions=3,
        assignment_topic="__k2k_assignment",
        assignment_partitions=2,
        sync_timeout_s=30.0,
        open_transaction_s=0.0,  # at-least-once: no transaction holds a read back
    )
    assert spec.policies == PolicySpec("fail", "fail", "fail", "warn", "fail")
    assert spec.lease_s == 300.0
    assert (spec.lease_id, spec.topics, spec.topic_ids) == (0, {}, {})
    assert (spec.control, spec.observer, spec.telemetry) == (None, None, False)
    assert spec.clients.control_consumer == {"bootstrap.servers": "tgt:9092"}
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_the_pipeline_settings_reach_the_template() -> None:
    spec = _template(
        features={"exactlyOnce": True},
        coordination={"commit": {"batchTimeout": "5s", "syncTimeout": "1m"}},
        errorHandling={
            "onCommitSyncTimeout": "ignore",
            "onControlMessageDeserializationError": "ignore",
            "onSourceRecordsLost": "continue",
            "onForeignWrites": "fail",
            "onOffsetGap": "map",
        },
        offsetMapping={"topic": "__k2k_offset_mappings"},
    )
    assert spec.commit.exactly_once
    assert spec.commit.batch_size == 10_000  # exactly-once's own batch size
    assert spec.commit.batch_timeout_s == 5.0
    # Exactly-once keeps the producer's delivery timeout, bounded by the transaction's.
    assert spec.commit.ack_timeout_s == delivery_timeout_s(spec.clients.target_producer)
    assert spec.control_topics.sync_timeout_s == 60.0
    # A syncTimeout the user set bounds the take-on's wait for open transactions too.
    assert spec.control_topics.open_transaction_s == 0.0
    # Not set: another runner's open transaction ends by its timeout (60 s) and the
    # broker's abort check.
    default = _template(features={"exactlyOnce": True})
    assert default.control_topics.open_transaction_s == 70.0
    assert spec.policies == PolicySpec("ignore", "ignore", "continue", "fail", "map")
