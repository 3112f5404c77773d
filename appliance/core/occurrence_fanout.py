"""Occurrences fanned out within one planner pass: each distinct (spec, start) is read
from the occurrence cache once, and every schedule sharing it iterates the same list.

In a pass, hundreds of schedules share a handful of (expression, zone) pairs and, most
of the time, the same cursor (a cursor is the spec's next occurrence). Reading the
occurrence cache costs a dict look-up, a bisect and a generator step per value per
schedule; here it is one dict look-up per schedule.

Rules this module guards:

- **Exact.** ``after(spec, t)`` yields exactly what ``OccurrenceCache.after(spec, t)``
  yields, however far the caller reads: the memoised prefix first (every occurrence up to
  the pass's ``horizon``, at most ``limit`` of them, and the two after those), then — if
  the caller reads on and the spec had not ended — the cache's own iterator from the
  prefix's last value. Jitter, bounds and catch-up stay per schedule (``core.jitter``,
  ``core.timing``, ``store.plan_pass``): only the nominal instants are shared.
- One pass, one owner: built per pass over the planner's cache, dropped with the pass
  (its memo is bounded by the pass's distinct (spec, start) pairs).
"""

from __future__ import annotations

from collections.abc import Iterator

from appliance.core.cron import CronSpec
from appliance.core.occurrence_cache import OccurrenceCache

# Held past the horizon: the first instant there (the new cursor, the last planned one's
# successor) and the one after it (that successor's jitter gap).
AFTER_HORIZON = 2


class FannedOut:
    """The :class:`OccurrenceCache` interface the planner's streams use (``spec``,
    ``after``), with each (spec, start) computed once per pass."""

    def __init__(self, cache: OccurrenceCache, *, horizon: int, limit: int) -> None:
        self._cache = cache
        self._horizon = horizon
        self._limit = limit  # instants up to the horizon held per (spec, start)
        self._prefixes: dict[tuple[tuple[str, str, str, str], int], tuple[list[int], bool]] = {}

    def spec(
        self,
        expression: str,
        timezone: str,
        dst_gap: str | None = None,
        dst_fold: str | None = None,
    ) -> CronSpec:
        return self._cache.spec(expression, timezone, dst_gap, dst_fold)

    def after(self, spec: CronSpec, after_ms: int) -> Iterator[int]:
        """The same values as ``OccurrenceCache.after(spec, after_ms)``."""
        key = (spec.identity, after_ms)
        found = self._prefixes.get(key)
        if found is None:
            found = self._prefixes[key] = self._prefix(spec, after_ms)
        values, ended = found
        if ended:
            return iter(values)
        return self._continued(spec, values, after_ms)

    def _continued(self, spec: CronSpec, values: list[int], after_ms: int) -> Iterator[int]:
        yield from values
        yield from self._cache.after(spec, values[-1] if values else after_ms)

    def _prefix(self, spec: CronSpec, after_ms: int) -> tuple[list[int], bool]:
        """The memoised values and whether the spec ended within them."""
        values: list[int] = []
        past = 0  # values taken past the horizon (or past the limit)
        for value in self._cache.after(spec, after_ms):
            values.append(value)
            if past or value > self._horizon or len(values) > self._limit:
                past += 1
                if past == AFTER_HORIZON:
                    return values, False
        return values, True
