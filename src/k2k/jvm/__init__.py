"""What every JVM k2k launches shares (Spark's driver, the embedded brokers, the registry):
the per-machine cache directory and class-data sharing archives."""
