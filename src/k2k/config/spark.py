"""``spark``: where the replication job runs, how wide, how long a lease lasts, and where the
driver's lease channel listens."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from k2k.config.base import K2KModel
from k2k.config.fields import Count, Duration, StrMap

__all__ = ["Spark"]


class Spark(K2KModel):
    """Where and how wide the replication job runs."""

    master: str = Field(
        "local[*]",
        min_length=1,
        description="Spark master URL when `k2k start` starts Spark itself: `local[*]` "
        "(embedded), `spark://host:7077`, `yarn`, `k8s://...`. Ignored under `spark-submit` "
        "(its `--master` and `spark-defaults.conf` decide; see docs/spark.md).",
    )
    conf: StrMap = Field(
        default_factory=dict,
        description="Extra Spark configuration, e.g. `spark.executor.memory: 2g` (values are "
        "passed as strings). Under `spark-submit`, its own settings win over these.",
    )
    parallelism: Count | None = Field(
        None,
        ge=1,
        description="Most runner groups (concurrent Spark tasks); null means Spark's default "
        "parallelism. With a local master at most its cores (a group beyond them would wait "
        "for a free core until the lease ends). A continuous run holds this many task slots "
        "while it runs.",
    )
    lease_duration: Duration = Field(
        timedelta(minutes=5),
        description="With `--until-caught-up`: how long one Spark job (lease) runs before the "
        "planner re-plans. A continuous run's lease does not end at it: its runners take new "
        "topics and partitions, and members coming and going, while they copy.",
    )
    control_host: str | None = Field(
        None,
        min_length=1,
        description="Address executors connect to for the lease channel (the driver's small "
        "TCP service that tells runners to end a lease; `k2k verify`'s tasks report their "
        "progress over it). Null: `127.0.0.1` for a local master, "
        "else `spark.driver.host`. With a non-local master the channel listens on every "
        "interface.",
    )
    control_port: Count | None = Field(
        None,
        ge=1,
        le=65535,
        description="Port of the lease channel on the driver. Null: any free port; set it when "
        "a firewall between executors and driver must allow it (like `spark.driver.port`).",
    )
