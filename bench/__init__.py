"""Benchmarks: run each as `python -m bench.<name>`."""
