"""Runs on: an executor, inside one Spark task per runner group. Never imports
:mod:`k2k.pipeline.driver`; it meets the driver only through :mod:`k2k.pipeline.plan` and
:mod:`k2k.pipeline.channel`."""
