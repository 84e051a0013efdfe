"""Benchmarks of spf (run each module with ``python -m experiments.NAME [--quick]``)."""
