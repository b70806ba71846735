"""Control topics on the TARGET cluster: who writes which partition, and how far it got.

* :mod:`k2k.coordination.assignment`: members, claims, releases and fencing (driver);
* :mod:`k2k.coordination.claims`: a runner's check that its claims are still its own;
* :mod:`k2k.coordination.progress`: the progress store read from the commit topic;
* :mod:`k2k.coordination.topics`: creating or validating the control topics.

The record formats live in :mod:`k2k.formats`. Nothing here imports :mod:`k2k.pipeline`.
"""
