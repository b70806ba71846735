"""``k2k verify``: prove that the target holds what the source holds, record for record.

Executor side (the Spark tasks):

* :mod:`k2k.verify.task`: the Spark task per source partition, and what it is given and returns;
* :mod:`k2k.verify.reading`: reading one side of a task (source or target records);
* :mod:`k2k.verify.align`: the pure alignment of one lane (expected vs actual records);
* :mod:`k2k.verify.schemas`: schema ids compared by the schema they name.

Driver side:

* :mod:`k2k.verify.job`: planning and running the Spark job;
* :mod:`k2k.verify.slicing`: cutting a large partition into slices, merging their results;
* :mod:`k2k.verify.progress`: the live view of what the tasks have read;
* :mod:`k2k.verify.report`: the outcome, as text or JSON.

The package imports nothing itself: executors import only the task's modules, not the
driver's (the config model among them).
"""
