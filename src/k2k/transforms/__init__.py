"""Record transforms (``replication[].transforms``): filters, header and JSON-field rewrites.

Runs on: driver (steps compiled once per topic into its plan) and executor (applied per
record by the copier, before it forms its runs). See docs/transforms.md.
"""

from k2k.transforms.steps import (
    FAILED,
    FILTERED,
    KEPT,
    Output,
    TopicSteps,
    compile_steps,
    steps_for,
)

__all__ = [
    "FAILED",
    "FILTERED",
    "KEPT",
    "Output",
    "TopicSteps",
    "compile_steps",
    "steps_for",
]
