"""Benchmark scripts that print the figures of DESIGN.md §8; run them with python -m backend.bench.<name>."""
