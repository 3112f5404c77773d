"""Judging what the sink received against what was due: losses, duplicates, lateness.

Lateness of an occurrence = first arrival at the sink − its ``scheduled_for`` (the sink's
wall clock and the scheduler's are the same machine's). Later arrivals of the same key are
duplicates (at-least-once allows them; they are counted, not hidden).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bench.processes import Arrival
from bench.report import Figures, percentile


def parse_scheduled_for(text: str) -> int:
    """``2026-11-29T20:00:00Z`` → epoch ms."""
    moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return int(moment.timestamp()) * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    expected: int
    delivered: int  # distinct expected keys seen
    lost: int
    duplicates: int  # arrivals beyond the first per expected key
    unexpected: int  # arrivals of keys not expected (e.g. occurrences outside a window)
    first_arrival: dict[str, int]  # key → ns of its first arrival

    def lateness_ms(self, expected: Mapping[str, int]) -> list[float]:
        return [(ns / 1e6) - expected[k] for k, ns in self.first_arrival.items()]

    def figures(self, expected: Mapping[str, int]) -> Figures:
        late = self.lateness_ms(expected)
        return {
            "delivered": self.delivered,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "lateness_p50_ms": percentile(late, 50),
            "lateness_p95_ms": percentile(late, 95),
            "lateness_p99_ms": percentile(late, 99),
            "lateness_max_ms": max(late) if late else float("nan"),
            "lateness_min_ms": min(late) if late else float("nan"),
        }


def judge(arrivals: Iterable[Arrival], expected: Mapping[str, int]) -> Verdict:
    """``expected`` maps each due idempotency key to its ``scheduled_for`` (epoch ms)."""
    first: dict[str, int] = {}
    duplicates = unexpected = 0
    for arrival in arrivals:
        if arrival.key not in expected:
            unexpected += 1
        elif arrival.key in first:
            duplicates += 1
            first[arrival.key] = min(first[arrival.key], arrival.at_ns)
        else:
            first[arrival.key] = arrival.at_ns
    return Verdict(
        expected=len(expected),
        delivered=len(first),
        lost=len(expected) - len(first),
        duplicates=duplicates,
        unexpected=unexpected,
        first_arrival=first,
    )
