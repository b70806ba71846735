"""A source partition whose newest offsets are an aborted transaction (its records and its
abort marker: offsets no consumer is given) is committed to its end in both modes, so its
lag reaches 0 and a cut-over's drain ends (the cut-over drill met one that never did)."""

from __future__ import annotations

import pytest

from tests.helpers.eos import eos_pipeline
from tests.helpers.kafka import create_topic, end_offsets, eventually, produce, produce_transaction
from tests.helpers.pipelines import latest_progress, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration


def test_a_partition_ending_in_an_aborted_transaction_is_committed_to_its_end(
    clusters, tmp_path, topic_name
):
    t = topic_name("abortedtail")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, b"k", b"plain-%d" % i, [], None) for i in range(3)])
    docs = {
        "at-least-once": pipeline_dict(clusters, topic_name("tail-alo"), t),
        "exactly-once": eos_pipeline(clusters, topic_name("tail-eos"), [t]),
    }
    docs["exactly-once"]["replication"][1]["sink"]["topic"] = {"prefix": "eos."}
    procs = {
        mode: K2KProcess(write_pipeline(tmp_path, doc, f"{mode}.yaml"), tmp_path / f"{mode}.log")
        for mode, doc in docs.items()
    }

    def committed(doc: dict) -> int:
        return getattr(latest_progress(clusters.target, doc).get((t, 0)), "offset", 0)

    try:
        for doc in docs.values():  # both copy, and committed progress for the partition
            eventually(lambda doc=doc: committed(doc), expected=3, timeout=120, interval=0.5)
        aborted = [(0, b"k", b"aborted-%d" % i, [], None) for i in range(2)]
        produce_transaction(clusters.source, t, aborted, outcome="abort")
        end = end_offsets(clusters.source, t)[0]
        assert end == 6  # three records, two aborted ones and the abort marker
        for mode, doc in docs.items():
            eventually(lambda doc=doc: committed(doc), expected=end, timeout=30, interval=0.5)
            assert procs[mode].stop() == 0, procs[mode].output()[-2000:]
    finally:
        for proc in procs.values():
            if proc.proc.poll() is None:
                proc.kill()
