"""``k2k verify``: prove that the target holds what the source holds, record for record.

* :mod:`k2k.verify.align`: the pure alignment of one lane (expected vs actual records);
* :mod:`k2k.verify.task`: the Spark task per source partition (executor);
* :mod:`k2k.verify.job`: planning, the Spark job and the report (driver).

The package imports nothing itself: executors import only the task's modules, not the
driver's (the config model among them).
"""
