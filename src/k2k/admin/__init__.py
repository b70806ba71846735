"""Operator commands that read, and move, a pipeline's state: ``k2k status`` and
``k2k offsets``.

* :mod:`k2k.admin.reader`: read-only access to a pipeline's control topics and source
  offsets (never writes to either cluster);
* :mod:`k2k.admin.status`: members, owners, committed positions and lag, as a table or JSON;
* :mod:`k2k.admin.offsets`: committed positions described, planned and moved (claiming and,
  exactly-once, fencing the partitions first, like a member does).

The CLI only parses options and prints; the logic lives here. Nothing here imports
:mod:`k2k.pipeline`.
"""
