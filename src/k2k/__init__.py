"""k2k — Kafka-to-Kafka replication on Apache Spark.

The Python API (:mod:`k2k.api`, guide in docs/api.md) is importable from here::

    import k2k

    replicator = k2k.Replicator(k2k.load_pipeline("pipeline.yaml"))

Its names load on first use: ``import k2k`` alone imports nothing else, so the command
line, Spark's executors and programs that only import k2k stay quick and never load pyspark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k2k.api import (
        PipelineConfig,
        PipelineStats,
        PipelineStatus,
        Replicator,
        VerifyReport,
        load_pipeline,
    )

__all__ = [
    "PipelineConfig",
    "PipelineStats",
    "PipelineStatus",
    "Replicator",
    "VerifyReport",
    "__version__",
    "load_pipeline",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """The API's names, imported from :mod:`k2k.api` when first asked for (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'k2k' has no attribute {name!r}")
    value = getattr(importlib.import_module("k2k.api"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
