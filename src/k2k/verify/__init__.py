"""``k2k verify``: prove that the target holds what the source holds, record for record.

* :mod:`k2k.verify.align`: the pure alignment of one lane (expected vs actual records);
* :mod:`k2k.verify.task`: the Spark task per source partition (executor);
* :mod:`k2k.verify.job`: planning, the Spark job and the report (driver).
"""

from k2k.verify.job import VerifyReport, plan_tasks, run_verify

__all__ = ["VerifyReport", "plan_tasks", "run_verify"]
