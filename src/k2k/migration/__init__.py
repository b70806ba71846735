"""Moving applications from the source cluster to the target: ``k2k cutover`` and its
offset-confidence report.

Runs on: the operator's machine (tool side, no Spark unless it must copy up to the cut
itself). It meets running members only through the control topics on the target (the
cut-over record, :mod:`k2k.formats.cutover`). docs/operations.md#cutting-over is the
operator's guide.
"""
