"""Throughput, latency and the harness's own share of a run's time."""
