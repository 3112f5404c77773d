"""Steeple benchmarks (issue 3): each ``python -m bench.<name>`` prints a table and writes
bench/results/<name>-<timestamp>.json. See bench/README.md and docs/performance.md."""
