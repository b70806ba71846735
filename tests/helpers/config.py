"""The smallest valid pipeline, and variants of it, for tests of the config model."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from k2k.config.loader import deep_merge

MINIMAL: dict[str, Any] = {
    "name": "orders-dr",
    "source": {"kafka": {"common": {"bootstrap.servers": "src:9092"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "tgt:9092"}}},
    "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": "source"}}],
}


def pipeline(overrides: Mapping[str, Any] | None = None, **replace: Any) -> dict[str, Any]:
    """MINIMAL deep-merged with ``overrides``; keyword arguments replace top-level keys."""
    data = deep_merge(copy.deepcopy(MINIMAL), overrides or {})
    for key, value in replace.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data
