"""Benchmarks and the demo: scripts run as `python -m benchmarks.<name>` (see the Makefile)."""
