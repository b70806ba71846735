"""Kafka clients for k2k: construction with k2k's settings, admin queries, fault classes."""
