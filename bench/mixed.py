"""The mixed-latency workload: receivers that take 5–50 ms, spread over 20 hosts.

Occurrence ``i`` of a workload of N goes to host ``i % hosts`` — the sink's address
127.0.0.<2 + i % hosts> (``bench.sink --hosts``), one port — at the path
``/mixed/<ms>``, which the sink answers ``<ms>`` after the request arrived. ``<ms>`` is
drawn deterministically from ``i`` (a multiplicative hash, uniform over 5–50 ms, mean
≈ 27.5 ms), so every system delivering the workload meets the very same receivers:
Steeple gets one schedule per URL, the peers one job per URL (``--targets``).
"""

from __future__ import annotations

from pathlib import Path

HOSTS = 20
LATENCY_MS = (5, 50)  # inclusive


def latency_ms(i: int) -> int:
    """The receiver latency of occurrence ``i``: uniform over :data:`LATENCY_MS`."""
    lo, hi = LATENCY_MS
    return lo + ((i * 2_654_435_761) % 2**32) % (hi - lo + 1)


def targets(port: int, n: int, *, hosts: int = HOSTS) -> list[str]:
    """The URL of each of ``n`` occurrences (the sink's port)."""
    return [f"http://127.0.0.{2 + i % hosts}:{port}/mixed/{latency_ms(i)}" for i in range(n)]


def write_targets(path: Path, urls: list[str]) -> Path:
    """One URL a line, line ``i`` for job ``i`` (the peers' ``--targets``)."""
    path.write_text("".join(f"{url}\n" for url in urls))
    return path


def read_targets(path: Path) -> list[str]:
    return path.read_text().split()
