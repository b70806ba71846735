"""Throughput benchmarks of k2k on the embedded clusters (see docs/benchmarks.md)."""
