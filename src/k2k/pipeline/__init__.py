"""The data path: ``driver/`` plans leases on the Spark driver, ``task/`` copies records inside
Spark tasks; ``plan.py`` (what a task is given) and ``channel.py`` (the lease's wire) are the
boundary between them."""
