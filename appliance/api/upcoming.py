"""Upcoming occurrences for ``next_runs``, computed once per (expression, timezone) and
reused by every request until time moves past them.

Rules this module guards:

- It answers exactly what ``occurrences_after(spec, after_ms)`` answers. The occurrences
  of a spec are one fixed set of instants (each wall time maps to its instants by the DST
  rules of ``core.cron``, whatever the starting point), so the occurrences after ``t`` are
  the values after ``t`` of a list computed from any anchor ``a <= t``, as long as that
  list holds them. Past the list's end it continues with ``occurrences_after`` from the
  last value, by the same argument.
- An entry is recomputed from the caller's instant when that instant is before its anchor
  (the wall clock stepped back) or fewer than :data:`RESERVE` values are left after it.
  A list shorter than :data:`WINDOW` holds every remaining occurrence (the spec stops
  firing before year 9999), so it is never short of values.
- Bounded: at most ``max_specs`` entries of :data:`WINDOW` values each, the least
  recently used dropped first (~6 MB at the default).
- Not thread-safe: use it from the event loop only (the views run there).
"""

from __future__ import annotations

import bisect
import itertools
from collections import OrderedDict
from collections.abc import Iterator

from appliance.core.cron import CronSpec, SharedOccurrences, occurrences_after

# Values computed per entry: a miss costs little more than computing next_runs directly
# (6), and an entry lasts until WINDOW - RESERVE + 1 occurrences have passed (3 years of a
# yearly spec, 3 s of an every-second one).
WINDOW = 8
RESERVE = 6  # values a caller may need at once: next_runs' 5, plus 1 for jitter's look-ahead
MAX_SPECS = 8192  # ~0.7 KB each


class UpcomingOccurrences(SharedOccurrences):
    """A :class:`SharedOccurrences` that lives as long as the app and forgets old starts."""

    def __init__(self, *, max_specs: int = MAX_SPECS) -> None:
        super().__init__()
        self._max_specs = max_specs
        self._entries: OrderedDict[tuple[str, str], tuple[int, list[int]]] = OrderedDict()

    def after(self, spec: CronSpec, after_ms: int) -> Iterator[int]:
        """The same values as ``occurrences_after(spec, after_ms)``."""
        values = self._values(spec, after_ms)
        yield from values[bisect.bisect_right(values, after_ms) :]
        if len(values) == WINDOW:  # the list was cut short: more follow its last value
            yield from occurrences_after(spec, values[-1])

    def __len__(self) -> int:
        return len(self._entries)

    def _values(self, spec: CronSpec, after_ms: int) -> list[int]:
        key = (spec.expression, spec.timezone)
        entry = self._entries.get(key)
        if entry is not None and _serves(entry, after_ms):
            self._entries.move_to_end(key)
            return entry[1]
        values = list(itertools.islice(occurrences_after(spec, after_ms), WINDOW))
        self._entries[key] = (after_ms, values)
        self._entries.move_to_end(key)
        if len(self._entries) > self._max_specs:
            self._entries.popitem(last=False)
        return values


def _serves(entry: tuple[int, list[int]], after_ms: int) -> bool:
    anchor, values = entry
    if after_ms < anchor:
        return False
    left = len(values) - bisect.bisect_right(values, after_ms)
    return left >= RESERVE or len(values) < WINDOW
