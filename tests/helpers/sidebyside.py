"""Two ``k2k start`` pipelines copying one source topic side by side, at-least-once to
``alo.<t>`` and exactly-once to ``eos.<t>``: the drills that kill or restart brokers run
both modes under one load (broker start-ups and the outages are most of a drill's time, and
both modes ride out the same ones). What each must leave: :mod:`tests.helpers.compare`."""

from __future__ import annotations

from typing import Any

from tests.helpers.eos import eos_pipeline
from tests.helpers.kafka import Clusters
from tests.helpers.pipelines import pipeline_dict

__all__ = ["PREFIXES", "side_by_side_docs"]

#: Where each pipeline writes the source topic ``t``: ``<prefix>t`` on the target.
PREFIXES = {"at-least-once": "alo.", "exactly-once": "eos."}


def side_by_side_docs(
    clusters: Clusters, topic: str, suffix: str, **common: Any
) -> dict[str, dict[str, Any]]:
    """The two pipelines by mode: same source topic, one target topic each, the
    at-least-once one with the source offset in a header (to tell a replay from a loss);
    ``common`` deep-updates both (e.g. one Spark core each)."""
    alo_name = f"p-alo-{suffix}"
    alo = pipeline_dict(
        clusters,
        alo_name,
        [topic],
        features={"tracingHeaders": {"offset": "enabled"}},
        coordination={"assignment": {"topic": f"__k2k_assignment-{alo_name}"}},
        **common,
    )
    eos = eos_pipeline(clusters, f"p-eos-{suffix}", [topic], **common)
    docs = {"at-least-once": alo, "exactly-once": eos}
    for mode, doc in docs.items():
        doc["replication"][1]["sink"]["topic"] = {"prefix": PREFIXES[mode]}
    return docs
