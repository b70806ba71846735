"""k2k — Kafka-to-Kafka replication on Apache Spark."""

__all__ = ["__version__"]

__version__ = "0.1.0"
